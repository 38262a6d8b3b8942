"""``tunedsl precompile`` as a user runs it: a real subprocess on fixture scripts.

Cross-compiles for cuda:90 (no GPU needed), so these run in CI.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

FIXTURES = Path(__file__).parent / "precompile_fixtures"
REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # precompile must be able to store bytecode
    env.update(
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
        TRITON_DEFAULT_FP_FUSION="1",
        TUNEDSL_COMPILE_WORKERS="2",
        PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"),
    )
    env.update(extra)
    return env


def _precompile(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", *argv],
        capture_output=True, text=True, env=_env(tmp_path, **env), cwd=REPO, timeout=600,
    )  # fmt: skip


def _tune_interpreted(tmp_path: Path, script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``tunedsl run SCRIPT`` under Triton's interpreter: records for replay to compile."""
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)],
        capture_output=True, text=True, env=_env(tmp_path, TRITON_INTERPRET="1", **env),
        cwd=REPO, timeout=300,
    )  # fmt: skip


def _row(stdout: str, label: str) -> list[int]:
    """The numbers at the end of the summary-table line starting with ``label``."""
    line = next(l for l in stdout.splitlines() if l.startswith(label))  # noqa: E741
    cells = line.split()
    tail: list[int] = []
    while cells and re.fullmatch(r"\d+|-", cells[-1]):
        cell = cells.pop()
        if cell != "-":
            tail.insert(0, int(cell))
    return tail


