"""Rules for keys never tuned: sweep, build, ship, run (real kernels under the interpreter,
the real `tunedsl rules` command in a subprocess, real rule files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from rule_helpers import SPACE, SWEPT, rule_file, rules_cli, run, ship
from runtime_helpers import call, new_process, site
from runtime_kernels import vadd

from tunedsl.errors import CacheWarning
from tunedsl.model.config import Config
from tunedsl.store import rules as rule_store

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]


def test_a_rule_decides_an_unseen_key_in_range_without_tuning(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    data = json.loads(rule_file(built_rules).read_text())
    assert data["validation"]["keys"] == len(SWEPT)
    assert 1 <= len(data["configs"]) <= 4
    res = run("swept", 300)  # never swept, inside [64, 1024]
    assert res.source == "rule" and tune_count == []
    assert res.config.to_json() in data["configs"]
    again = run("swept", 300)  # in memory from now on, like any decision
    assert again.source in ("rule", "memory") and tune_count == []


def test_a_key_beyond_the_sweep_tunes_where_it_may_and_takes_the_nearest_pick_where_not(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    assert run("swept", 4000).source == "tuned" and len(tune_count) == 1
    with pytest.warns(CacheWarning, match="outside the range of rule"):
        res = run("swept", 5000, mode="cached")
    assert res.source == "rule" and len(tune_count) == 1


def test_a_stale_rule_is_tuned_over_where_tuning_may_run_and_used_where_not(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    data["device"]["name"] = "Some Other GPU"
    path.write_text(json.dumps(data))
    ship(built_rules, monkeypatch, tmp_path)
    with pytest.warns(CacheWarning, match="measured on Some Other GPU.*tuning instead"):
        assert run("swept", 300).source == "tuned"
    new_process()
    rule_store.forget_loaded()
    from tunedsl.warn import forget

    forget("rule-stale:")
    with pytest.warns(CacheWarning, match="using its picks while tuning cannot run"):
        assert run("swept", 600, mode="cached").source == "rule"
    check = rules_cli("check", str(built_rules))
    assert check.returncode == 1 and "stale: measured on Some Other GPU" in check.stdout


@pytest.mark.parametrize(
    "damage",
    ["outside the space", "writable by others", "not json", "family not json", "family a list"],
)
def test_a_damaged_or_hostile_rule_is_a_miss_with_a_warning_never_a_wrong_launch(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    damage: str,
) -> None:
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    if damage == "outside the space":
        data["configs"] = [Config(tile=4096).to_json()] * len(data["configs"])
        path.write_text(json.dumps(data))
        expected = "not among the configurations"
    elif damage == "writable by others":
        os.chmod(path, 0o666)
        expected = "writable by group or others"
    elif damage.startswith("family"):
        # A key of no family the rule has takes the closest family, which reads the names.
        data["families"][0]["family"] = "{not json" if damage == "family not json" else "[1]"
        path.write_text(json.dumps(data))
        expected = r"families\[0\]\.family is not"
    else:
        path.write_text('{"kind": "tunedsl-rule", "schema": 1, "site": ')
        expected = "not valid JSON"
    ship(built_rules, monkeypatch, tmp_path)
    with pytest.warns(CacheWarning, match=expected):
        res = run("swept", 300)
    assert res.source == "tuned" and res.config != Config(tile=4096)


def test_precompile_tune_measures_a_key_a_shipped_rule_would_decide(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    from tunedsl.precompile.workload import precompile_mode

    ship(built_rules, monkeypatch, tmp_path)
    with precompile_mode(tune=True) as session:
        res = run("swept", 300)  # in the rule's range: tuned all the same
    assert res.source == "tuned" and len(tune_count) == 1
    assert session.totals()["tuned"] == 1
    assert run("swept", 600).source == "rule"  # outside a sweep, the rule decides again


def test_a_key_of_an_int_beyond_any_float_is_read_by_the_rule_not_a_crash(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # key= may return any int; the rule reads it as a size (log2), which a float cannot hold.
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE, has_key=True)
    a, b, c = torch.randn(300), torch.randn(300), torch.empty(300)
    res = call(s, vadd, (a, b, c, 300), 300, key=2**1100)
    assert res.source == "tuned"  # no family of the rule: tuned where tuning may run
    torch.testing.assert_close(c, a + b)


def test_rules_show_prints_the_rule_as_a_table(built_rules: Path) -> None:
    shown = rules_cli("show", str(built_rules))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "rule for" in text and "leave-one-key-out over 5 swept keys" in text
    assert "(kernel vadd)" in text  # two kernels of one generic launcher told apart
    assert "args.a.shape[0] in [64, 1024]" in text
    assert "[A] Config(tile=" in text
    # The map: a tree (a single leaf when one configuration covers every swept key) or the
    # nearest swept key, each line naming a configuration of the list.
    assert "    -> [A] Config(tile=" in text or "nearest swept key" in text
    # The two baselines docs/shapes.md promises beside the rule's own regret.
    assert "baselines: nearest swept key's best geomean " in text
    assert "; single best configuration geomean " in text


def test_rules_show_prints_a_rule_whose_sizes_no_float_holds(built_rules: Path) -> None:
    # Sizes are stored as log2: a (hand-edited) range up to 2^5000 is finite in the file,
    # but 2^5000 itself is not a float.
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    ranges = data["families"][0]["ranges"]
    name = sorted(ranges)[0]
    ranges[name] = [-5000.0, 5000.0]
    points = data["families"][0]["points"]  # a range is its swept keys' sizes
    points[0]["x"][name], points[-1]["x"][name] = -5000.0, 5000.0
    path.write_text(json.dumps(data))
    shown = rules_cli("show", str(built_rules))
    assert shown.returncode == 0, shown.stderr
    assert f"{name} in [0, 2^5000]" in shown.stdout


def test_build_of_a_misspelled_site_names_the_sites_that_have_records(tmp_path: Path) -> None:
    from rule_helpers import sweep

    sweep("swept")
    done = rules_cli("build", "--site", "swpet", "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert "no tuning records of swpet" in done.stderr
    assert "did you mean `swept`?" in done.stderr and "sites with records: swept" in done.stderr


def test_build_without_records_names_the_sweep(tmp_path: Path) -> None:
    done = rules_cli("build", "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert "no tuning records" in done.stderr and "precompile --tune" in done.stderr


def test_check_on_a_machine_without_a_gpu_judges_rules_as_tunedsl_run_would_use_them(
    built_rules: Path,
) -> None:
    # Without a GPU driver `tunedsl run` launches through the interpreter, so a rule swept
    # there is current on this machine: `check` must not call it stale because the command
    # itself, started without TRITON_INTERPRET, saw no usable Triton backend.
    from tunedsl.autointerp import gpu_driver_present

    if gpu_driver_present():
        pytest.skip("a machine without a GPU driver: here `tunedsl run` would not interpret")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.pop("TUNEDSL_NO_AUTO_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "check", str(built_rules)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": current (" in done.stdout and "stale" not in done.stdout
    assert "unavailable" not in done.stdout


def test_build_into_a_file_or_a_place_it_cannot_create_says_so_before_measuring(
    tmp_path: Path,
) -> None:
    from rule_helpers import sweep

    sweep("swept")
    a_file = tmp_path / "rules.txt"
    a_file.write_text("not a directory\n")
    for out, expected in (
        (a_file, "is a file, not a directory"),
        (a_file / "rules", "cannot create it"),
        # A rule file's name: a directory named x.rule.json was created and the rules put in it.
        (tmp_path / "x.rule.json", "is the directory the rules go into"),
        (tmp_path / "rules.JSON", "names a file (it ends in .json)"),
    ):
        done = rules_cli("build", "--out", str(out))
        assert done.returncode == 1, done.stdout
        assert "Traceback" not in done.stderr, done.stderr
        assert f"--out {out}: " in done.stderr and expected in done.stderr
        assert "site " not in done.stdout  # refused before building anything
    assert a_file.read_text() == "not a directory\n"
    assert not (tmp_path / "x.rule.json").exists() and not (tmp_path / "rules.JSON").exists()


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"),
    reason="needs root and setpriv, to act as a second local user (uid 65534)",
)
def test_build_never_writes_through_a_link_another_user_planted_at_out(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A user sharing /tmp plants `/tmp/.../rules` as a link to a directory of theirs (or to
    one of the victim's): the rule files must not be written wherever it leads."""
    from rule_helpers import sweep

    sweep("swept")
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-out-", dir="/tmp"))
    shared.chmod(0o1777)  # like /tmp itself
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    theirs = shared / "theirs"
    mine = tmp_path / "mine"
    mine.mkdir()
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    for target, link in ((theirs, shared / "rules"), (mine, shared / "mine-rules")):
        if target == theirs:
            subprocess.run([*as_nobody, "mkdir", "-m", "755", str(theirs)], check=True)
        subprocess.run([*as_nobody, "ln", "-s", str(target), str(link)], check=True)
        for out in (link, link / "deeper"):
            done = rules_cli("build", "--out", str(out))
            assert done.returncode == 1, done.stdout
            assert f"--out {out}: another user could redirect" in done.stderr, done.stderr
            assert f"{link} is a symbolic link owned by another user" in done.stderr
            assert os.listdir(target) == []
    # The directory of another user itself, named without a link: refused too.
    done = rules_cli("build", "--out", str(theirs))
    assert done.returncode == 1 and f"{theirs} is owned by another user" in done.stderr
    assert os.listdir(theirs) == []


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"),
    reason="needs root and setpriv, to act as a second local user (uid 65534)",
)
def test_a_directory_another_user_makes_at_out_during_the_build_gets_no_rule_file(
    built_rules: Path, request: pytest.FixtureRequest
) -> None:
    """`--out` is checked before the build, which may measure for minutes; another user who
    makes the missing directory meanwhile (a shared /tmp name) must not get the rule files:
    the directory is judged again as each rule is written."""
    from tunedsl.cli.rules_out import out_dir
    from tunedsl.store import paths

    rule = rule_store.read_rule_file(rule_file(built_rules))
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-out-", dir="/tmp"))
    shared.chmod(0o1777)  # like /tmp itself
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    out = shared / "rules"
    assert out_dir(str(out)) == out  # the command's check: nothing there yet
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    subprocess.run([*as_nobody, "mkdir", "-m", "777", str(out)], check=True)
    with pytest.raises(paths.UntrustedDir, match=f"{out} is owned by another user"):
        rule_store.save_rule(rule, out)
    assert os.listdir(out) == []
    mine = shared / "mine"  # made by the build itself: written
    assert rule_store.save_rule(rule, mine).parent == mine


