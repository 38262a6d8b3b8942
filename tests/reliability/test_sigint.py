"""SIGINT (Ctrl-C) in the middle of tuning: the process ends, writes no record, and leaves no
process behind. The 2-second promise is measured by benchmarks/bench_sigint.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import child_env, record_files, write_script

pytestmark = pytest.mark.needs_triton

SLOW_TUNING = """
import sys
sys.path.insert(0, {here!r})
import torch
from rel_kernels import vadd
from tunedsl import autotune_launch

n = 1 << 16  # the interpreter runs thousands of small programs per launch: slow on purpose
a, b, c = torch.ones(n), torch.ones(n), torch.zeros(n)
started = []

def announce(args):
    if not started:
        started.append(True)
        print("TUNING", flush=True)

autotune_launch(
    vadd,
    space=dict(TILE=[16, 32, 64, 128]),
    grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
    args=(a, b, c, n),
    kwargs=lambda cfg: dict(TILE=cfg.TILE),
    pre_hook=announce,
    effort="thorough",
)
print("FINISHED", flush=True)
"""


def _lingering(sid: int, grace_s: float = 1.0) -> list[str]:
    """Processes of the session still alive ``grace_s`` after its leader exited (a killed
    compiler may take a moment to die; a stray worker stays)."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = _session_processes(sid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _session_processes(sid: int) -> list[str]:
    """Processes still alive in the session ``sid`` (Linux /proc): "pid command line"."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getsid(int(entry)) != sid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != "Z":  # a zombie is dead, only not yet reaped by its parent
            alive.append(f"{entry} {cmdline[:200]}")
    return alive


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
def test_sigint_during_tuning_exits_promptly_without_record(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    script = write_script(tmp_path / "slow.py", SLOW_TUNING.format(here=str(Path(__file__).parent)))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=child_env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session: every process it starts is findable
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "TUNING", (line, proc.stderr.read() if proc.stderr else "")
    time.sleep(0.3)  # well inside the measurement of the first configurations
    proc.send_signal(signal.SIGINT)
    try:
        # A generous limit only so that a hang fails instead of blocking the suite; how fast
        # it ends (the 2-second promise) is benchmarks/bench_sigint.py's to measure.
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the process was still running 60 s after SIGINT")
    out, err = proc.communicate()
    assert "FINISHED" not in out
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err
    assert record_files(cache) == []  # tuning was cut short: no record
    assert _lingering(proc.pid) == []  # no stray worker left running


COMPILE_POOL = """
import sys
sys.path.insert(0, TESTS_DIR)
import torch
from shared_kernels import mm

from tunedsl.backends.triton_compile import compile_variant
from tunedsl.backends.compile_pool import CompileJob, compile_stream


a = torch.empty(128, 128, dtype=torch.float16)
args = (a, a, a, 128, 128, 128, 128, 1, 128, 1, 128, 1)
configs = [dict(BM=bm, BN=bn, BK=bk, num_warps=w, num_stages=s)
           for bm in (32, 64, 128) for bn in (32, 64) for bk in (32, 64) for w in (4, 8)
           for s in (2, 3)]


def job(cfg):
    kwargs = {k: cfg[k] for k in ("BM", "BN", "BK")}
    options = {k: cfg[k] for k in ("num_warps", "num_stages")}
    return CompileJob(cfg, lambda: compile_variant(mm, args, kwargs, options, target="cuda:90"))


done = 0
for _job, result in compile_stream([job(c) for c in configs], workers=2, timeout_s=300):
    if isinstance(result, BaseException):
        raise result
    done += 1
    if done == 1:
        print("FIRST", flush=True)
print("FINISHED", done, flush=True)
"""


def _interrupt_compiles(tmp_path: Path, via_cli: bool) -> tuple[float, int, str, str, int]:
    """Start the compile-pool script, SIGINT it once the first cubin is done; return
    (seconds to exit, exit status, stdout, stderr, session id)."""
    tests_dir = str(Path(__file__).resolve().parents[1])  # tests/: the shared kernels
    script = write_script(tmp_path / "pool.py", COMPILE_POOL.replace("TESTS_DIR", repr(tests_dir)))
    env = child_env(tmp_path / "cache", TRITON_CACHE_DIR=str(tmp_path / "triton"))
    env.pop("TRITON_INTERPRET")  # cross-compiling needs Triton's real compiler
    env["TUNEDSL_NO_AUTO_INTERPRET"] = "1"  # and `tunedsl run` must not turn it on
    argv = [sys.executable, "-m", "tunedsl", "run"] if via_cli else [sys.executable]
    proc = subprocess.Popen(
        [*argv, str(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "FIRST", (line, proc.stderr.read() if proc.stderr else "")
    time.sleep(0.2)  # the pool is busy with the next configurations
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the process was still running 30 s after SIGINT")
    took = time.monotonic() - sent
    out, err = proc.communicate()
    return took, proc.returncode, out, err, proc.pid


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
def test_sigint_during_parallel_compiles_under_tunedsl_run(tmp_path: Path) -> None:
    """Real cross-compiles (cuda:90 cubins, ptxas subprocesses) on the compile pool's threads
    under `tunedsl run`: Ctrl-C ends the process (before every configuration compiled),
    writes no record and leaves no compiler process behind. How fast it ends (the 2-second
    promise) is measured by benchmarks/bench_sigint.py, not asserted on a loaded CI box."""
    _took, status, out, err, sid = _interrupt_compiles(tmp_path, via_cli=True)
    assert "FINISHED" not in out, "every configuration compiled before the signal"
    assert status == 130, err[-2000:]
    assert "KeyboardInterrupt" in err or "interrupted" in err
    assert _lingering(sid) == []  # no ptxas (or any child) left running
    assert record_files(tmp_path / "cache") == []  # an interrupted run stores no decision


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
def test_sigint_during_parallel_compiles_in_a_plain_script(tmp_path: Path) -> None:
    """The same under plain `python`: compiles in flight cannot be stopped (threads), but the
    program died of an uncaught Ctrl-C, so the compile pool's exit hook does not wait for
    them (os._exit(130) after killing the compiler children); nothing stays."""
    _took, status, out, err, sid = _interrupt_compiles(tmp_path, via_cli=False)
    assert "FINISHED" not in out
    assert "KeyboardInterrupt" in err, err[-2000:]
    # 130 when compiles were still running at exit; -SIGINT (Python's own exit on an
    # uncaught KeyboardInterrupt) when none were left.
    assert status in (130, -signal.SIGINT), (status, err[-2000:])
    assert _lingering(sid) == []
    assert record_files(tmp_path / "cache") == []
