"""What a miss decided by a shipped rule does, and does not do: the rule file read once a
process (again only when the file changes), no older-identity look-ups, no lock, no record,
literal settings resolved once (real rule files, real kernels under the interpreter)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from rule_helpers import SPACE, rule_file, run, ship
from runtime_helpers import call, record_files, site
from runtime_kernels import vadd

from tunedsl.errors import CacheWarning
from tunedsl.model.config import Config
from tunedsl.store import paths
from tunedsl.store import rules as rule_store

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]


def test_unseen_keys_decided_by_one_rule_read_its_file_once_and_write_nothing(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    from tunedsl.runtime import legacy_records

    ship(built_rules, monkeypatch, tmp_path)
    reads: list[Path] = []
    real_read = rule_store.read_rule_file
    monkeypatch.setattr(rule_store, "read_rule_file", lambda p: (reads.append(p), real_read(p))[1])
    older: list = []
    real_migrate = legacy_records.migrate
    monkeypatch.setattr(
        "tunedsl.runtime.legacy_records.migrate", lambda *a: (older.append(a), real_migrate(*a))[1]
    )
    assert [run("swept", n).source for n in (300, 301, 700)] == ["rule"] * 3
    assert reads == [rule_file(built_rules)] and tune_count == []
    # A key with no record asks the rule before the records of the site's older identities.
    assert older == []
    # Kept in memory only: no record written, no lock taken.
    assert record_files() == []
    locks = paths.locks_dir()
    assert not locks.exists() or list(locks.iterdir()) == []


def _other_pick(path: Path) -> Config:
    """A configuration of the space that the shipped rule does not pick for any key."""
    data = json.loads(path.read_text())
    picked = {json.dumps(c, sort_keys=True) for c in data["configs"]}
    for tile in SPACE["tile"]:
        if json.dumps(Config(tile=tile).to_json(), sort_keys=True) not in picked:
            return Config(tile=tile)
    pytest.skip("the rule uses every configuration of the space")


def test_a_rule_rebuilt_while_the_process_runs_decides_the_next_unseen_key(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    path = rule_file(built_rules)
    first = run("swept", 300)
    assert first.source == "rule"
    other = _other_pick(path)
    data = json.loads(path.read_text())
    data["configs"] = [other.to_json()] * len(data["configs"])
    replacement = path.with_name(".new")
    replacement.write_text(json.dumps(data))
    os.chmod(replacement, 0o600)
    os.replace(replacement, path)  # as `tunedsl rules build` writes it: a new file
    res = run("swept", 301)
    assert res.source == "rule" and res.config == other and tune_count == []


def test_a_rule_file_opened_to_others_after_it_was_read_is_no_longer_trusted(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    assert run("swept", 300).source == "rule"
    os.chmod(rule_file(built_rules), 0o666)
    with pytest.warns(CacheWarning, match="writable by group or others"):
        res = run("swept", 301)
    assert res.source == "tuned" and len(tune_count) == 1


def test_literal_settings_resolve_once_yet_follow_the_knobs(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    from tunedsl.model import settings as settings_module

    ship(built_rules, monkeypatch, tmp_path)
    resolved: list = []
    real = settings_module.resolve
    monkeypatch.setattr(
        "tunedsl.runtime.site.resolve_settings", lambda *a: (resolved.append(a), real(*a))[1]
    )
    s = site("swept", space=SPACE)

    def once(n: int):
        a, b = torch.randn(n), torch.randn(n)
        return call(s, vadd, (a, b, torch.empty(n), n), n)

    assert once(300).source == "rule" and once(301).source == "rule"
    assert len(resolved) == 1
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "off")  # a knob the settings read: resolved again
    assert once(302).source == "default" and len(resolved) == 2