# Threads alone (the default on 2 workers), and forked compile workers: a worker building a
# variant counts as compiled, a worker finding it in Triton's cache as cached.
@pytest.mark.parametrize("processes", ["auto", "on"])
def test_second_run_compiles_nothing(tmp_path: Path, processes: str) -> None:
    good = str(FIXTURES / "good")  # a DSL script and a plain script with a stand-in site
    env = {"TUNEDSL_COMPILE_PROCESSES": processes}
    first = _precompile(tmp_path, "--target", "cuda:90", good, **env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert _row(first.stdout, "bytecode") == [1, 0, 0]
    assert _row(first.stdout, "standin_vadd.py:add") == [4, 0, 0, 0]
    dsl_row = next(l for l in first.stdout.splitlines() if "dsl_scale.py" in l)  # noqa: E741
    assert "scale_kernel" in dsl_row and _row(dsl_row, dsl_row[:10]) == [4, 0, 0, 0]
    assert "precompile: compiled 8" in first.stderr  # the progress line
    cubins = sorted((tmp_path / "triton-cache").rglob("*.cubin"))
    assert len(cubins) == 8

    second = _precompile(tmp_path, "--target", "cuda:90", good, **env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert _row(second.stdout, "bytecode") == [0, 1, 0]
    assert _row(second.stdout, "standin_vadd.py:add") == [0, 4, 0, 0]
    assert "everything was already warm: nothing compiled" in second.stdout
    assert sorted((tmp_path / "triton-cache").rglob("*.cubin")) == cubins


@pytest.mark.skipif(not (REPO / "examples" / "vector_add.py").exists(), reason="no gallery")
def test_gallery_example_precompiles_and_is_warm_the_second_time(tmp_path: Path) -> None:
    example = str(REPO / "examples" / "vector_add.py")
    first = _precompile(tmp_path, "--target", "cuda:90", example)
    assert first.returncode == 0, first.stdout + first.stderr
    row = next(l for l in first.stdout.splitlines() if "vadd_kernel" in l)  # noqa: E741
    compiled, cached, failed, _ = _row(row, row[:10])
    assert compiled > 0 and failed == 0
    second = _precompile(tmp_path, "--target", "cuda:90", example)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing compiled" in second.stdout
    row = next(l for l in second.stdout.splitlines() if "vadd_kernel" in l)  # noqa: E741
    assert _row(row, row[:10]) == [0, compiled + cached, 0, 0]


@pytest.mark.parametrize("processes", ["auto", "on"])
def test_a_failing_configuration_is_named_and_fails_the_run(tmp_path: Path, processes: str) -> None:
    broken = str(FIXTURES / "broken")
    run = _precompile(tmp_path, "--target", "cuda:90", broken, TUNEDSL_COMPILE_PROCESSES=processes)
    assert run.returncode == 1
    assert _row(run.stdout, "standin_broken.py:double") == [1, 0, 1, 0]
    assert "BLOCK=48" in run.stdout and "power of 2" in run.stdout


def test_without_gpu_or_target_it_says_there_is_nothing_to_compile(tmp_path: Path) -> None:
    run = _precompile(tmp_path, str(FIXTURES / "good"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no GPU and no --target" in run.stdout
    assert not (tmp_path / "triton-cache").exists()

    interp = _precompile(tmp_path, str(FIXTURES / "good"), TRITON_INTERPRET="1")
    assert interp.returncode == 0, interp.stdout + interp.stderr
    assert "nothing to compile" in interp.stdout
    assert _row(interp.stdout, "standin_vadd.py:add") == [0, 0, 0, 4]  # 4 interpreted
    assert "nothing compiled" not in interp.stdout  # not warm: there was nothing to do
    # Where the bytecode cache is not written, nothing was precompiled at all: it said
    # "only bytecode was precompiled" beside the note that none was stored.
    unwritten = _precompile(tmp_path, str(FIXTURES / "good"), PYTHONDONTWRITEBYTECODE="1")
    assert unwritten.returncode == 0, unwritten.stdout + unwritten.stderr
    assert "so nothing was precompiled" in unwritten.stdout, unwritten.stdout
    assert "only bytecode was precompiled" not in unwritten.stdout


def test_bad_target_and_missing_path_are_clear_errors(tmp_path: Path) -> None:
    bad = _precompile(tmp_path, "--target", "sm90", str(FIXTURES / "good"))
    assert bad.returncode == 2 and "cuda:90" in bad.stderr
    # An arch this Triton's ptxas does not know is refused before any compile, with the
    # ones it knows; not one ptxas failure per variant.
    unknown = _precompile(tmp_path, "--target", "cuda:999", str(FIXTURES / "good"))
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "knows no sm_999" in unknown.stderr and "cuda:90" in unknown.stderr
    assert "ptxas fatal" not in unknown.stderr and "PTXAS" not in unknown.stdout
    missing = _precompile(tmp_path, str(tmp_path / "nope.py"))
    assert missing.returncode == 1 and "no such file or directory" in missing.stderr


def test_replay_recompiles_what_the_records_describe(tmp_path: Path) -> None:
    script = FIXTURES / "replay" / "dsl_tune_scale.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert tuned.stdout.strip() == "tuned"
    first = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert first.returncode == 0, first.stdout + first.stderr
    compiled, cached, failed, _ = _row(first.stdout, "dsl_tune_scale.py:")
    # The record holds each configuration's launch options (num_warps), under the
    # interpreter too: 4 distinct binaries, each the one a launch of it compiles.
    assert (compiled, cached, failed) == (4, 0, 0)
    second = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert _row(second.stdout, "dsl_tune_scale.py:") == [0, 4, 0, 0]
    assert "nothing compiled" in second.stdout


def test_replay_prints_a_records_site_name_escaped(tmp_path: Path) -> None:
    # A record imported from someone else's bundle names its site: escape sequences in the
    # name must not reach the screen of whoever replays it (as `cache ls` escapes them).
    text = (FIXTURES / "replay" / "dsl_tune_scale.py").read_text()
    script = tmp_path / "dsl_named.py"
    named = 'name="evil\\x1b]0;title\\x07", blocks=cdiv(n, $tile),'
    script.write_text(text.replace("blocks=cdiv(n, $tile),", named))
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    printed = done.stdout + done.stderr
    assert "evil\\x1b]0;title\\x07" in printed, printed
    assert "\x1b" not in printed and "\x07" not in printed, printed


def _session_processes(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] != "Z":  # field 6 (session) after ')'
            pids.append(int(entry))
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_and_leaves_no_process(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90",
         str(FIXTURES / "slow")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(tmp_path), cwd=REPO, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    # Wait until the pool is compiling (the progress line reports the first result).
    deadline = time.monotonic() + 120
    for line in proc.stderr:
        if line.startswith("precompile: compiled") or time.monotonic() > deadline:
            break
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    rc = proc.wait(timeout=30)
    elapsed = time.monotonic() - sent
    assert rc == 130, proc.stderr.read()
    # How fast it stops is a speed figure: benchmarks/bench_sigint.py measures it.
    print(f"stopped {elapsed:.2f} s after SIGINT")
    assert "terminate called" not in proc.stderr.read()  # no abort under running compiles
    # No worker or ptxas left behind, checked the moment its exit is known: the exit waits
    # until the compilers it killed are gone, so nothing here waits for them.
    assert _session_processes(proc.pid) == []
    records = Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records"
    assert not records.exists() or not list(records.glob("*.json"))
    assert not list((tmp_path / "triton-cache").rglob("*.tmp*"))


def test_replay_of_an_interpreter_record_of_a_kernel_that_calls_tl_sum_recompiles_it(
    tmp_path: Path,
) -> None:
    # Such a record's kernel hash covers tl.sum's source too: replay called it "changed
    # since it was tuned" and skipped it, though nothing was edited.
    script = FIXTURES / "replay" / "dsl_rowsum.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "source changed" not in done.stdout + done.stderr
    compiled, _cached, failed, _ = _row(done.stdout, "dsl_rowsum.py:")
    assert (compiled, failed) == (2, 0)


def test_replay_of_a_record_whose_constexpr_is_a_triton_function_compiles_it(
    tmp_path: Path,
) -> None:
    # Tutorial 03's epilogue (ACTIVATION=leaky_relu): the record holds the function as
    # "@jit leaky_relu <digest>", and replay passed that string to the kernel, whose
    # `ACTIVATION(v)` then failed every configuration ("'str' object is not callable").
    script = FIXTURES / "replay" / "dsl_epilogue.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    compiled, _cached, failed, _ = _row(done.stdout, "dsl_epilogue.py:")
    assert (compiled, failed) == (2, 0)
    ttir = [p.read_text() for p in (tmp_path / "triton-cache").rglob("scale_kernel.ttir")]
    assert len(ttir) == 2 and all("arith.cmpf oge" in t for t in ttir)  # leaky_relu's test


def test_replay_of_a_record_whose_constexpr_is_a_triton_dtype_builds_what_a_launch_loads(
    tmp_path: Path,
) -> None:
    # A record holds a Triton dtype given as a constexpr by its name
    # ("triton.language.float32"), and replay passed that string to the kernel: every
    # configuration failed with "'str' object has no attribute 'scalar'".
    script = FIXTURES / "replay" / "dsl_cast_dtype.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _row(done.stdout, "dsl_cast_dtype.py:")[:3] == [2, 0, 0], done.stdout
    # The workload's compiles are a launch's (same key): they find the replayed binaries.
    warm = _precompile(tmp_path, "--target", "cuda:90", str(script))
    assert warm.returncode == 0, warm.stdout + warm.stderr
    row = next(line for line in warm.stdout.splitlines() if "(cast_kernel)" in line)
    assert _row(row, row)[:3] == [0, 2, 0], warm.stdout


def test_replay_of_an_interpreter_record_builds_the_binaries_a_launch_there_loads(
    tmp_path: Path,
) -> None:
    # A record tuned under the interpreter held plain types ("*fp32"): replayed for
    # cuda:90 it compiled variants without Triton's 16-byte alignment facts, counted as
    # compiled, which a launch there (aligned tensors) never loads.
    script = FIXTURES / "replay" / "dsl_epilogue.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _row(done.stdout, "dsl_epilogue.py:")[:3] == [2, 0, 0], done.stdout
    # The workload's compiles are a launch's (same key): they find the replayed binaries.
    warm = _precompile(tmp_path, "--target", "cuda:90", str(script))
    assert warm.returncode == 0, warm.stdout + warm.stderr
    row = next(line for line in warm.stdout.splitlines() if "(scale_kernel)" in line)
    assert _row(row, row)[:3] == [0, 2, 0], warm.stdout


def test_replay_of_an_interpreter_record_for_other_targets_builds_what_a_launch_loads_or_says_why_not(
    tmp_path: Path,
) -> None:
    # The record holds a CUDA launch's specialization ("*fp32:D"): the same on every CUDA
    # architecture, so cuda:80 and cuda:100 replay it exactly. A HIP launch specializes a
    # pointer otherwise ("*fp32:DS"): replayed for hip:gfx942 it compiled "D" variants,
    # counted as compiled, which no launch there loads (the workload compiled both again).
    script = FIXTURES / "replay" / "dsl_epilogue.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    for target in ("cuda:80", "cuda:100"):
        done = _precompile(tmp_path, "--replay", "--target", target)
        assert done.returncode == 0, done.stdout + done.stderr
        assert _row(done.stdout, "dsl_epilogue.py:")[:3] == [2, 0, 0], done.stdout
        warm = _precompile(tmp_path, "--target", target, str(script))
        row = next(line for line in warm.stdout.splitlines() if "(scale_kernel)" in line)
        assert _row(row, row)[:3] == [0, 2, 0], warm.stdout
    done = _precompile(tmp_path, "--replay", "--target", "hip:gfx942")
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert not any(line.startswith("dsl_epilogue.py:") for line in done.stdout.splitlines()), said
    assert "skipped: it was tuned under the interpreter" in said, said
    assert "a hip launch specializes them otherwise" in said, said
    assert "tunedsl precompile --target hip:gfx942 SCRIPT" in said, said


def test_replay_compiles_a_hint_named_parameter_with_the_option_a_launch_gives_it(
    tmp_path: Path,
) -> None:
    # Tutorial 02 passes `num_stages=` to a kernel parameter of that name; Triton's launch
    # makes it the compile option too. Replay compiled each configuration with the default
    # num_stages (3), counted as compiled, binaries a launch with 1 or 2 never loads.
    script = FIXTURES / "replay" / "dsl_staged.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _row(done.stdout, "dsl_staged.py:")[:3] == [2, 0, 0], done.stdout
    warm = _precompile(tmp_path, "--target", "cuda:90", str(script))
    assert warm.returncode == 0, warm.stdout + warm.stderr
    row = next(line for line in warm.stdout.splitlines() if "(staged_copy)" in line)
    assert _row(row, row)[:3] == [0, 2, 0], warm.stdout


def test_replay_of_a_script_whose_import_fails_names_the_error_and_imports_it_once(
    tmp_path: Path,
) -> None:
    script = FIXTURES / "replay_unguarded" / "dsl_unguarded.py"
    marker = tmp_path / "imports.txt"
    tuned = _tune_interpreted(tmp_path, script, REPLAY_MARKER=str(marker))
    assert tuned.stdout.split() == ["tuned", "tuned"], tuned.stdout + tuned.stderr
    marker.write_text("")
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90", REPLAY_MARKER=str(marker))
    assert done.returncode == 1
    text = done.stdout + done.stderr
    # Importing the script ran its top-level work, where a site under precompile returns
    # None: the error says so, where, and what to do; once for the file, not per record.
    assert "AttributeError" in text and "dsl_unguarded.py:31" in text, text
    assert 'if __name__ == "__main__":' in text and "2 records" in text, text
    assert text.count("AttributeError") == 1, text
    assert marker.read_text().splitlines() == ["imported"]


def test_replay_never_imports_a_kernel_file_another_user_can_write(tmp_path: Path) -> None:
    # A record that entered from elsewhere (a bundle, a shared Redis) names its kernel's file;
    # replay imports that file, which runs its top-level code: one another user owns (or can
    # write) must not be imported. Here the other user is uid 65534 (nobody).
    import json
    import shutil
    import tempfile

    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to act as a second local user (uid 65534)")
    script = FIXTURES / "replay" / "dsl_tune_scale.py"
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    cache = Path(os.environ["TUNEDSL_CACHE_DIR"])
    (record_file,) = (cache / "records").glob("*.json")
    record = json.loads(record_file.read_text())
    # The other user's directory, reachable by them (tmp_path is private to root).
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-replay-trust-"))
    try:
        shared.chmod(0o755)
        evil = shared / "evil"
        evil.mkdir()
        os.chown(evil, 65534, 65534)
        marker = evil / "ran"
        planted = evil / "dsl_tune_scale.py"
        record["kernel"]["file"] = str(planted)
        bundle = evil / "bundle.jsonl"
        write = (
            "import sys; from pathlib import Path\n"
            "Path(sys.argv[1]).write_text(sys.argv[2])\n"
            "Path(sys.argv[3]).write_text(sys.argv[4])\n"
        )
        plain = f"open({str(marker)!r}, 'w').write('ran')\n"
        code = plain + script.read_text()
        lines = json.dumps({"tunedsl_records": 2}) + "\n" + json.dumps(record) + "\n"
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
             "-I", "-c", write, str(planted), code, str(bundle), lines],
            check=True, timeout=60, cwd="/",
        )  # fmt: skip
        assert planted.stat().st_uid == 65534
        # The victim imports the colleague's bundle into a fresh cache, then replays it.
        other_cache = tmp_path / "imported-cache"
        imported = subprocess.run(
            [sys.executable, "-m", "tunedsl", "cache", "import", str(bundle)],
            capture_output=True, text=True, cwd=REPO, timeout=120,
            env=_env(tmp_path, TUNEDSL_CACHE_DIR=str(other_cache)),
        )  # fmt: skip
        assert imported.returncode == 0, imported.stdout + imported.stderr
        done = _precompile(
            tmp_path, "--replay", "--target", "cuda:90", TUNEDSL_CACHE_DIR=str(other_cache)
        )
        text = done.stdout + done.stderr
        assert not marker.exists(), "replay ran code from a file another user wrote"
        assert done.returncode == 1, text
        assert str(planted) in text and "owned by another user (uid 65534)" in text, text
        # A record naming a module (its file gone) found in the shared directory the replay
        # runs from (on `python -m`'s path): not imported either.
        record["kernel"].update(file=str(evil / "gone.py"), module="planted_kernels")
        lines = json.dumps({"tunedsl_records": 2}) + "\n" + json.dumps(record) + "\n"
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
             "-I", "-c", write, str(evil / "planted_kernels.py"), plain, str(bundle), lines],
            check=True, timeout=60, cwd="/",
        )  # fmt: skip
        for argv in (["cache", "clear", "--all"], ["cache", "import", str(bundle)]):
            step = subprocess.run(
                [sys.executable, "-m", "tunedsl", *argv], capture_output=True, text=True,
                cwd=REPO, timeout=120, env=_env(tmp_path, TUNEDSL_CACHE_DIR=str(other_cache)),
            )  # fmt: skip
            assert step.returncode == 0, step.stdout + step.stderr
        env = _env(tmp_path, TUNEDSL_CACHE_DIR=str(other_cache))
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "precompile", "--replay", "--target", "cuda:90"],
            capture_output=True, text=True, env=env, cwd=evil, timeout=600,
        )  # fmt: skip
        text = done.stdout + done.stderr
        assert not marker.exists(), "replay ran code from a module another user wrote"
        assert done.returncode == 1 and "planted_kernels" in text, text
        assert "owned by another user (uid 65534)" in text, text
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_replay_of_an_interpreter_record_compiles_each_occupancy_as_the_target_launches_it(
    tmp_path: Path,
) -> None:
    # The interpreter's launches leave occupancy out (it has no registers to cap), and the
    # record keeps the options they had: replayed for cuda:90, occupancy=3 and occupancy=4
    # were compiled alike, with no register cap, a binary a launch there never loads (it
    # compiles the configuration with maxnreg=168 or 128).
    source = (FIXTURES / "replay" / "dsl_tune_scale.py").read_text()
    script = tmp_path / "dsl_tune_occupancy.py"
    script.write_text(source.replace("num_warps=[1, 2]", "num_warps=[4], occupancy=[3, 4]"))
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    compiled, _cached, failed, _ = _row(done.stdout, "...tune_occupancy.py:")
    assert (compiled, failed) == (4, 0), done.stdout
    caps = re.findall(r'"maxnreg": (\w+)', "".join(
        p.read_text() for p in (tmp_path / "triton-cache").rglob("*.json")
    ))  # fmt: skip
    assert sorted(caps) == ["128", "128", "168", "168"], caps


