"""The compile pool: completion order, failures, timeouts, early stop, and the lock.

Pure Python (no torch, no triton): the jobs are ordinary functions that sleep or raise.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from tunedsl.backends.compile_pool import (
    CompileJob,
    CompileTimeout,
    compile_stream,
    default_workers,
)
from tunedsl.store import locks as lock


def _sleeper(seconds: float, value: object) -> CompileJob:
    def run() -> object:
        time.sleep(seconds)
        return value

    return CompileJob(config=value, compile=run)


def test_results_come_back_in_completion_order() -> None:
    jobs = [_sleeper(0.4, "slow"), _sleeper(0.05, "fast"), _sleeper(0.2, "mid")]
    order = [result for _, result in compile_stream(jobs, workers=3, timeout_s=10)]
    assert order == ["fast", "mid", "slow"]


def test_jobs_run_concurrently() -> None:
    # Each job waits for all four to be running at once: serially the barrier never fills
    # and every job fails with BrokenBarrierError (its wait is only a guard against a hang).
    together = threading.Barrier(4, timeout=60)

    def job(i: int) -> CompileJob:
        return CompileJob(config=i, compile=lambda: (together.wait(), i)[1])

    results = sorted(r for _, r in compile_stream([job(i) for i in range(4)], workers=4))
    assert results == [0, 1, 2, 3]


def test_every_job_reported_exactly_once_with_its_exception() -> None:
    def boom() -> object:
        raise ValueError("bad config")

    jobs = [_sleeper(0.01, i) for i in range(10)] + [CompileJob("broken", boom)]
    seen = list(compile_stream(jobs, workers=3, timeout_s=10))
    assert sorted(str(j.config) for j, _ in seen) == sorted([*map(str, range(10)), "broken"])
    failures = [r for j, r in seen if j.config == "broken"]
    assert isinstance(failures[0], ValueError) and "bad config" in str(failures[0])
    assert all(j.seconds is not None for j, _ in seen)


def test_a_job_past_the_timeout_is_dropped_and_the_pool_carries_on() -> None:
    release = threading.Event()
    hung_returned = threading.Event()

    def hang() -> object:
        release.wait(120)  # held until the stream is over: only a guard against a hang
        hung_returned.set()
        return "hung"

    jobs = [CompileJob(config="hung", compile=hang), *[_sleeper(0.05, i) for i in range(4)]]
    try:
        seen = dict((j.config, r) for j, r in compile_stream(jobs, workers=2, timeout_s=0.5))
        # The stream ended while the hung job was still blocked: it did not wait for it.
        assert not hung_returned.is_set()
    finally:
        release.set()
    assert isinstance(seen["hung"], CompileTimeout)
    assert [seen[i] for i in range(4)] == [0, 1, 2, 3]


def test_closing_the_stream_starts_no_further_job() -> None:
    started: list[int] = []

    def make(i: int) -> CompileJob:
        def run() -> int:
            started.append(i)
            time.sleep(0.1)
            return i

        return CompileJob(i, run)

    stream = compile_stream([make(i) for i in range(20)], workers=2, timeout_s=10)
    next(stream)
    stream.close()
    time.sleep(0.3)
    assert len(started) <= 4


def test_workers_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDSL_COMPILE_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.delenv("TUNEDSL_COMPILE_WORKERS")
    assert default_workers() >= 1


def test_the_compile_lock_is_reentrant_and_survives_a_raising_holder() -> None:
    def raises_under_lock() -> object:
        with lock.compile_lock, lock.compile_lock:  # re-entrant
            raise RuntimeError("compiler exploded")

    jobs = [CompileJob(i, raises_under_lock) for i in range(8)]
    results = [r for _, r in compile_stream(jobs, workers=4, timeout_s=10)]
    assert all(isinstance(r, RuntimeError) for r in results)
    # Not poisoned: another thread can take it at once.
    got: list[bool] = []

    def take() -> None:
        acquired = lock.compile_lock.acquire(timeout=1)
        got.append(acquired)
        if acquired:
            lock.compile_lock.release()

    t = threading.Thread(target=take)
    t.start()
    t.join()
    assert got == [True]


def test_file_lock_excludes_other_holders(tmp_path) -> None:
    with lock.file_lock("unit-test"):
        from filelock import FileLock, Timeout

        path = lock._lock_path("unit-test")
        with pytest.raises(Timeout):
            FileLock(path, timeout=0.1, thread_local=False, is_singleton=False).acquire()


_EXIT_SCRIPT = """
import atexit, sys, threading, time
started = []
# Registered before tunedsl's exit drain, so they run after it: what is still alive then
# would meet the interpreter's finalization.
atexit.register(lambda: print("alive at exit:", sorted(
    t.name for t in threading.enumerate() if t is not threading.main_thread()), flush=True))
atexit.register(lambda: print("jobs started:", len(started), flush=True))
from tunedsl.backends.compile_pool import CompileJob, compile_stream, start_drained_thread

def slow(i):
    def run():
        started.append(i)
        time.sleep(0.3)
        return i
    return CompileJob(i, run)

def drive():  # a compile-ahead: a thread that drives a stream nobody waits for
    for _ in compile_stream([slow(i) for i in range(40)], workers=2, timeout_s=60):
        pass

