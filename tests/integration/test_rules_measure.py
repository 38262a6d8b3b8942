"""`tunedsl rules build --script` (the cross-measurement phase) and `tunedsl rules check
--script` (a rule's picks against tuning here): the real commands in subprocesses, a real
workload script, real kernels under the interpreter, real records and rule files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tunedsl.model.config import Config

pytestmark = pytest.mark.needs_triton

SCRIPT = str(Path(__file__).parent / "sweep_fixtures" / "rule_vadd.py")


def tunedsl(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
        check=False,
    )


def shapes(tmp_path: Path, name: str, sizes: list[int]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps([{"n": n} for n in sizes]))
    return str(path)


@pytest.fixture
def partial_sweep(tmp_path: Path) -> str:
    """Records of the large sizes timed every tile; those of the small sizes only 32 and 64
    (a sweep that measured a subset there). Returns the small sizes' shapes file."""
    done = tunedsl("sweep", SCRIPT, "--shapes", shapes(tmp_path, "big", [1024, 2048]), "--no-ray")
    assert done.returncode == 0, done.stderr
    small = shapes(tmp_path, "small", [64, 128, 256])
    done = tunedsl("sweep", SCRIPT, "--shapes", small, "--no-ray", env={"RULE_TILES": "32,64"})
    assert done.returncode == 0, done.stderr
    return small


def _missing(stderr: str) -> list[str]:
    return re.findall(r"^    rule-vadd: .* x (Config\(.*\))$", stderr, re.M)


def test_build_measures_the_cells_the_rule_needs_and_the_records_lack(
    partial_sweep: str, tmp_path: Path
) -> None:
    without = tunedsl("rules", "build", "--out", str(tmp_path / "a"))
    assert without.returncode == 0, without.stderr
    assert "cannot be measured: give --script" in without.stderr
    missing = _missing(without.stderr)
    # The small sizes never timed the larger tiles: the cells the rule's configurations need.
    assert missing and set(missing) <= {str(Config(tile=128)), str(Config(tile=256))}
    measured = tunedsl(
        "rules",
        "build",
        "--out",
        str(tmp_path / "b"),
        "--script",
        SCRIPT,
        "--shapes",
        partial_sweep,
    )
    assert measured.returncode == 0, measured.stderr
    found = re.search(r"measured (\d+) of the (\d+) cells the records lacked", measured.stderr)
    assert found is not None, measured.stderr
    assert found.group(1) == found.group(2) != "0"
    assert "still missing" not in measured.stderr
    (rule,) = (tmp_path / "b").glob("*.rule.json")
    assert json.loads(rule.read_text())["validation"]["unmeasured"] == 0


def test_build_within_no_budget_or_without_a_gpu_names_the_missing_cells_and_still_builds(
    partial_sweep: str, tmp_path: Path
) -> None:
    spent = tunedsl(
        "rules", "build", "--out", str(tmp_path / "a"), "--script", SCRIPT,
        "--shapes", partial_sweep, "--measure-budget", "0",
    )  # fmt: skip
    assert spent.returncode == 0, spent.stderr
    assert "3 calls not run (--measure-budget)" in spent.stderr
    assert "cells are still missing" in spent.stderr and _missing(spent.stderr)
    assert list((tmp_path / "a").glob("*.rule.json"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    no_gpu = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "build", "--out", str(tmp_path / "b"),
         "--script", SCRIPT, "--shapes", partial_sweep],
        capture_output=True, text=True, env={**env, "TUNEDSL_NO_AUTO_INTERPRET": "1"},
        timeout=600, check=False,
    )  # fmt: skip
    assert no_gpu.returncode == 0, no_gpu.stderr
    assert "cannot be measured: this machine has no GPU" in no_gpu.stderr
    assert _missing(no_gpu.stderr) and list((tmp_path / "b").glob("*.rule.json"))


def _auto_interpreter_env() -> dict[str, str]:
    """The environment of a machine without a GPU driver, where a command turns Triton's
    interpreter on by itself and says so (skipped on a machine with a driver)."""
    from tunedsl.autointerp import gpu_driver_present

    if gpu_driver_present():
        pytest.skip("a machine without a GPU driver: here `tunedsl run` would not interpret")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.pop("TUNEDSL_NO_AUTO_INTERPRET", None)
    env.pop("TUNEDSL_QUIET", None)
    return env