STALE_LIB = """\
import triton.language as tl

WIDTH = tl.constexpr({width})
ACC = tl.{acc}
"""

STALE_SCRIPT = """\
import torch
import triton
import triton.language as tl

import stale_values_lib as lib
from stale_values_lib import ACC
from tunedsl import autotune, cdiv, workload
from tunedsl.precompile.workload import precompile_device


@triton.jit
def widen(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, (tl.load(x + offs, mask=m) * lib.WIDTH).to(ACC).to(tl.float32), mask=m)


@triton.heuristics({"FULL": lambda args: args["n"] % args["TILE"] == 0})
@triton.jit
def widen_even(x, y, n, TILE: tl.constexpr, FULL: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, (tl.load(x + offs, mask=m) * lib.WIDTH).to(ACC).to(tl.float32), mask=m)


def run(x, y):
    n = y.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), widen(x, y, n, TILE=$tile))
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), widen_even(x, y, n, TILE=$tile))


@workload
def warm():
    x = torch.ones(300, device=precompile_device())
    run(x, torch.empty_like(x))
"""


def test_values_tritons_cache_key_leaves_out_get_binaries_of_their_own(tmp_path: Path) -> None:
    """A kernel, bare and under ``@triton.heuristics``, reads ``lib.WIDTH`` through a module
    and ``ACC``, a ``tl.dtype`` global.
    Triton's cache key covers neither, so after an edit of ``stale_values_lib.py`` Triton's
    cache served the binary compiled with the old values: tunedsl tuned the new kernel again
    and launched the old code (the multiply by 3 and the rounding to fp16). tunedsl's
    identity covers them, and the kernel's compile key now does too."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "stale_values.py").write_text(STALE_SCRIPT, encoding="utf-8")

    def precompile(width: int, acc: str) -> list[str]:
        (work / "stale_values_lib.py").write_text(
            STALE_LIB.format(width=width, acc=acc), encoding="utf-8"
        )
        run = _precompile(tmp_path, "--target", "cuda:90", str(work / "stale_values.py"),
                          PYTHONPATH=str(work))  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        return sorted(p.read_text() for p in (tmp_path / "triton-cache").rglob("*.ptx"))

    def multiplies_by(ptx: str, factor: float) -> bool:  # an fp32 immediate, as PTX writes it
        return f"0f{struct.pack('>f', factor).hex().upper()}" in ptx

    def kernels(ptx: list[str]) -> list[str]:
        return sorted(re.search(r"\.entry (\w+)", p).group(1) for p in ptx)  # type: ignore[union-attr]

    both = ["widen", "widen", "widen_even", "widen_even"]
    first = precompile(3, "float16")
    assert kernels(first) == both
    assert all(multiplies_by(p, 3.0) and "cvt.rn.f16" in p for p in first)
    second = precompile(5, "float16")  # lib.WIDTH edited
    new = [p for p in second if p not in first]
    assert kernels(new) == both and all(multiplies_by(p, 5.0) for p in new)
    third = precompile(5, "float32")  # ACC edited
    new = [p for p in third if p not in second]
    assert kernels(new) == both and not any("cvt.rn.f16" in p for p in new)


HEURISTIC_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.precompile.workload import precompile_device


@triton.heuristics({"FULL": lambda args: args["n"] % args["TILE"] == 0,
                    "WIDE": lambda args: args["num_warps"] > 2})
@triton.jit
def copy_even(x, y, n, TILE: tl.constexpr, FULL: tl.constexpr, WIDE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if FULL:
        tl.store(y + offs, tl.load(x + offs) + WIDE)
    else:
        tl.store(y + offs, tl.load(x + offs, mask=offs < n) + WIDE, mask=offs < n)


def run(x, y):
    n = y.numel()
    autotune(space=dict(tile=[64, 128], num_warps=[2, 4]), blocks=cdiv(n, $tile),
             copy_even(x, y, n, TILE=$tile))


@workload
def warm():
    for n in (256, 300):
        x = torch.ones(n, device=precompile_device())
        run(x, torch.empty_like(x))
"""


