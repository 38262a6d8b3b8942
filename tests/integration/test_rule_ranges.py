"""What a rule counts as in its range: a flag the sweep never timed, a point on several sizes
off the swept shapes, a family never swept under `mode="cached"`. The real `tunedsl sweep`
and `tunedsl rules` commands, the site called in a fresh process with the rules shipped
(real kernels under the interpreter, real rule files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

SCRIPT = str(Path(__file__).parent / "sweep_fixtures" / "rule_ranges.py")


def tunedsl(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=600,
        check=False,
    )


def built(tmp_path: Path, shapes: list[dict]) -> Path:
    """Rules from a sweep of ``shapes`` (the cache's records), in tmp_path/rules."""
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(shapes))
    done = tunedsl("sweep", SCRIPT, "--shapes", str(path), "--no-ray")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "rules"
    done = tunedsl("rules", "build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def serve(rules: Path, tmp_path: Path, *calls: str) -> tuple[dict[str, str], str]:
    """Each call's source in a new process with ``rules`` shipped and an empty cache, and
    the warnings it printed."""
    done = subprocess.run(
        [sys.executable, "-W", "always", SCRIPT, *calls],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "TUNEDSL_RECORDS_PATH": str(rules),
            "TUNEDSL_CACHE_DIR": str(tmp_path / "serving-cache"),
        },
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(line.rsplit(" ", 1) for line in done.stdout.splitlines()), done.stderr


def test_an_int_flag_the_sweep_never_timed_is_not_decided_by_the_rule(tmp_path: Path) -> None:
    """HAS_BIAS=0 and HAS_BIAS=1 compile different kernels; in log2 both read as 0. A rule
    swept only without the bias must not decide a call with it."""
    rules = built(tmp_path, [{"n": n, "bias": 0} for n in (64, 256, 1024)])
    sources, _ = serve(rules, tmp_path, "flag:300:0", "flag:300:1")
    assert sources == {"flag:300:0": "rule", "flag:300:1": "tuned"}
    (rule,) = rules.glob("*.rule.json")
    (family,) = json.loads(rule.read_text())["families"]
    assert json.loads(family["family"])["args.HAS_BIAS"] == 0
    assert not any("HAS_BIAS" in f for f in family["ranges"])


def test_a_rule_swept_with_both_flag_values_keeps_them_apart(tmp_path: Path) -> None:
    shapes = [{"n": n, "bias": b} for n in (64, 256, 1024) for b in (0, 1)]
    rules = built(tmp_path, shapes)
    (rule,) = rules.glob("*.rule.json")
    families = json.loads(rule.read_text())["families"]
    # One family a flag value, each with its three sizes (in log2, 0 and 1 were one point).
    assert [len(f["points"]) for f in families] == [3, 3]
    assert sorted(json.loads(f["family"])["args.HAS_BIAS"] for f in families) == [0, 1]
    sources, _ = serve(rules, tmp_path, "flag:300:0", "flag:300:1")
    assert set(sources.values()) == {"rule"}
    # `check --script` names each key with its flag: two keys of one size read apart.
    held = tmp_path / "held.json"
    held.write_text(json.dumps([{"n": 300, "bias": 0}, {"n": 300, "bias": 1}]))
    check = tunedsl("rules", "check", str(rules), "--script", SCRIPT, "--shapes", str(held))
    lines = [line for line in check.stdout.splitlines() if "shape[0]=300" in line]
    assert len(lines) == 2, check.stdout + check.stderr
    assert any("args.HAS_BIAS=0" in line for line in lines)
    assert any("args.HAS_BIAS=1" in line for line in lines)


def test_a_key_off_the_swept_shapes_of_several_sizes_is_tuned_not_decided(
    tmp_path: Path,
) -> None:
    """M and N swept together (a diagonal): M=64 with N=512 is in the range of each size,
    yet no swept shape is near it; M=N=200 lies between swept shapes."""
    rules = built(tmp_path, [{"m": s, "n": s} for s in (64, 128, 256, 512)])
    sources, _ = serve(rules, tmp_path, "mn:200:200", "mn:100:130", "mn:64:512")
    assert sources == {"mn:200:200": "rule", "mn:100:130": "rule", "mn:64:512": "tuned"}


def test_a_value_prune_reads_is_in_the_rule_range(tmp_path: Path) -> None:
    """prune= reads n, so n's value joins the key (the buffers' shapes never change): a rule
    swept at n=1024 and 2048 decides n=1536, but n=8192 lies beyond its sweep and is tuned
    (with tuning off, the rule's pick with a warning naming n), not decided by the rule."""
    rules = built(tmp_path, [{"live_n": n} for n in (1024, 2048)])
    sources, warned = serve(rules, tmp_path, "live:1536", "live:8192", "live:4096!")
    assert sources == {"live:1536": "rule", "live:8192": "tuned", "live:4096!": "rule"}
    assert "prune.n.value=4096 is outside the swept [1024, 2048]" in warned
    (rule,) = rules.glob("*.rule.json")
    (family,) = json.loads(rule.read_text())["families"]
    assert family["ranges"]["prune.n.value"] == [10.0, 11.0]


def test_a_rule_swept_on_a_grid_decides_inside_it(tmp_path: Path) -> None:
    rules = built(tmp_path, [{"m": m, "n": n} for m in (64, 512) for n in (64, 512)])
    sources, _ = serve(rules, tmp_path, "mn:100:400", "mn:400:80", "mn:300:300")
    assert set(sources.values()) == {"rule"}


def test_each_family_a_cached_key_borrows_from_warns_naming_what_was_never_swept(
    tmp_path: Path,
) -> None:
    """Where tuning cannot run, a key outside the range takes a pick from the nearest swept
    family: a size beyond the sweep warns, and so does each dtype never swept after it."""
    rules = built(tmp_path, [{"m": s, "n": s} for s in (64, 128, 256)])
    calls = ("mn:1000:1000!", "mn:2000:2000!", "mn:100:100:float64!", "mn:100:100:float16!")
    sources, warned = serve(rules, tmp_path, *calls)
    assert set(sources.values()) == {"rule"}
    assert warned.count("a key outside the range of rule") == 3, warned  # not once a size
    assert "args.a.shape[0]=1000 is outside the swept [64, 256]" in warned
    for dtype in ("float64", "float16"):
        assert f'args.a.dtype is "{dtype}" (swept: "float32")' in warned
    # A stale rule's pick for a dtype it never swept: both are said.
    (rule,) = rules.glob("*.rule.json")
    data = json.loads(rule.read_text())
    data["device"]["name"] = "Some Other GPU"
    rule.write_text(json.dumps(data))
    sources, warned = serve(rules, tmp_path, "mn:100:100:float64!")
    assert sources == {"mn:100:100:float64!": "rule"}
    assert "measured on Some Other GPU" in warned
    assert 'args.a.dtype is "float64" (swept: "float32")' in warned


def test_the_rule_measured_here_decides_wherever_it_is_on_the_path_and_check_agrees(
    tmp_path: Path,
) -> None:
    """Directories of rules for several GPU models on TUNEDSL_RECORDS_PATH, each with a rule
    of the same site and kernel: the one measured on this GPU decides, wherever it is on the
    path; `check` judges that one and says the other is not used. A rule file under another
    name is never found, and `check` says so."""
    here = built(tmp_path, [{"n": n, "bias": 0} for n in (64, 256, 1024)])
    (rule,) = here.glob("*.rule.json")
    other = tmp_path / "other-gpu"
    other.mkdir(mode=0o700)
    data = json.loads(rule.read_text())
    data["device"]["name"] = "Some Other GPU"
    (other / rule.name).write_text(json.dumps(data))
    for path in (f"{other}{os.pathsep}{here}", f"{here}{os.pathsep}{other}"):
        sources, warned = serve(Path(path), tmp_path, "flag:300:0")
        assert sources == {"flag:300:0": "rule"} and "Some Other GPU" not in warned
        check = tunedsl("rules", "check", *path.split(os.pathsep))
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"{other / rule.name}: not used: the runtime uses {rule}" in check.stdout
        assert "stale" not in check.stdout
    alone = tunedsl("rules", "check", str(other))
    assert alone.returncode == 1 and "stale: measured on Some Other GPU" in alone.stdout
    renamed = tmp_path / "renamed"
    renamed.mkdir(mode=0o700)
    (renamed / "mm.rule.json").write_text(rule.read_text())
    never = tunedsl("rules", "check", str(renamed))
    assert never.returncode == 1 and f"looks for this rule as {rule.name}" in never.stdout
    shown = tunedsl("rules", "show", str(renamed))
    assert f"mm.rule.json (never used: the runtime looks for it as {rule.name})" in shown.stdout


def test_a_rule_for_an_edited_kernel_decides_nothing_and_says_so(tmp_path: Path) -> None:
    """The kernel changed since the sweep: its rule is never used (it was timed on other
    code), and a process that meets the site says which rule it ignores, once, instead of
    silently running without it (where tuning cannot run: the site's default)."""
    script = tmp_path / "kernels.py"
    script.write_text(Path(SCRIPT).read_text())
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": n, "bias": 0} for n in (64, 256, 1024)]))
    done = tunedsl("sweep", str(script), "--shapes", str(shapes), "--no-ray")
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules"
    assert tunedsl("rules", "build", "--out", str(rules)).returncode == 0
    (rule,) = rules.glob("*.rule.json")
    edited = script.read_text().replace("x = x + 1.0\n", "x = x + 1.0  # edited\n")
    assert edited != script.read_text()
    script.write_text(edited)
    done = subprocess.run(
        [sys.executable, "-W", "always", str(script), "flag:300:0!", "flag:400:0!"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "TUNEDSL_RECORDS_PATH": str(rules),
            "TUNEDSL_CACHE_DIR": str(tmp_path / "serving-cache"),
        },
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "flag:300:0! default" in done.stdout and "flag:400:0! default" in done.stdout
    assert done.stderr.count("built for another version of its kernel") == 1, done.stderr
    assert str(rule) in done.stderr


def test_an_empty_call_is_empty_under_cached_and_asks_no_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call on zero elements launches nothing under any configuration: its result says
    ``source="empty"`` under ``mode="on"`` and ``"cached"`` (``TUNEDSL_FORCE_RETUNE=1`` too),
    with a rule shipped or not, and no rule is asked (it warned that the key was outside its
    range and "launches" a pick, though nothing runs)."""
    nothing = tmp_path / "no-rules"
    nothing.mkdir(mode=0o700)
    sources, warned = serve(nothing, tmp_path, "flag:0:0!", "flag:0:0")
    assert sources == {"flag:0:0!": "empty", "flag:0:0": "empty"}, warned
    with monkeypatch.context() as forced:
        forced.setenv("TUNEDSL_FORCE_RETUNE", "1")
        assert serve(nothing, tmp_path, "flag:0:0!")[0] == {"flag:0:0!": "empty"}
    rules = built(tmp_path, [{"n": n, "bias": 0} for n in (64, 256, 1024)])
    calls = ("flag:0:0!", "flag:0:1!", "flag:0:0", "mn:0:0!", "flag:300:0!")
    sources, warned = serve(rules, tmp_path, *calls)
    assert sources == {**dict.fromkeys(calls[:-1], "empty"), "flag:300:0!": "rule"}, warned
    assert "outside the range" not in warned and "launches" not in warned, warned


BIG = 2**40 + 3  # an int past 32 bits: Triton compiles the kernel for an i64 argument


def test_an_int_class_the_sweep_never_timed_is_outside_the_rule_and_named(tmp_path: Path) -> None:
    """Triton compiles another kernel for an int argument equal to 1, and for a 64-bit one:
    a rule swept only with ``stride == 1`` and a 32-bit ``seed`` decides neither a stride of
    2 or 16 nor a seed of 1 or past 32 bits (tuned where tuning may run; where it may not,
    the nearest pick, with a warning naming the class). `build`, `show` and `check` say which
    classes the sweep had."""
    rules = built(tmp_path, [{"n": n, "stride": 1} for n in (64, 256, 1024)])
    calls = ("stride:300:1:3", "stride:300:2:3", "stride:300:16:3", "stride:300:1:1")
    sources, _ = serve(rules, tmp_path, *calls, f"stride:300:1:{BIG}")
    assert sources == {
        "stride:300:1:3": "rule",
        "stride:300:2:3": "tuned",
        "stride:300:16:3": "tuned",
        "stride:300:1:1": "tuned",
        f"stride:300:1:{BIG}": "tuned",
    }
    cached = tmp_path / "cached"  # a fresh cache: the keys above were tuned into the other
    sources, warned = serve(rules, cached, "stride:300:2:3!", f"stride:300:1:{BIG}!")
    assert set(sources.values()) == {"rule"}, warned
    assert warned.count("a key outside the range of rule") == 2, warned
    assert "args.stride is a 32-bit int other than 1 (swept: an int equal to 1)" in warned, warned
    assert "args.seed is a 64-bit int (swept: a 32-bit int other than 1)" in warned, warned
    (rule,) = rules.glob("*.rule.json")
    (family,) = json.loads(rule.read_text())["families"]
    assert json.loads(family["family"])["args.stride"] == "==1"
    said = "the sweep passed args.stride only as an int equal to 1"
    shown = tunedsl("rules", "show", str(rules))
    assert shown.returncode == 0 and said in shown.stdout, shown.stdout
    assert "args.stride % 16" not in shown.stdout, shown.stdout  # 1 is not "% 16 != 0"
    check = tunedsl("rules", "check", str(rules))
    assert check.returncode == 0 and said in check.stdout, check.stdout
    # `build` says so as it writes the rule.
    again = tunedsl("rules", "build", "--out", str(tmp_path / "again"))
    assert again.returncode == 0 and said in again.stderr, again.stderr
    assert "args.seed" not in again.stderr  # swept as a 32-bit int: the usual class


def test_a_rule_swept_with_both_int_classes_decides_each_from_its_own_keys(
    tmp_path: Path,
) -> None:
    """Swept with ``stride == 1`` and with strides of 2: each class is a family of its own,
    decided from its own keys (16, a multiple of 16, is in the 32-bit family's range: an
    int's alignment is a feature of its map, not a class to sweep); `check --script` names
    each key's class, so two keys of one size read apart."""
    shapes = [{"n": n, "stride": s} for n in (64, 256, 1024) for s in (1, 2)]
    rules = built(tmp_path, shapes)
    (rule,) = rules.glob("*.rule.json")
    families = json.loads(rule.read_text())["families"]
    assert sorted(json.loads(f["family"])["args.stride"] for f in families) == ["==1", "i32"]
    sources, _ = serve(rules, tmp_path, "stride:300:1:3", "stride:300:3:3", "stride:300:16:3")
    assert set(sources.values()) == {"rule"}
    check = tunedsl("rules", "check", str(rules))
    assert check.returncode == 0 and "the sweep passed" not in check.stdout, check.stdout
    held = tmp_path / "held.json"
    held.write_text(json.dumps([{"n": 300, "stride": 1}, {"n": 300, "stride": 3}]))
    check = tunedsl("rules", "check", str(rules), "--script", SCRIPT, "--shapes", str(held))
    lines = [line for line in check.stdout.splitlines() if "shape[0]=300" in line]
    assert len(lines) == 2, check.stdout + check.stderr
    assert any("args.stride is an int equal to 1" in line for line in lines), "\n".join(lines)
    assert any("args.stride % 16 != 0" in line for line in lines), lines