def test_build_with_a_script_on_a_machine_without_a_gpu_measures_under_the_interpreter(
    partial_sweep: str, tmp_path: Path
) -> None:
    # Without TRITON_INTERPRET and without a GPU driver, `build --script` said it could not
    # measure ("set TRITON_INTERPRET=1"), where `check --script` and `sweep` turn the
    # interpreter on by themselves: it measures under the interpreter, said once.
    env = _auto_interpreter_env()
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "build", "--out", str(tmp_path / "a"),
         "--script", SCRIPT, "--shapes", partial_sweep],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cannot be measured" not in done.stderr, done.stderr
    assert done.stderr.count("no GPU driver found: tunedsl rules build --script runs") == 1
    found = re.search(r"measured (\d+) of the (\d+) cells the records lacked", done.stderr)
    assert found is not None and found.group(1) == found.group(2) != "0", done.stderr


@pytest.fixture
def built(tmp_path: Path) -> Path:
    done = tunedsl("sweep", SCRIPT, "--shapes", shapes(tmp_path, "s", [64, 256, 1024]), "--no-ray")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "rules"
    done = tunedsl("rules", "build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_check_tunes_a_sample_here_and_reports_each_keys_regret(
    built: Path, tmp_path: Path
) -> None:
    held = shapes(tmp_path, "held", [100, 300, 700, 1500])
    done = tunedsl(
        "rules", "check", str(built), "--script", SCRIPT, "--shapes", held,
        "--sample", "2", "--bound", "1000",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = re.findall(
        r"args\.a\.shape\[0\]=(\d+),.*: pick (Config\(.*\)) [\d.]+ ms, best .*: ([\d.]+)x",
        done.stdout,
    )
    assert [n for n, _, _ in lines] == ["100", "700"]  # two of the four, spread out
    assert all(float(r) >= 1.0 for _, _, r in lines)
    # 100 and 700 are no multiples of 16: said so, not as the log2 of a size (2 or 1).
    assert "args.n % 16 != 0" in done.stdout and "%16=" not in done.stdout
    assert "2 keys tuned here: regret geomean" in done.stdout and "within 1000.000x" in done.stdout


def test_check_fails_a_rule_whose_picks_fail_here_and_one_it_cannot_measure(
    built: Path, tmp_path: Path
) -> None:
    (path,) = built.glob("*.rule.json")
    data = json.loads(path.read_text())
    # A pick this site's space no longer has: as bad as a rule gets on this machine.
    data["configs"] = [Config(tile=512).to_json()] * len(data["configs"])
    path.write_text(json.dumps(data))
    held = shapes(tmp_path, "held", [300])
    done = tunedsl("rules", "check", str(built), "--script", SCRIPT, "--shapes", held)
    assert done.returncode == 1
    assert "pick Config(tile=512) failed here" in done.stdout
    assert "off: 1 keys tuned here: regret geomean infx" in done.stdout
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    no_gpu = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "check", str(built), "--script", SCRIPT],
        capture_output=True, text=True, env={**env, "TUNEDSL_NO_AUTO_INTERPRET": "1"},
        timeout=600, check=False,
    )  # fmt: skip
    assert no_gpu.returncode == 1 and "cannot re-measure" in no_gpu.stderr


