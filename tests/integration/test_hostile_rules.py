"""Rule files damaged or written to mislead, read by a real run: each is a miss with one
warning naming the file and the field, never a crash in the launch nor a launch of what the
file claims without its swept keys behind it (real kernels under the interpreter, real rule
files built by the real `tunedsl rules build`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rule_helpers import rule_file, rules_cli, run, ship

from tunedsl.errors import CacheWarning

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]


def _sizes(data: dict) -> list[str]:
    return sorted(f for f in data["families"][0]["ranges"] if "shape" in f)


def _one_swept_value(data: dict) -> None:
    # Every swept key's second size at one value, under a range that still spans the sweep.
    fam = data["families"][0]
    second = _sizes(data)[1]
    for point in fam["points"]:
        point["x"][second] = fam["points"][0]["x"][second]


def _range_past_the_sweep(data: dict) -> None:
    # Ranges that claim sizes up to 2**60 the swept keys never had.
    fam = data["families"][0]
    for f in _sizes(data):
        fam["ranges"][f] = [fam["ranges"][f][0], 60.0]


def _a_swept_key_without_a_size(data: dict) -> None:
    del data["families"][0]["points"][0]["x"][_sizes(data)[0]]


def _a_swept_key_past_any_size(data: dict) -> None:
    # A swept key of size 2**(1e200), its range spanning it, under the nearest-key map: the
    # distance to it squared raised OverflowError out of the launch.
    fam = data["families"][0]
    fam.update(model="nearest", tree=None)
    widest = max(fam["points"], key=lambda point: point["x"][_sizes(data)[0]])
    for f in _sizes(data):
        widest["x"][f] = 1e200
        fam["ranges"][f] = [fam["ranges"][f][0], 1e200]


@pytest.mark.parametrize(
    "damage",
    [
        _one_swept_value,
        _range_past_the_sweep,
        _a_swept_key_without_a_size,
        _a_swept_key_past_any_size,
    ],
    ids=[
        "one swept value",
        "range past the sweep",
        "swept key without a size",
        "swept key past any size",
    ],
)
def test_ranges_that_are_not_the_swept_keys_ranges_are_a_miss_with_a_warning(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    damage,
) -> None:
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    ship(built_rules, monkeypatch, tmp_path)
    # Where tuning may not run, the damaged rule decides nothing: the site's default, no
    # crash (a range with one swept value raised ValueError out of the launch).
    with pytest.warns(CacheWarning, match=r"ignoring rule .*families\[0\]"):
        res = run("swept", 300, mode="cached")
    assert res.source == "default" and tune_count == []
    # Where it may, the key is tuned, as with no rule: a size past the sweep (64-1024) that a
    # damaged range would claim (small, as the interpreter runs every configuration on it).
    assert run("swept", 4099).source == "tuned"


@pytest.mark.parametrize("action", ["show", "check"])
def test_rules_show_and_check_print_a_rules_control_characters_escaped(
    built_rules: Path, action: str
) -> None:
    # A rule file's text (its GPU's name, a feature's name) could carry escape sequences
    # that clear or rewrite the screen of whoever reads it with `rules show` or `check`.
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    data["device"]["name"] = "GPU\x1b[2J\x1b]0;title\x07"
    data["validation"]["keys"] = "\x1b[31mred"
    path.write_text(json.dumps(data))
    done = rules_cli(action, str(built_rules))
    printed = done.stdout + done.stderr
    assert "GPU\\x1b[2J\\x1b]0;title\\x07" in printed, printed
    assert "\x1b" not in printed and "\x07" not in printed


def test_rules_build_prints_a_records_site_name_escaped(tmp_path: Path) -> None:
    # Records shipped by someone else (`--records DIR`) name their site: a name carrying
    # escape sequences must not reach the screen of whoever builds rules from them.
    from rule_helpers import sweep

    name = "evil\x1b]0;title\x07\x1b[2J"
    sweep(name, sizes=(64, 128))  # two keys: too few to validate, so a note names the site
    built = rules_cli("build", "--out", str(tmp_path / "rules"))
    assert built.returncode == 0, built.stderr
    misspelled = rules_cli("build", "--site", "nothere", "--out", str(tmp_path / "none"))
    assert misspelled.returncode == 1
    for done in (built, misspelled):
        printed = done.stdout + done.stderr
        assert "evil\\x1b]0;title\\x07\\x1b[2J" in printed, printed
        assert "\x1b" not in printed and "\x07" not in printed, printed


def test_rule_files_beside_records_are_not_read_as_damaged_records(
    built_rules: Path, tmp_path: Path
) -> None:
    # The shipped layout: records and the rules built from them in one directory.
    from tunedsl.store import paths

    shipped = tmp_path / "shipped"
    shipped.mkdir(mode=0o700)
    for path in [*paths.records_dir().glob("*.json"), rule_file(built_rules)]:
        (shipped / path.name).write_bytes(path.read_bytes())
    env = {**os.environ, "TUNEDSL_RECORDS_PATH": str(shipped)}
    listed = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "ls"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert listed.returncode == 0 and "swept" in listed.stdout, listed.stderr
    assert ".rule.json" not in listed.stdout + listed.stderr
    again = rules_cli("build", "--records", str(shipped), "--out", str(tmp_path / "again"))
    assert again.returncode == 0 and "swept" in again.stdout, again.stderr
    assert ".rule.json" not in again.stderr  # no "ignoring tuning record ...rule.json"


def test_a_stale_rules_warning_prints_its_gpu_name_escaped(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    data["device"]["name"] = "GPU\x1b[2J"
    path.write_text(json.dumps(data))
    ship(built_rules, monkeypatch, tmp_path)
    with pytest.warns(CacheWarning, match=r"measured on GPU\\x1b\[2J with") as caught:
        assert run("swept", 300).source == "tuned"
    assert not any("\x1b" in str(w.message) for w in caught)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root"
)
def test_a_rule_file_another_user_owns_is_refused_in_plain_words(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    # The warning carried Python's "[Errno 1]" inside its text.
    path = rule_file(built_rules)
    os.chown(path, 65534, -1)  # nobody
    ship(built_rules, monkeypatch, tmp_path)
    with pytest.warns(CacheWarning) as caught:
        res = run("swept", 300, mode="cached")
    assert res.source == "default" and tune_count == []  # still not trusted
    (said,) = [str(w.message) for w in caught if "ignoring rule" in str(w.message)]
    assert f"ignoring rule {path}: " in said, said
    assert "owned by another user, uid 65534 (nobody)" in said, said
    import pwd

    assert f"chown {pwd.getpwuid(os.getuid()).pw_name} {path}" in said, said
    assert "Errno" not in said, said


@pytest.mark.parametrize("schema", [[], {"a": 1}], ids=["a list", "an object"])
def test_a_rule_file_whose_schema_is_not_a_number_is_damage_not_a_crash(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, schema
) -> None:
    # One such file of any site, anywhere on the path, raised TypeError out of every launch
    # that no rule decided (each miss reads the path's rules of other sites) and out of
    # `rules show` and `check`.
    damaged = built_rules / ("0" * 64 + ".rule.json")
    damaged.write_text(json.dumps({"kind": "tunedsl-rule", "schema": schema, "site": "x"}))
    damaged.chmod(0o600)
    ship(built_rules, monkeypatch, tmp_path)
    assert run("unswept", 100).source == "tuned"  # a site with no rule of its own
    for action in ("show", "check"):
        done = rules_cli(action, str(built_rules))
        assert "Traceback" not in done.stderr, done.stderr
        assert f"rule schema {schema!r} is not one this tunedsl reads" in done.stderr
