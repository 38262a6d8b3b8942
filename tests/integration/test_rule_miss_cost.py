"""What a miss decided by a shipped rule does, and does not do: the rule file read once a
process (again only when the file changes), no older-identity look-ups, no lock, no record,
literal settings resolved once (real rule files, real kernels under the interpreter)."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import pytest
import torch
from rule_helpers import SPACE, rule_file, run, ship
from runtime_helpers import call, record_files, site
from runtime_kernels import vadd, vadd_even

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


@pytest.mark.parametrize("sites", ["a site a size", "one site (its plan)"])
def test_a_rule_put_in_place_by_another_user_after_its_directory_opened_is_not_trusted(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list, sites: str
) -> None:
    """A later miss checks the rule file alone: a directory opened to others after the rule
    was read keeps what its owner wrote, but any file put in its place is read again under
    the directory's check (here by uid 65534, a second local user). One site's later sizes
    are its plan's, which compares the same signature."""
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to act as a second local user (uid 65534)")
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-rule-trust-"))  # reachable by that user
    try:
        shared.chmod(0o755)
        rules = shared / "rules"
        shutil.copytree(built_rules, rules)
        ship(rules, monkeypatch, tmp_path)
        path = rule_file(rules)
        one = site("swept", space=SPACE)
        miss = (lambda n: run("swept", n)) if sites == "a site a size" else partial(_calls, one)
        first = miss(300)
        assert first.source == "rule"
        rules.chmod(0o777)  # opened to writes by others; the file itself unchanged
        assert miss(301).source == "rule"
        other = _other_pick(path)
        data = json.loads(path.read_text())
        data["configs"] = [other.to_json()] * len(data["configs"])
        plant = (
            "import os, sys; open(sys.argv[1], 'w').write(sys.argv[3]); os.replace(*sys.argv[1:3])"
        )
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
             "-I", "-c", plant, str(rules / ".planted"), str(path), json.dumps(data)],
            check=True, timeout=60, cwd="/",
        )  # fmt: skip
        assert path.stat().st_uid == 65534
        with pytest.warns(CacheWarning, match="writable by group or others"):
            res = miss(302)
        assert res.source == "tuned" and len(tune_count) == 1
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_literal_settings_resolve_once_yet_follow_the_knobs(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    from tunedsl.model import settings as settings_module

    ship(built_rules, monkeypatch, tmp_path)
    resolved: list = []
    real = settings_module.resolve
    monkeypatch.setattr(
        "tunedsl.runtime.site_settings.resolve_settings",
        lambda *a: (resolved.append(a), real(*a))[1],
    )
    s = site("swept", space=SPACE)

    def once(n: int):
        a, b = torch.randn(n), torch.randn(n)
        return call(s, vadd, (a, b, torch.empty(n), n), n)

    assert once(300).source == "rule" and once(301).source == "rule"
    assert len(resolved) == 1
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "off")  # a knob the settings read: resolved again
    assert once(302).source == "default" and len(resolved) == 2


def _calls(s, n: int):
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    res = call(s, vadd, (a, b, c, n), n)
    torch.testing.assert_close(c, a + b)
    return res