def test_check_with_a_script_on_a_machine_without_a_gpu_measures_under_the_interpreter(
    built: Path, tmp_path: Path
) -> None:
    # Without TRITON_INTERPRET and without a GPU driver, `check --script` measures under the
    # interpreter, as `tunedsl sweep` (which made the records) does, said once: it refused
    # and, beside it, said it ran kernels through the interpreter. With the automatic
    # interpreter off it cannot measure: it calls no rule it cannot judge stale, nor advises
    # a new sweep, and names the fix.
    env = _auto_interpreter_env()
    held = shapes(tmp_path, "held", [300])
    # A bound no interpreter timing misses: what is judged here is that it measures, not the
    # machine's speed.
    argv = [sys.executable, "-m", "tunedsl", "rules", "check", str(built), "--script", SCRIPT,
            "--shapes", held, "--bound", "1000"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.count("no GPU driver found: tunedsl rules check --script runs") == 1
    assert "cannot re-measure" not in done.stderr
    assert "1 keys tuned here: regret geomean" in done.stdout, done.stdout
    env["TUNEDSL_NO_AUTO_INTERPRET"] = "1"
    off = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert off.returncode == 1
    assert "stale" not in off.stdout and "unavailable" not in off.stdout, off.stdout
    assert "cannot re-measure" in off.stderr and "set TRITON_INTERPRET=1" in off.stderr
    # Without --script nothing runs: judged as for the interpreter, and nothing said of it.
    plain = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "check", str(built)],
        capture_output=True, text=True, env={**env, "TUNEDSL_NO_AUTO_INTERPRET": "0"},
        timeout=600, check=False,
    )  # fmt: skip
    assert plain.returncode == 0 and "no GPU driver found" not in plain.stderr, plain.stderr


def test_check_says_a_rule_was_built_for_another_version_of_the_scripts_kernel(
    built: Path, tmp_path: Path
) -> None:
    edited = tmp_path / "edited" / "rule_vadd.py"
    edited.parent.mkdir()
    source = Path(SCRIPT).read_text()
    assert "m = offs < n" in source
    edited.write_text(source.replace("m = offs < n", "m = n > offs"))
    held = shapes(tmp_path, "held", [300])
    done = tunedsl("rules", "check", str(built), "--script", str(edited), "--shapes", held)
    assert done.returncode == 1, done.stdout
    assert "no sampled shape reached" not in done.stdout  # it did: with another kernel
    assert "the script's rule-vadd is not the kernel this rule was built for" in done.stdout
    assert "the runtime never uses this rule" in done.stdout


def test_check_judges_a_rule_by_the_keys_in_its_range(built: Path, tmp_path: Path) -> None:
    # A sampled key beyond the sweep (tuned at run time where tuning may run) was judged
    # with the rule: its nearest pick's regret could fail a rule that decides its range well.
    mixed = shapes(tmp_path, "mixed", [300, 5000])
    done = tunedsl("rules", "check", str(built), "--script", SCRIPT, "--shapes", mixed)
    assert "(outside its range: tuned where tuning may run, not judged)" in done.stdout
    assert ": 1 keys tuned here: regret geomean" in done.stdout, done.stdout
    beyond = shapes(tmp_path, "beyond", [5000])
    done = tunedsl("rules", "check", str(built), "--script", SCRIPT, "--shapes", beyond)
    assert done.returncode == 1, done.stdout
    assert "unchecked: the 1 sampled keys that reached its site are outside its range" in (
        done.stdout
    )


def test_check_runs_only_the_workloads_named_with_workload(built: Path, tmp_path: Path) -> None:
    # A script with a workload for precompile (no parameters) beside the sweep's: every
    # --shapes entry passes n=, which the first does not take, so check could run neither
    # with --shapes, nor without it. --workload names the one to run, as sweep's does.
    two = tmp_path / "two" / "rule_vadd.py"
    two.parent.mkdir()
    two.write_text(Path(SCRIPT).read_text() + "\n\n@workload\ndef warm():\n    add()\n")
    held = shapes(tmp_path, "held", [300, 700])
    done = tunedsl("rules", "check", str(built), "--script", str(two), "--shapes", held)
    assert done.returncode == 1 and "which workload warm does not take" in done.stderr
    # (a bound no interpreter timing misses: which workload runs is what is checked here)
    done = tunedsl(
        "rules", "check", str(built), "--script", str(two), "--shapes", held,
        "--workload", "add", "--bound", "100",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 keys tuned here" in done.stdout, done.stdout
    unknown = tunedsl("rules", "check", str(built), "--workload", "add")
    assert unknown.returncode == 1 and "--workload needs --script" in unknown.stderr


PRUNED = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@workload
def add(n=64):
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    autotune_launch(
        vadd, space={"tile": [32, 64, 128, 256]}, grid=lambda cfg: (1,), args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile}, name="pruned-vadd",
        prune=lambda configs, named: [c for c in configs if c.tile >= named["n"]],
    )
    assert torch.equal(c, a + b)
