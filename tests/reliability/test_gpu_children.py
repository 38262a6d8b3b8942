"""The processes of a sweep sharded over GPUs (``precompile/gpu_shards.py``) that misbehave:
real ``tunedsl sweep --no-ray --gpus 2`` runs, each "GPU" a real child process told its GPU by
``CUDA_VISIBLE_DEVICES`` and tuning under the interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

SCRIPT = str(Path(__file__).parent.parent / "integration" / "sweep_fixtures" / "sweep_vadd.py")


def _env(tmp_path: Path) -> dict[str, str]:
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _argv(tmp_path: Path, items: list[dict]) -> list[str]:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(items))
    return [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--gpus", "2",
            "--shapes", str(shapes)]  # fmt: skip


def _running(pid: int) -> bool:
    try:  # a zombie has ended
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _task_pids(tmp_path: Path) -> set[int]:
    """The GPU processes that ran a task (``ran-N`` markers: a line "pid gpu" each)."""
    lines = [
        line for p in (tmp_path / "markers").glob("ran-*") for line in p.read_text().split("\n")
    ]
    return {int(line.split()[0]) for line in lines if line.strip()}


@pytest.mark.parametrize(
    ("fail", "says"),
    [
        ("garbage", "answered with 'not an answer\\n', not its answer"),
        ("half-answer", "ended in the middle of its answer (exit code 5)"),
    ],
)
def test_a_gpu_process_that_answers_a_bad_line_fails_its_task_and_the_sweep_ends(
    tmp_path: Path, fail: str, says: str
) -> None:
    # A line that is not an answer ended the thread serving that GPU: the sweep waited
    # forever for the task it held, with a traceback of json's on stderr.
    try:
        done = subprocess.run(
            _argv(tmp_path, [{"n": 100}, {"n": 300, "fail": fail}]), env=_env(tmp_path),
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"the sweep never ended: {err.stderr!r}") from None
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    # Tried on both GPUs, each process stopped, then named with the reason.
    assert "failed after 2 attempts: add(n=300" in done.stderr, done.stderr
    assert f"on GPU 0: the GPU 0 process {says}" in done.stderr or (
        f"on GPU 1: the GPU 1 process {says}" in done.stderr
    ), done.stderr
    kept = [records.read_record_file(p) for p in (tmp_path / "cache").glob("records/*.json")]
    assert len(kept) == 1 and "100" in str(kept[0].key), [r.key for r in kept]
    assert not [p for p in _task_pids(tmp_path) if _running(p)]


def test_ctrl_c_at_a_terminal_of_a_sharded_sweep_writes_the_finished_tasks_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    # Ctrl-C at a terminal signals the GPU processes too (its process group), not only the
    # sweep: the sweep still writes what the finished task tuned.
    env = _env(tmp_path)
    env.pop("TUNEDSL_QUIET")  # the progress lines say when the quick task is done
    proc = subprocess.Popen(
        _argv(tmp_path, [{"n": 100}, {"n": 300, "fail": "slow"}]), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        lines = []
        while not any("1/2 tasks: add(n=100" in line for line in lines):
            line = proc.stderr.readline()
            assert line, (proc.wait(), lines)
            lines.append(line)
        while not (tmp_path / "markers" / "slow-started").exists():
            assert proc.poll() is None, lines
            time.sleep(0.1)
        pids = _task_pids(tmp_path)
        assert len(pids) == 2, pids
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted after 1 of 2 tasks; wrote the 1 records" in err, err
    kept = [records.read_record_file(p) for p in (tmp_path / "cache").glob("records/*.json")]
    assert len(kept) == 1 and "[100]" in str(kept[0].key), [r.key for r in kept]
    deadline = time.monotonic() + 30
    while [p for p in pids if _running(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _running(p)], "a GPU process outlived the interrupted sweep"


NEVER_COMPILES = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def broken(x, n, TILE: tl.constexpr):
    tl.static_assert(TILE < 0, "this kernel never compiles")


@workload
def one(n=64):
    x = torch.ones(n)
    autotune_launch(broken, space={"tile": [16, 32]}, grid=lambda c: (cdiv(n, c.tile),),
                    args=(x, n), kwargs=lambda c: {"TILE": c.tile}, name="broken")
"""


def test_a_task_failing_on_every_gpu_names_the_task_the_gpu_the_site_and_the_key(
    tmp_path: Path,
) -> None:
    # The error kept the tuning error's last line only: one configuration's reason, with
    # neither the site nor the key (a task may tune many keys of many sites).
    script = tmp_path / "never.py"
    script.write_text(NEVER_COMPILES)
    argv = _argv(tmp_path, [{"n": 64}])
    argv[argv.index(SCRIPT)] = str(script)
    done = subprocess.run(argv, env=_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("failed after 2 attempts")]
    assert "one(n=64): on GPU " in line, line
    assert f"{script}:17:1 (autotune_launch): every configuration of broken failed" in line, line
    assert "AssertionError('this kernel never compiles')" in line, line
    assert '(key {"args": {"n": "i16", "x": {"dtype": "float32", "shape": [64]' in line, line


@pytest.mark.parametrize("hidden", ["", "-1"])
def test_sweep_gpus_never_shows_its_processes_the_gpus_cuda_visible_devices_hides(
    tmp_path: Path, hidden: str
) -> None:
    # With every GPU hidden, the sweep numbered its processes' GPUs 0..N-1 itself, and each
    # was shown a GPU of the host (another job's, on a shared node).
    env = {**_env(tmp_path), "CUDA_VISIBLE_DEVICES": hidden}
    done = subprocess.run(
        _argv(tmp_path, [{"n": 100}]), env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode != 0, done.stderr
    assert f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not _task_pids(tmp_path), done.stderr


@pytest.mark.parametrize(
    ("listed", "gpus"),
    [("0,1", ["0", "1"]), ("0,-1,1", ["0"]), ("-1,0", []), ("", []), (" 2 , 3 ", ["2", "3"])],
)
def test_the_gpus_shared_out_are_those_cuda_shows(
    monkeypatch: pytest.MonkeyPatch, listed: str, gpus: list[str]
) -> None:
    # CUDA shows the entries before the first -1 only: GPU 1 of "0,-1,1" is hidden, and a
    # sweep gave it a process of its own.
    from tunedsl.precompile.gpu_shards import visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert visible_gpus() == gpus


def test_a_workload_that_reads_stdin_in_a_gpu_process_reads_nothing(tmp_path: Path) -> None:
    # The GPU process's stdin is its request pipe: a workload that read it waited for ever
    # (the next request comes after the answer), and the sweep with it.
    try:
        done = subprocess.run(
            _argv(tmp_path, [{"n": 100, "fail": "stdin"}]), env=_env(tmp_path),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"the sweep never ended: {err.stderr!r}") from None
    assert done.returncode == 0 and "1 record written, 0 failed" in done.stdout, done.stderr