def test_keys_a_rule_decides_share_the_process_context_worked_out_once(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    import triton._C.libtriton as libtriton

    from tunedsl.backends.triton import kernel_info
    from tunedsl.model.key_digest import KeyDigest
    from tunedsl.runtime import decide

    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    contexts: list = []
    real_context = decide.context
    monkeypatch.setattr(decide, "context", lambda *a: (contexts.append(a), real_context(*a))[1])
    env_reads: list = []
    real_env = libtriton.get_cache_invalidating_env_vars
    monkeypatch.setattr(
        libtriton, "get_cache_invalidating_env_vars", lambda: (env_reads.append(1), real_env())[1]
    )
    results = [_calls(s, n) for n in (300, 301, 302, 700)]
    assert [r.source for r in results] == ["rule"] * 4 and tune_count == []
    # The context (device, toolchain, Triton's environment) and its JSON: once for the site.
    assert len(contexts) == 1 and len(env_reads) <= 1
    # Each key's digest is still the one the whole context names.
    context = real_context(kernel_info(vadd), s.settings(None))
    assert [r.digest for r in results] == [KeyDigest(r.site, context)(r.key) for r in results]


def test_a_triton_variable_set_between_two_misses_is_in_the_next_keys_digest(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert _calls(s, 300).source == "rule"
    # Triton compiles differently now: the rule (named for the environment it was built in)
    # no longer decides, and the record made instead names the new environment.
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")
    res = _calls(s, 301)
    assert res.source == "tuned" and len(tune_count) == 1
    assert "TRITON_DISABLE_LINE_INFO" in res.record.context["env"]


def test_a_record_another_process_writes_meanwhile_wins_over_the_rule(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    import subprocess
    import sys

    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert _calls(s, 300).source == "rule"
    # Another process of this user, without the shipped rules, tunes a key this one has not
    # seen, into the same cache.
    env = {k: v for k, v in os.environ.items() if k != "TUNEDSL_RECORDS_PATH"}
    code = "from rule_helpers import run; print(run('swept', 301).source)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent,
        env={**env, "PYTHONPATH": str(Path(__file__).parent)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.split() == ["tuned"], done.stderr
    res = _calls(s, 301)
    assert res.source == "disk" and tune_count == []
    assert res.config == res.record.chosen


def test_the_first_hit_of_each_new_key_of_one_layout_compiles_no_code_again(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import builtins

    from tunedsl.model import repeat_check

    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    compiled: list[str] = []

    def counting(source, filename, *rest):
        compiled.append(filename)
        return builtins.compile(source, filename, *rest)

    # The generated repeat check each key's first hit builds.
    monkeypatch.setattr(repeat_check, "compile", counting, raising=False)
    sizes = (304, 320, 336, 352, 368)  # one layout: every size a multiple of 16, a new key
    for n in sizes:
        assert _calls(s, n).source == "rule"
        assert _calls(s, n).source == "memory"  # its first hit: the repeat check is built
    assert all(_calls(s, n).source == "memory" for n in sizes)  # and each one works
    assert len(compiled) <= 1, compiled


def test_keys_that_alternate_build_no_repeat_check_until_one_comes_twice_in_a_row(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tunedsl.model import repeat_check

    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    built: list[object] = []
    real = repeat_check.compile_repeat_check
    monkeypatch.setattr(
        repeat_check, "compile_repeat_check", lambda code: (built.append(code), real(code))[1]
    )
    sizes = (304, 320, 336)
    assert [_calls(s, n).source for n in sizes] == ["rule"] * 3
    for _ in range(2):  # a serving loop whose sizes take turns: a check would never pass
        assert [_calls(s, n).source for n in sizes] == ["memory"] * 3
    assert _calls(s, 320).source == "memory"  # after 336: still no repeat
    assert built == []
    assert [_calls(s, 320).source for _ in range(3)] == ["memory"] * 3  # twice in a row: built
    assert len(built) == 1


@pytest.fixture
def launchers_made(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every Launcher made from now on."""
    from tunedsl.backends import triton_launch

    made: list[object] = []
    real_init = triton_launch.Launcher.__init__

    def counting_init(self: object, *args: object, **kwargs: object) -> None:
        made.append(self)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(triton_launch.Launcher, "__init__", counting_init)
    return made


def test_keys_that_triton_specializes_alike_share_one_launcher(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    launchers_made: list,
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    groups = set()
    for n, offset in ((300, 0), (301, 0), (302, 0), (305, 0), (303, 1), (307, 1)):
        # offset 1: a, b and c start one float past a 16-byte boundary (another
        # specialization for Triton, so another launcher)
        a, b, c = (torch.randn(n + offset)[offset:] for _ in range(3))
        res = call(s, vadd, (a, b, c, n), n)
        torch.testing.assert_close(c, a + b)
        assert res.source == "rule"
        groups.add((res.config, offset))
    # Sizes 300, 301, 302 and 305 are all of int class "i": one launcher per configuration
    # the rule picks for them, and one more for the misaligned call.
    assert len(launchers_made) == len(groups) < 5 and tune_count == []


def test_a_launcher_is_shared_only_by_calls_of_the_same_configuration_keyword_arguments(
    launchers_made: list,
) -> None:
    from tunedsl.runtime.helpers import cdiv

    s = site("even", space={"tile": [32]})
    for n in (320, 336, 352):  # int class "i16" each; EVEN: True, False, True
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        s(vadd_even, (a, b, c, n), {},
          lambda cfg, n=n: ((), {"TILE": cfg.tile, "EVEN": n % cfg.tile == 0},
                            (cdiv(n, cfg.tile),)), None, None)  # fmt: skip
        torch.testing.assert_close(c, a + b)
    # 352 shares 320's launcher; 336, launched with EVEN=False, has its own.
    assert len(launchers_made) == 2


def test_a_plans_keys_share_a_launcher_only_where_their_configuration_keyword_arguments_match(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    """A layout's plan keeps each pick's launchers by the call's configuration-dependent
    keyword arguments, their values' classes included (EVEN=1 is not EVEN=True, though
    equal): the launcher each planned key gets is the one the site's shared launchers give
    for the same call."""
    from rule_helpers import SWEPT, rules_cli

    from tunedsl.runtime.helpers import cdiv

    def even(s, n: int, as_int: bool = False):
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        flag = (lambda v: int(v)) if as_int else bool
        res = s(vadd_even, (a, b, c, n), {},
                lambda cfg: ((), {"TILE": cfg.tile, "EVEN": flag(n % cfg.tile == 0)},
                             (cdiv(n, cfg.tile),)), None, None)  # fmt: skip
        torch.testing.assert_close(c, a + b)
        return res

    sweeping = site("even", space=SPACE)
    assert {even(sweeping, n).source for n in SWEPT} == {"tuned"}
    out = tmp_path / "rules"
    assert rules_cli("build", "--out", str(out)).returncode == 0
    ship(out, monkeypatch, tmp_path)
    tune_count.clear()
    s = site("even", space=SPACE)
    # Multiples of 256: every tile divides them (EVEN holds), and one layout (class i16).
    calls = [(256, False), (512, True), (768, False), (1024, True), (320, False), (352, True)]
    results = [even(s, n, as_int) for n, as_int in calls]
    assert {r.source for r in results} == {"rule"} and tune_count == []
    launchers = {e.result.digest: e.launcher_object for e in s._table.values()}
    got = [launchers[r.digest] for r in results]
    for (n, as_int), r, launcher in zip(calls, results, got, strict=True):
        flag = (n % r.config.tile == 0) if not as_int else int(n % r.config.tile == 0)
        for (m, other_int), q, other in zip(calls, results, got, strict=True):
            other_flag = m % q.config.tile == 0
            other_flag = int(other_flag) if other_int else other_flag
            same = (r.config, type(flag), flag) == (q.config, type(other_flag), other_flag)
            assert (launcher is other) == same, (n, m)


#: Python calls (functions, methods, comprehensions, generator steps) a miss that a rule
#: decides makes from the site's call to its first launch (the interpreted kernel run aside):
#: about 195 before the per-miss work was cut, 102 with a plan per layout, 79 since a plan
#: keeps what the keys launching one configuration share, 58 since it keeps each pick's
#: launchers, its family's range test and the tensors' places made once (Python 3.11).
MAX_CALLS_PER_RULE_MISS = 60


def test_a_miss_a_rule_decides_makes_few_python_calls_before_its_launch(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    """A structural measure of a rule-decided miss's cost (not a timing): each Python call
    the decision makes is a fraction of a microsecond, and they add up."""
    import collections
    import sys

    from tunedsl.backends.triton_launch import Launcher

    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert _calls(s, 300).source == "rule"  # the rule file read, the site's context worked out
    launch = Launcher.__call__.__code__
    counted: collections.Counter = collections.Counter()
    inside = 0

    def profile(frame, event, arg) -> None:  # type: ignore[no-untyped-def]
        nonlocal inside
        code = frame.f_code
        if event == "call":
            if code is launch:
                inside += 1
            elif not inside:
                counted[f"{Path(code.co_filename).name}:{code.co_name}"] += 1
        elif event == "return" and code is launch:
            inside -= 1

    sizes = (301, 302, 303, 305)
    tensors = [(torch.randn(n), torch.randn(n), torch.empty(n), n) for n in sizes]
    sys.setprofile(profile)
    try:
        results = [call(s, vadd, args, args[3]) for args in tensors]
    finally:
        sys.setprofile(None)
    assert [r.source for r in results] == ["rule"] * len(sizes) and tune_count == []
    for a, b, c, _ in tensors:
        torch.testing.assert_close(c, a + b)
    per_miss = sum(counted.values()) / len(sizes)
    assert per_miss <= MAX_CALLS_PER_RULE_MISS, counted.most_common(20)