"""


def test_check_says_a_pick_prune_drops_for_the_key_is_refused_not_that_it_failed(
    tmp_path: Path,
) -> None:
    """A rule's pick that the key's ``prune=`` drops (one tile, as wide as the row, must
    cover it) is never launched there: `check --script` said it "failed here"."""
    script = tmp_path / "pruned.py"
    script.write_text(PRUNED)
    swept = shapes(tmp_path, "swept", [20, 32, 40, 64, 100, 128, 200])
    done = tunedsl("sweep", str(script), "--shapes", swept, "--no-ray")
    assert done.returncode == 0, done.stderr
    # As on a GPU: the narrowest tile that covers the row is the fastest.
    for path in Path(os.environ["TUNEDSL_CACHE_DIR"]).rglob("records/*.json"):
        record = json.loads(path.read_text())
        for result in record["results"]:
            result["median_ms"] = result["min_ms"] = float(result["config"]["tile"])
        record["chosen"] = min(record["results"], key=lambda r: r["median_ms"])["config"]
        path.write_text(json.dumps(record))
    out = tmp_path / "rules"
    done = tunedsl("rules", "build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    # A rule whose picks are the narrowest tile (built from an older sweep of small rows):
    # too narrow for the rows sampled here, so their prune= drops it.
    (path,) = out.glob("*.rule.json")
    data = json.loads(path.read_text())
    data["configs"] = [Config(tile=32).to_json()] * len(data["configs"])
    path.write_text(json.dumps(data))
    held = shapes(tmp_path, "held", [33, 65])
    done = tunedsl("rules", "check", str(out), "--script", str(script), "--shapes", held)
    assert "failed here" not in done.stdout, done.stdout
    dropped = "pick Config(tile=32) dropped by prune= for this key (refused at run time"
    assert done.stdout.count(dropped) == 2, done.stdout


COMPUTED = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, workload


@triton.jit
def double(x, y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    tl.store(y + row * n + cols, tl.load(x + row * n + cols, mask=m) * 2.0, mask=m)


@workload
def rows(n=64):
    for r in (1, 3, 8):
        x = torch.randn(r, n)
        y = torch.empty_like(x)
        b = triton.next_power_of_2(n)
        autotune_launch(
            double, space={"block": [b, 2 * b], "num_warps": [1, 2, 4]}, grid=lambda cfg: (r,),
            args=(x, y, n), kwargs=lambda cfg: {"BLOCK": cfg.block}, name="computed-rows",
        )
        assert torch.equal(y, x * 2)
"""


def test_a_rule_of_a_space_computed_per_call_is_validated_on_each_keys_space(
    tmp_path: Path,
) -> None:
    """A space computed per call (``block=[next_pow2(n), 2 * next_pow2(n)]``): each key's
    record timed its own space. The blocks of other sizes were held-out picks "never timed"
    and left out of the regret: the rule validated at 1.000x on 3 of 12 keys and was one
    block for every size, refused by the runtime at all the others."""
    script = tmp_path / "computed.py"
    script.write_text(COMPUTED)
    swept = shapes(tmp_path, "swept", [64, 128, 256, 1024])
    done = tunedsl("sweep", str(script), "--shapes", swept, "--no-ray")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "rules"
    done = tunedsl("rules", "build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("*.rule.json")
    v = json.loads(path.read_text())["validation"]
    assert v["unmeasured"] == 0 and v["n"] + v["outside"] == 12, v
    assert "cells are outside the key's space as its record states it" in done.stderr
    from tunedsl.store.files import FileRecordStore
    from tunedsl.store.rules import read_rule_file

    rule = read_rule_file(path)
    records = list(FileRecordStore().iter_records())
    assert len(records) == 12
    for record in records:  # each swept key's pick is one its space keeps
        assert rule.decide(record.key)[0] in {c.config for c in record.results}, record.key
    shown = tunedsl("rules", "show", str(out)).stdout
    assert ("picks outside their key's space" in shown) == bool(v["outside"]), shown