@pytest.mark.parametrize("opened", ["writable by others", "another user's"])
def test_check_fails_a_rules_directory_the_runtime_does_not_trust(
    built_rules: Path, opened: str
) -> None:
    if opened == "writable by others":
        built_rules.chmod(0o777)
        why = "writable by group or others"
    else:
        if os.geteuid() != 0:
            pytest.skip("giving the directory to another user needs root")
        os.chown(built_rules, 65534, 65534)
        why = "owned by"
    check = rules_cli("check", str(built_rules))
    assert check.returncode == 1, check.stdout
    assert f"{built_rules}: not trusted" in check.stderr and why in check.stderr
    assert "current" not in check.stdout  # no rule there is reported usable
    # A file named inside it is judged by its directory too.
    check = rules_cli("check", str(rule_file(built_rules)))
    assert check.returncode == 1 and "not trusted" in check.stderr
    # show prints the rule, and that the runtime never uses it (it printed the rule alone).
    shown = rules_cli("show", str(built_rules))
    assert f"(never used: {built_rules} is not trusted" in shown.stdout and why in shown.stdout
    # Building into it says the runtime will not read what it writes there.
    if opened == "writable by others":
        again = rules_cli("build", "--out", str(built_rules))
        assert again.returncode == 0, again.stderr
        assert f"--out {built_rules}" in again.stderr and "ignores rules there" in again.stderr