start_drained_thread(drive, name="drives-a-stream")
while not started:
    time.sleep(0.01)
"""


def test_at_exit_no_stream_starts_another_job_and_its_threads_are_joined(tmp_path) -> None:
    """A process may end while a thread drives a compile stream (the compile-ahead of a
    search that ran out of budget). Its threads are joined before the interpreter
    finalizes, which would otherwise abort the process on the H100 ("terminate called
    without an active exception"), and the remaining jobs are never started."""
    import subprocess

    script = tmp_path / "exits_while_compiling.py"
    script.write_text(_EXIT_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "alive at exit: []" in lines, proc.stdout
    started = int(next(line for line in lines if line.startswith("jobs started:")).split()[-1])
    assert started < 40  # 40 jobs of 0.3 s on 2 threads: the exit stopped the stream early


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="Python 3.12+ starts no thread at interpreter shutdown (RuntimeError)",
)
def test_a_stream_started_by_an_exit_handler_runs_every_job(tmp_path) -> None:
    """At exit only the streams already running stop early: one that an exit handler
    starts (a tuning inside an ``atexit`` function) has its caller waiting for it."""
    import subprocess

    script = tmp_path / "compiles_at_exit.py"
    script.write_text(
        "import atexit\n"
        "from tunedsl.backends.compile_pool import CompileJob, compile_stream\n"
        "from tunedsl.backends.compile_pool import start_drained_thread\n"
        "def at_exit():\n"
        "    jobs = [CompileJob(i, lambda i=i: i) for i in range(6)]\n"
        "    print('results:', sorted(r for _, r in compile_stream(jobs, workers=2)))\n"
        "atexit.register(at_exit)\n"
        "start_drained_thread(print, name='x')  # registers the exit drain, after at_exit\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "results: [0, 1, 2, 3, 4, 5]" in proc.stdout.splitlines(), proc.stdout


HOLD_ENTRY = """\
import time
from tunedsl.backends.triton_cache import triton_cache_lock
with triton_cache_lock("one-entry"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_the_wait_for_another_process_compiling_the_entry_follows_the_streams_timeout() -> None:
    # The wait for another process compiling the same Triton cache entry was half of
    # TUNEDSL_CONFIG_TIMEOUT (150 s by default) whatever the stream's timeout: under
    # `tunedsl precompile --timeout 10` the configuration was reported timed out at 10 s while
    # its thread waited on. Now the wait is half the stream's timeout, then it compiles.
    import subprocess
    import warnings

    from tunedsl.backends.triton_cache import triton_cache_lock

    holder = subprocess.Popen([sys.executable, "-c", HOLD_ENTRY], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        def waits() -> float:
            start = time.monotonic()
            with triton_cache_lock("one-entry"):  # another process holds it: waits, then goes
                return time.monotonic() - start

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the CacheWarning naming the lock it gave up on
            [(_, waited)] = list(compile_stream([CompileJob("c", waits)], timeout_s=10))
        assert isinstance(waited, float), waited  # not CompileTimeout
        assert waited >= 4.0, waited  # it did wait (half of 10 s) for the other process
    finally:
        holder.kill()
        holder.wait()


# A compile thread runs a "ptxas" (this Python under that name) that holds a gigabyte it
# touched, so that it takes a while to die once killed; then Ctrl-C's exit leaves at once.
_KILLED_COMPILER_SCRIPT = """
import os, subprocess, sys, threading

from tunedsl.backends.compile_pool import CompileJob, compile_stream, exit_now_if_compiling

ptxas = sys.argv[1]
ready = threading.Event()


def compile():
    hog = "m = b'x' * (1 << 30); print('ready', flush=True); import time; time.sleep(120)"
    child = subprocess.Popen([ptxas, "-c", hog], stdout=subprocess.PIPE, text=True)
    print("compiler", child.pid, flush=True)
    child.stdout.readline()
    ready.set()
    child.wait()


driver = threading.Thread(target=lambda: list(compile_stream([CompileJob("c", compile)])))
driver.daemon = True
driver.start()
ready.wait(120)
exit_now_if_compiling(130)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (or is still dying), a zombie or a reaped process not counted."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_exit_leaves_once_the_compilers_it_killed_are_gone(tmp_path) -> None:
    """Ctrl-C of a command compiling: the exit kills its compilers (ptxas) and leaves only
    once they are gone, so nothing of it runs after its exit status is known (a compiler
    slow to die, as one of a large kernel is on a loaded machine, outlived it)."""
    import os
    import signal
    import subprocess

    script = tmp_path / "killed_compiler.py"
    script.write_text(_KILLED_COMPILER_SCRIPT)
    ptxas = tmp_path / "ptxas"
    ptxas.symlink_to(sys.executable)
    proc = subprocess.run(
        [sys.executable, str(script), str(ptxas)], capture_output=True, text=True, timeout=180
    )
    pid = int(next(x for x in proc.stdout.splitlines() if x.startswith("compiler")).split()[1])
    try:
        assert proc.returncode == 130, proc.stderr
        assert not _alive(pid)  # checked the moment the command's exit is known
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