@pytest.mark.parametrize("processes", ["off", "on"])
def test_a_kernel_under_triton_heuristics_compiles_with_their_values(
    tmp_path: Path, processes: str
) -> None:
    """A kernel under ``@triton.heuristics`` has parameters that only the heuristics give
    (``FULL``, ``WIDE``). Compiling it ahead (``precompile``, and the tuning's compiles on a
    GPU) compiled the bare JIT function without them: every configuration failed with
    "missing 1 required positional argument". The heuristics' values are computed as
    ``Heuristics.run`` does, from the arguments and the configuration's launch options."""
    script = tmp_path / "heuristic_copy.py"
    script.write_text(HEURISTIC_SCRIPT, encoding="utf-8")
    run = _precompile(tmp_path, "--target", "cuda:90", str(script),
                      TUNEDSL_COMPILE_PROCESSES=processes)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if "(copy_even)" in line]
    assert len(rows) == 2 and all(_row(r, r[:10]) == [4, 0, 0, 0] for r in rows), run.stdout
    # n=256 divides both tiles (FULL), n=300 neither; num_warps 2 and 4 (WIDE): 8 binaries
    assert len(list((tmp_path / "triton-cache").rglob("*.cubin"))) == 8


REPLAYED_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.heuristics({"FULL": lambda args: args["n"] % args["TILE"] == 0})
@triton.jit
def add_one_even(x, y, n, TILE: tl.constexpr, FULL: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if FULL:
        tl.store(y + offs, tl.load(x + offs) + 1)
    else:
        tl.store(y + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


@triton.jit
def add_one(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


def run(kernel, name, space, n):
    x = torch.randn(n)
    y = torch.empty_like(x)
    autotune_launch(kernel, space=space, grid=lambda c: (cdiv(n, c.TILE),), args=(x, y, n),
                    kwargs=lambda c: {"TILE": c.TILE}, name=name)
    assert torch.equal(y, x + 1)


if __name__ == "__main__":
    for n in (4096, 4000):  # FULL for both tiles, then for neither
        run(add_one_even, "add_one_even", {"TILE": [128, 256]}, n)
    for n in (4096, 8192):  # one signature: the second record's binaries are the first's
        run(add_one, "add_one", {"TILE": [128], "num_ctas": [1, 3]}, n)  # 3 CTAs compile on no GPU
    print("tuned")
"""


def test_replay_compiles_what_heuristics_gave_and_counts_a_failed_binary_once_per_record(
    tmp_path: Path,
) -> None:
    """Replay of records tuned under the interpreter, on ``cuda:90``:

    - a kernel under ``@triton.heuristics``: its records kept only the configuration's own
      constexprs, and every configuration failed with "no value recorded for constexpr
      argument 'FULL'"; records now keep what the heuristics computed for each;
    - two records of one signature: the second's configurations are the first's binaries.
      One that failed to compile for the first was counted "cached" for the second."""
    script = tmp_path / "replayed.py"
    script.write_text(REPLAYED_SCRIPT, encoding="utf-8")
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.stdout.strip() == "tuned", tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    by_site: dict[str, list[list[int]]] = {}  # compiled, cached, failed, interpreted
    for line in done.stdout.splitlines():
        if line.startswith(("add_one_even [record", "add_one [record")):
            by_site.setdefault(line.split()[0], []).append(_row(line, line[:10]))
    # FULL differs between the two sizes: 4 binaries, none failed
    assert by_site["add_one_even"] == [[2, 0, 0, 0], [2, 0, 0, 0]], done.stdout
    # the second record: its 1-CTA binary built, its 3-CTA one failed again (not "cached")
    assert sorted(by_site["add_one"]) == [[0, 1, 1, 0], [1, 0, 1, 0]], done.stdout
    assert done.returncode == 1 and done.stdout.count("num_ctas=3): RuntimeError") == 2


GRID_HEURISTIC_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.precompile.workload import precompile_device


@triton.heuristics({"FULL": lambda args: args["grid"][0] * args["TILE"] == args["n"]})
@triton.jit
def add_one_full(x, y, n, TILE: tl.constexpr, FULL: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if FULL:
        tl.store(y + offs, tl.load(x + offs) + 1)
    else:
        tl.store(y + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


def run(x, y):
    n = y.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), add_one_full(x, y, n, TILE=$tile))


@workload
def warm():
    x = torch.ones(256, device=precompile_device())
    run(x, torch.empty_like(x))


if __name__ == "__main__":
    x = torch.arange(320, dtype=torch.float32)  # FULL for tile 64, not for 128
    y = torch.empty_like(x)
    run(x, y)
    assert torch.equal(y, x + 1)
    print("tuned")
"""


@pytest.mark.parametrize("processes", ["off", "on"])
def test_a_heuristic_that_reads_the_grid_compiles_ahead_and_replays(
    tmp_path: Path, processes: str
) -> None:
    """A ``@triton.heuristics`` function reads ``args["grid"]``, which ``Heuristics.run``
    gets from ``kernel[grid](...)``: the site ran under the interpreter, but compiling it
    ahead computed the heuristics without the grid (every configuration failed with
    ``KeyError: 'grid'``) and its records kept no ``FULL``, so replay failed them too."""
    script = tmp_path / "grid_heuristic.py"
    script.write_text(GRID_HEURISTIC_SCRIPT, encoding="utf-8")
    ahead = _precompile(tmp_path, "--target", "cuda:90", str(script),
                        TUNEDSL_COMPILE_PROCESSES=processes)  # fmt: skip
    assert ahead.returncode == 0, ahead.stdout + ahead.stderr
    row = next(l for l in ahead.stdout.splitlines() if "(add_one_full)" in l)  # noqa: E741
    assert _row(row, row[:10]) == [2, 0, 0, 0], ahead.stdout

    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.stdout.strip() == "tuned", tuned.stdout + tuned.stderr
    replayed = _precompile(tmp_path, "--replay", "--target", "cuda:90",
                           TUNEDSL_COMPILE_PROCESSES=processes)  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    row = next(l for l in replayed.stdout.splitlines() if "grid_heuristic.py:" in l)  # noqa: E741
    compiled, cached, failed, _ = _row(row, row[:10])
    assert failed == 0 and compiled + cached == 2, replayed.stdout


DEFAULTS_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def times_scale(x, y, n, TILE: tl.constexpr, SCALE: tl.constexpr = 2):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * SCALE, mask=offs < n)


if __name__ == "__main__":
    x = torch.arange(300, dtype=torch.float32)
    y = torch.empty_like(x)
    n = y.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), times_scale(x, y, n, TILE=$tile))
    assert torch.equal(y, 2 * x)
    print("tuned")