def test_rules_show_prints_a_nearest_keys_alignment_as_a_multiple_of_16(
    built_rules: Path,
) -> None:
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    family = data["families"][0]
    family["model"], family["tree"] = "nearest", None
    point = family["points"][0]
    point["x"]["args.n%16"] = 1.0  # a multiple of 16
    family["points"][1]["x"]["args.n%16"] = 0.0
    path.write_text(json.dumps(data))
    shown = rules_cli("show", str(built_rules))
    assert shown.returncode == 0, shown.stderr
    assert "args.n % 16 == 0" in shown.stdout and "args.n % 16 != 0" in shown.stdout
    assert "%16=" not in shown.stdout  # not its log2 read back as a size (2 or 1)


def test_build_from_one_swept_key_says_the_rule_is_not_validated(tmp_path: Path) -> None:
    from rule_helpers import sweep

    sweep("swept", sizes=(256,))
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "swept: 1 swept key(s), too few to validate the rule" in done.stderr
    assert "Sweep more sizes" in done.stderr
    assert len(list(out.glob("*.rule.json"))) == 1  # still built: it decides that size


def test_build_from_a_budgeted_sweep_says_its_regrets_are_against_what_it_timed(
    tmp_path: Path,
) -> None:
    # A random search with a small budget times one or two of the four tiles per key: the
    # rule's regrets compare its picks with the best of those, and `build` printed
    # 1.000x with no word that most of the space was never timed.
    from rule_helpers import sweep

    sweep("budgeted", sizes=(128, 512, 1024), search="random", budget=0.05)
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (
        "note: budgeted: 3 of 3 swept keys come from a budgeted search (random), which timed "
        "only some configurations: the regrets compare the picks with the best it timed, not "
        "with the space's best; sweep with search='exhaustive' to time them all"
    ) in done.stderr, done.stderr
    sweep("whole", sizes=(128, 512))  # exhaustive: every tile timed on every key
    whole = rules_cli("build", "--out", str(tmp_path / "other"), "--site", "whole")
    assert whole.returncode == 0 and "budgeted search" not in whole.stderr, whole.stderr


def test_a_space_grown_since_the_sweep_is_tuned_not_decided_by_the_rule(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    # The sweep timed tile 32 to 256; the site now also offers 512, which no swept key timed:
    # the rule cannot know whether it wins, so tuning runs where it may.
    ship(built_rules, monkeypatch, tmp_path)
    grown = {"tile": [*SPACE["tile"], 512]}
    s = site("swept", space=grown)
    a, b, c = torch.randn(300), torch.randn(300), torch.empty(300)
    with pytest.warns(CacheWarning, match=r"never timed Config\(tile=512\).*tuning instead"):
        res = call(s, vadd, (a, b, c, 300), 300)
    assert res.source == "tuned" and len(tune_count) == 1
    torch.testing.assert_close(c, a + b)
    # Where tuning may not run, the rule's pick still beats the site's default.
    s = site("swept", space=grown, options={"mode": "cached"})
    a, b, c = torch.randn(600), torch.randn(600), torch.empty(600)
    res = call(s, vadd, (a, b, c, 600), 600)
    assert res.source == "rule" and len(tune_count) == 1
    torch.testing.assert_close(c, a + b)
    # A smaller space (every configuration of it swept, the rule's picks kept) is still
    # decided by the rule. (Three tiles: a space of one is launched as is, never decided.)
    picks = {c["tile"] for c in json.loads(rule_file(built_rules).read_text())["configs"]}
    unpicked = [t for t in SPACE["tile"] if t not in picks]
    if unpicked:  # (a rule with all four configurations leaves nothing to drop)
        s = site("swept", space={"tile": [t for t in SPACE["tile"] if t != unpicked[0]]})
        picked = call(s, vadd, (torch.randn(700), torch.randn(700), torch.empty(700), 700), 700)
        assert picked.source == "rule" and len(tune_count) == 1
    shown = rules_cli("show", str(built_rules))
    assert "swept 4 configurations" in shown.stdout


def test_build_from_a_cache_or_a_rules_directory_names_the_records_directory(
    built_rules: Path, tmp_path: Path
) -> None:
    from tunedsl.store import paths

    cache = paths.records_dir().parent  # the cache (its records/ holds the sweep's records)
    done = rules_cli("build", "--records", str(cache), "--out", str(tmp_path / "a"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"--records {paths.records_dir()}" in done.stderr  # the directory to pass
    done = rules_cli("build", "--records", str(built_rules), "--out", str(tmp_path / "b"))
    assert done.returncode == 1
    assert f"{built_rules} holds rule files (*.rule.json), not tuning records" in done.stderr


def test_a_rule_file_damaged_anew_after_a_first_problem_warns_again(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    path = rule_file(built_rules)
    path.chmod(0o666)  # opened to writes by others: not trusted
    with pytest.warns(CacheWarning, match="writable by group or others"):
        assert run("swept", 300).source == "tuned"
    path.chmod(0o600)
    path.write_text(path.read_text()[:100])  # then cut short: another problem, said too
    with pytest.warns(CacheWarning, match="not valid JSON"):
        assert run("swept", 600).source == "tuned"
    assert len(tune_count) == 2


def test_build_into_a_directory_holding_the_sites_rule_for_another_gpu_keeps_that_rule(
    built_rules: Path,
) -> None:
    # `built_rules` stands for the rules shipped for another GPU model (one directory each on
    # TUNEDSL_RECORDS_PATH); building this machine's rules into it by mistake would replace
    # that GPU's rule for the site, the file named by site and kernel alone.
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    data["device"]["name"] = "Some Other GPU"
    shipped = json.dumps(data)
    path.write_text(shipped)
    again = rules_cli("build", "--out", str(built_rules))
    assert again.returncode == 1, again.stdout
    assert "Traceback" not in again.stderr, again.stderr
    assert f"{path}" in again.stderr and "Some Other GPU" in again.stderr, again.stderr
    assert "one directory each" in again.stderr and "site " not in again.stdout
    assert path.read_text() == shipped  # the other GPU's rule is left as it was
    # The same GPU model with another Triton is a refresh: the rule is rebuilt in place.
    here = data["device"]["name"] = "cpu"  # this machine's, under the interpreter
    data["toolchain"]["triton"] = "0.0.1"
    path.write_text(json.dumps(data))
    refreshed = rules_cli("build", "--out", str(built_rules))
    assert refreshed.returncode == 0, refreshed.stderr
    rebuilt = json.loads(path.read_text())
    assert rebuilt["device"]["name"] == here and rebuilt["toolchain"]["triton"] != "0.0.1"


def test_rules_built_into_the_caches_records_directory_named_on_the_path_decide(
    monkeypatch: pytest.MonkeyPatch, tune_count: list
) -> None:
    # "Beside any records you ship": rules built into the cache's own records directory and
    # that directory named on TUNEDSL_RECORDS_PATH. The path's entry naming the cache's
    # records is left out of the shipped records (read first already), and the rules with it:
    # every key was tuned while `rules check` called the rule current.
    from rule_helpers import sweep

    from tunedsl.store import paths

    sweep("swept")
    records = paths.records_dir()
    done = rules_cli("build", "--out", str(records))
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(records))
    rule_store.forget_loaded()
    assert "current" in rules_cli("check", str(records)).stdout
    swept = len(tune_count)
    res = run("swept", 300)  # never swept, inside [64, 1024]
    assert res.source == "rule" and len(tune_count) == swept


def test_a_key_outside_the_first_rules_range_is_decided_by_the_next_rule_that_covers_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    # Two current rules for one site and kernel, one directory each on the path: the first
    # swept small sizes, the second large ones. Only the first was used: a size in the
    # second's range, outside the first's, was tuned.
    from rule_helpers import two_rule_directories

    built = two_rule_directories(monkeypatch, tmp_path)
    swept = len(tune_count)
    second = json.loads(rule_file(built["B"]).read_text())
    res = run("swept", 300)  # never swept: in B's range [64, 512], outside A's [8, 32]
    assert res.source == "rule" and len(tune_count) == swept
    assert res.config.to_json() in second["configs"]
    assert run("swept", 20).source == "rule"  # in A's range: A decides, as before
    assert run("swept", 4000).source == "tuned"  # in no rule's range: tuned, as before
    assert len(tune_count) == swept + 1
    # One site whose first new size A decided (its plan for the layout holds A's rule):
    # later sizes in B's range are still B's.
    s = site("swept", space=SPACE)
    for n, expected in ((24, "rule"), (200, "rule"), (400, "rule"), (2000, "tuned")):
        a, b = torch.randn(n), torch.randn(n)
        c = torch.empty(n)
        assert call(s, vadd, (a, b, c, n), n).source == expected, n
        torch.testing.assert_close(c, a + b)
    assert len(tune_count) == swept + 2
    # `check` says which keys B decides, no longer that it is not used.
    check = rules_cli("check", str(built["A"]), str(built["B"]))
    assert check.returncode == 0, check.stdout + check.stderr
    second_file, first_file = rule_file(built["B"]), rule_file(built["A"])
    said = f"{second_file}: used only for the keys outside the range of {first_file}"
    assert said in check.stdout, check.stdout


def test_a_records_path_naming_a_rule_file_says_to_name_its_directory(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    # The warning spoke of records only and advised `tunedsl cache import RULE.json`, which
    # then failed: not a records bundle. The rule file's directory is what the path takes.
    path = rule_file(built_rules)
    ship(path, monkeypatch, tmp_path)
    with pytest.warns(CacheWarning) as said:
        res = run("swept", 300)
    assert res.source == "tuned"  # nothing was read from the file
    (text,) = [str(w.message) for w in said if "TUNEDSL_RECORDS_PATH" in str(w.message)]
    assert f"names {path}, a rule file" in text and f"name its directory, {built_rules}" in text
    assert "cache import" not in text
    ship(built_rules, monkeypatch, tmp_path / "next")  # as it says: the rule decides
    assert run("swept", 300).source == "rule"