"""


def test_replay_of_an_interpreter_record_of_a_kernel_with_a_default_parameter(
    tmp_path: Path,
) -> None:
    """A kernel with a parameter default (``SCALE: tl.constexpr = 2``) tuned under the
    interpreter: its record's source hash covers the default, and replay compared it with
    the interpreter's hash without it, so it skipped the record as "the kernel's source
    changed since it was tuned" and compiled nothing for it."""
    script = tmp_path / "dsl_defaults.py"
    script.write_text(DEFAULTS_SCRIPT, encoding="utf-8")
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.stdout.strip() == "tuned", tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "source changed" not in done.stdout, done.stdout
    assert _row(done.stdout, "dsl_defaults.py:") == [2, 0, 0, 0], done.stdout


TRITON_AUTOTUNED_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, workload
from tunedsl.precompile.workload import precompile_device


@triton.autotune(configs=[triton.Config({"TILE": 64}), triton.Config({"TILE": 128})], key=["n"])
@triton.jit
def copy_tiles(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@workload
def warm():
    x = torch.ones(256, device=precompile_device())
    autotune(space=dict(w=[1, 2]), blocks=4, copy_tiles(x, torch.empty_like(x), 256, num_warps=$w))
"""


def test_a_kernel_under_triton_autotune_is_named_with_the_fix_when_compiled_ahead(
    tmp_path: Path,
) -> None:
    """A kernel still under ``@triton.autotune``, whose configurations set ``TILE``: the
    interpreter names the decorator and the fix, but compiling ahead (``precompile
    --target``, the tuning's compiles on a GPU) compiled the bare kernel and failed every
    configuration with "dynamic_func() missing 1 required positional argument: 'TILE'"."""
    script = tmp_path / "triton_autotuned.py"
    script.write_text(TRITON_AUTOTUNED_SCRIPT, encoding="utf-8")
    run = _precompile(tmp_path, "--target", "cuda:90", str(script))
    assert run.returncode == 1, run.stdout + run.stderr
    failures = [line for line in run.stdout.splitlines() if line.startswith("failed:")]
    assert len(failures) == 2, run.stdout
    for line in failures:
        assert "missing 1 required positional argument" not in line
        assert "@triton.autotune" in line and "`TILE`" in line and "space=" in line, line


UNREAD_FIELD_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def copy(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


def run(x):
    y = torch.empty_like(x)
    n = x.numel()
    autotune(space=dict(tile=[64, 2 * 64], num_warp=[1, 2, 4]), blocks=cdiv(n, $tile),
             copy(x, y, n, TILE=$tile))
    return y


@workload
def warm():
    run(torch.ones(256))
"""


@pytest.mark.parametrize(
    "mistake, said",
    [
        (
            "space=dict(tile=[64, 2 * 64], num_warp=[1, 2, 4])",
            "space field `num_warp` is read by nothing in the launch (the kernel's arguments "
            "and the grid) and is not a launch hint, so each of its values would tune the same "
            "kernel again; did you mean the launch hint `num_warps`?",
        ),
        (
            'space=dict(tile=[64, 128]), reset_to_zero=["yy"]',
            "reset_to_zero=: 'yy' is not a parameter of copy(x, y, n, TILE); did you mean 'y'?",
        ),
    ],
)
def test_a_mistake_the_first_call_refuses_fails_precompile_too(
    tmp_path: Path, mistake: str, said: str
) -> None:
    """A computed space= with a misspelled hint field (`num_warp`), a misspelled
    reset_to_zero= name: `tunedsl run` refuses them on the first call, but `precompile
    --target` compiled the variants (the same kernel three times each, for the first) and
    exited 0, so the build was green and the serving process failed on its first call."""
    script = tmp_path / "first_call_mistake.py"
    text = UNREAD_FIELD_SCRIPT.replace("space=dict(tile=[64, 2 * 64], num_warp=[1, 2, 4])", mistake)
    script.write_text(text, encoding="utf-8")
    run = _precompile(tmp_path, "--target", "cuda:90", str(script))
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert f"UsageError: {script}:17:5 (copy): {said}" in out, out


UNREPLAYABLE_SCRIPT = """\
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tunedsl import autotune, cdiv


@triton.jit
def relu(v):
    return tl.maximum(v, 0)


@triton.jit
def with_epilogue(x, y, n, EPI: tl.constexpr, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, EPI(tl.load(x + offs, mask=offs < n)), mask=offs < n)


@triton.jit
def with_shape(x, y, shape, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < shape[0]), mask=offs < shape[0])


@triton.jit
def with_descriptors(xd, yd, TILE: tl.constexpr):
    yd.store([tl.program_id(0) * TILE], xd.load([tl.program_id(0) * TILE]))


if __name__ == "__main__":
    x = torch.arange(-150, 150, dtype=torch.float32)
    y = torch.empty_like(x)
    n = y.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), with_epilogue(x, y, n, relu, TILE=$tile))
    assert torch.equal(y, x.clamp(min=0))
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), with_shape(x, y, (n, 1), TILE=$tile))
    assert torch.equal(y, x)
    y.zero_()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), key=n,
             with_descriptors(TensorDescriptor.from_tensor(x, [$tile]),
                              TensorDescriptor.from_tensor(y, [$tile]), TILE=$tile))
    assert torch.equal(y, x)
    print("tuned")
"""


def test_replay_names_a_record_it_cannot_rebuild_and_how_to_compile_it(tmp_path: Path) -> None:
    """Records of a kernel given a ``@triton.jit`` function (an epilogue), a tuple, or host
    tensor descriptors (tuned under the interpreter). Replay failed every configuration with
    "'str' object is not callable" (the function's repr compiled in as the function),
    ``KeyError: 'tuple'`` and ``KeyError: 'TensorDescriptor'``. A record now names the
    function by name and digest and keeps a launch's specialization (the descriptor's type),
    so those two replay; a tuple's values are not kept, so its record is skipped with a note
    naming the argument and the way to compile it."""
    script = tmp_path / "unreplayable.py"
    script.write_text(UNREPLAYABLE_SCRIPT, encoding="utf-8")
    tuned = _tune_interpreted(tmp_path, script)
    assert tuned.stdout.strip() == "tuned", tuned.stdout + tuned.stderr
    done = _precompile(tmp_path, "--replay", "--target", "cuda:90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed:" not in done.stdout, done.stdout
    notes = [line for line in done.stdout.splitlines() if "skipped" in line]
    (note,) = notes
    assert "argument `shape`" in note, done.stdout  # the tuple
    assert "@workload" in note and "--target cuda:90" in note, note
    for site in ("with_epilogue", "with_descriptors"):
        row = next(line for line in done.stdout.splitlines() if site in line)
        assert _row(row, row[:10])[:3] == [2, 0, 0], done.stdout
