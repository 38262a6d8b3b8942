"""Forked compile workers (``backends/compile_processes.py``): real forked processes, real pipes."""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import process_jobs

from tunedsl.backends import compile_pool, compile_processes
from tunedsl.backends.compile_pool import CompileTimeout
from tunedsl.backends.compile_processes import ForkedWorkers, WorkerCrashed, WorkerFailed

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """The process ``pid`` has exited (reaped by init once the zygote has left)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except (FileNotFoundError, IndexError):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def pool():
    workers = ForkedWorkers(2)
    yield workers
    workers.close()


def test_jobs_run_in_other_processes_and_see_the_registry(pool: ForkedWorkers) -> None:
    key = compile_processes.register(["registered", "before", "the", "fork"])
    late = ForkedWorkers(1)  # forked after the registration: knows it
    try:
        pid, echoed = late.run(process_jobs.whoami, {"x": 1}, 30.0)
        assert pid != os.getpid() and echoed == {"x": 1}
        assert late.run(process_jobs.registered, key, 30.0) == str(
            ["registered", "before", "the", "fork"]
        )
        assert late.knows([key])
    finally:
        late.close()
    pids = {pool.run(process_jobs.whoami, i, 30.0)[0] for i in range(6)}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_workers_run_at_the_tuning_process_priority(pool: ForkedWorkers) -> None:
    # Not below it: a worker (and the ptxas it starts) kept off the CPU would only make the
    # compiles that the tune waits for slower.
    pid = pool.run(process_jobs.whoami, None, 30.0)[0]
    assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0)


def _logging_caller(
    workers: ForkedWorkers, log: Path, outcomes: dict[str, object]
) -> Callable[[str, float, threading.Event | None], None]:
    """``call(tag, priority, cancelled)``: a caller whose job appends ``tag`` to ``log`` when
    it runs; its result, or the exception it got, is ``outcomes[tag]``."""

    def call(tag: str, priority: float, cancelled: threading.Event | None = None) -> None:
        try:
            outcomes[tag] = workers.run(
                process_jobs.note_order,
                (str(log), tag),
                30.0,
                priority=priority,
                cancelled=cancelled,
            )
        except Exception as err:
            outcomes[tag] = err

    return call


def test_waiting_callers_are_served_lowest_priority_first_and_a_cancelled_one_runs_nothing(
    tmp_path: Path,
) -> None:
    """A search's current batch waits in line with the batches it announced ahead: the one
    process goes to the lowest priority first, whatever the order of arrival, and a caller
    cancelled while it waits gets ``Cancelled`` without its job running."""
    workers = ForkedWorkers(1)
    log = tmp_path / "order.txt"
    try:
        busy = threading.Thread(target=workers.run, args=(process_jobs.sleep, 1.0, 30.0))
        busy.start()
        time.sleep(0.3)  # the only process is busy: everyone below waits
        cancel = threading.Event()
        outcomes: dict[str, object] = {}
        call = _logging_caller(workers, log, outcomes)

        callers = []
        for tag, priority, cancelled in [
            ("ahead-3", 3.0, None),
            ("dropped", 2.0, cancel),
            ("ahead-1", 1.0, None),
            ("current", 0.0, None),
        ]:
            callers.append(threading.Thread(target=call, args=(tag, priority, cancelled)))
            callers[-1].start()
            time.sleep(0.05)
        cancel.set()
        busy.join()
        for thread in callers:
            thread.join(30)
        assert log.read_text().split() == ["current", "ahead-1", "ahead-3"]
        assert isinstance(outcomes["dropped"], compile_processes.Cancelled)
    finally:
        workers.close()


def test_a_process_handed_to_a_caller_whose_batch_just_ended_goes_to_the_next_in_line(
    tmp_path: Path,
) -> None:
    """A caller is handed the process as its batch is cancelled (the cancel comes between
    its timed looks, the handover wakes it): it runs nothing, and the process serves the
    next caller in line at once."""
    log = tmp_path / "ran.txt"
    workers = ForkedWorkers(1)
    try:
        busy = threading.Thread(target=workers.run, args=(process_jobs.sleep, 1.0, 30.0))
        busy.start()
        time.sleep(0.3)  # the caller below looks at 0.8 s, 1.3 s: the process frees at ~1 s
        cancel = threading.Event()
        outcomes: dict[str, object] = {}
        call = _logging_caller(workers, log, outcomes)

        first = threading.Thread(target=call, args=("ended", 0.0, cancel))
        first.start()
        time.sleep(0.1)
        second = threading.Thread(target=call, args=("next", 1.0, None))
        second.start()
        time.sleep(0.5)  # 0.9 s: after the first caller's look at 0.8 s
        cancel.set()
        for thread in (busy, first, second):
            thread.join(10)
        assert isinstance(outcomes["ended"], compile_processes.Cancelled), outcomes
        assert outcomes["next"] == "next" and log.read_text().split() == ["next"]
    finally:
        workers.close()


def test_a_streams_timeout_counts_the_compile_not_the_wait_for_a_process() -> None:
    """Jobs of a compile stream that wait in line for the one process (behind a search's
    current batch, say) are not timed out for their wait: each compiles in 0.6 s, under
    the stream's 1.5 s, though the third ends 1.8 s after it was picked up."""
    workers = ForkedWorkers(1)
    try:
        jobs = [
            compile_pool.CompileJob(i, lambda: workers.run(process_jobs.sleep, 0.6, 30.0))
            for i in range(3)
        ]
        results = [r for _, r in compile_pool.compile_stream(jobs, workers=3, timeout_s=1.5)]
        assert results == ["slept"] * 3, results
    finally:
        workers.close()


def test_a_job_that_waits_in_line_longer_than_its_timeout_is_not_timed_out() -> None:
    """A batch announced ahead may wait behind many others for a process: the wait is no
    compile, so a job that waits 1.7 s and compiles in 0.2 s is not a 1 s timeout (the
    configuration would be recorded as failed without ever being compiled)."""
    workers = ForkedWorkers(1)
    try:
        busy = threading.Thread(target=workers.run, args=(process_jobs.sleep, 2.0, 30.0))
        busy.start()
        time.sleep(0.3)  # the only process is busy
        job = compile_pool.CompileJob(
            "ahead", lambda: workers.run(process_jobs.sleep, 0.2, 30.0, priority=1.0)
        )
        results = [r for _, r in compile_pool.compile_stream([job], workers=1, timeout_s=1.0)]
        busy.join()
        assert results == ["slept"], results
    finally:
        workers.close()


def test_a_closed_streams_jobs_waiting_for_a_process_run_nothing(tmp_path: Path) -> None:
    """A search's budget ends its race while the batch's jobs wait in line for a process:
    closing the batch's stream starts none of them (they would compile for no one, beside
    the next tuning), as it starts none still queued."""
    log = tmp_path / "ran.txt"
    workers = ForkedWorkers(1)
    try:
        busy = threading.Thread(target=workers.run, args=(process_jobs.sleep, 1.5, 30.0))
        busy.start()
        time.sleep(0.3)  # the only process is busy: the stream's jobs wait in line
        jobs = [compile_pool.CompileJob("cached", lambda: "loaded")] + [
            compile_pool.CompileJob(
                tag, lambda tag=tag: workers.run(process_jobs.note_order, (str(log), tag), 30.0)
            )
            for tag in ("a", "b", "c")
        ]
        stream = compile_pool.compile_stream(jobs, workers=4)
        assert next(stream)[1] == "loaded"
        time.sleep(0.2)  # the other three are in line for the process
        stream.close()  # the race ends with what it has
        busy.join()
        time.sleep(1.0)  # a waiting job would have been handed the process by now
        assert not log.exists(), log.read_text()
    finally:
        workers.close()


def test_a_cancelled_caller_runs_nothing_even_with_a_process_idle_or_the_pool_gone(
    tmp_path: Path,
) -> None:
    """A caller whose batch was cancelled gets ``Cancelled``: when it comes to the line
    (an idle process would otherwise run its job: compiles started beside the final race
    after the host stage closed) and when the pool is closed as it waits (``NoWorkerLeft``
    would have it compiled in this process instead)."""
    log = tmp_path / "ran.txt"
    cancel = threading.Event()
    cancel.set()
    workers = ForkedWorkers(1)
    try:
        with pytest.raises(compile_processes.Cancelled):
            workers.run(process_jobs.note_order, (str(log), "late"), 30.0, cancelled=cancel)
        assert not log.exists()
        busy = threading.Thread(target=workers.run, args=(process_jobs.sleep, 1.0, 30.0))
        busy.start()
        time.sleep(0.3)  # the only process is busy: the caller below waits
        waiting = threading.Event()
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                workers.run(process_jobs.note_order, (str(log), "waited"), 30.0, cancelled=waiting)
            except Exception as err:
                outcome.append(err)

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(0.2)
        waiting.set()
        workers.close()  # wakes the caller: cancelled, and no process left
        caller.join(10)
        busy.join()
        assert len(outcome) == 1 and isinstance(outcome[0], compile_processes.Cancelled), outcome
        assert not log.exists()
    finally:
        workers.close()


def test_a_raising_job_is_reported_and_the_worker_serves_on(pool: ForkedWorkers) -> None:
    with pytest.raises(WorkerFailed, match="ValueError: bad configuration"):
        pool.run(process_jobs.fail, "bad configuration", 30.0)
    assert pool.run(process_jobs.sleep, 0.0, 30.0) == "slept"
    assert pool.alive()


def test_a_result_that_cannot_be_loaded_is_a_failure_and_the_worker_serves_on() -> None:
    """The worker answered, but its result does not unpickle here: ``WorkerFailed`` (the
    caller compiles in-process), and the worker goes back to the pool (it was kept by
    nobody: the next caller of a one-process pool waited forever)."""
    workers = ForkedWorkers(1)
    try:
        with pytest.raises(WorkerFailed, match="cannot be loaded here"):
            workers.run(process_jobs.unloadable, None, 30.0)
        after: list[object] = []
        nxt = threading.Thread(
            target=lambda: after.append(workers.run(process_jobs.sleep, 0.0, 30.0)), daemon=True
        )
        nxt.start()
        nxt.join(10)
        assert after == ["slept"], "the worker was never handed back"
    finally:
        workers.close()


def test_a_worker_that_dies_is_a_crash_and_the_pool_keeps_the_other(pool: ForkedWorkers) -> None:
    with pytest.raises(WorkerCrashed, match="died"):
        pool.run(process_jobs.die, 3, 30.0)
    assert pool.alive()
    assert pool.run(process_jobs.sleep, 0.0, 30.0) == "slept"
    with pytest.raises(WorkerCrashed):
        pool.run(process_jobs.die, 3, 30.0)
    assert not pool.alive()
    with pytest.raises(compile_processes.NoWorkerLeft, match="no compile process is left"):
        pool.run(process_jobs.sleep, 0.0, 30.0)


def test_a_job_past_its_timeout_is_killed(pool: ForkedWorkers) -> None:
    pid = pool.run(process_jobs.whoami, None, 30.0)[0]
    pids = {pid}
    while len(pids) < 2:  # learn both workers' pids
        pids.add(pool.run(process_jobs.whoami, None, 30.0)[0])
    with pytest.raises(CompileTimeout):
        pool.run(process_jobs.sleep, 60.0, 0.5)
    assert sum(_gone(p, within_s=5.0) for p in pids) == 1  # the sleeping one, killed
    assert pool.run(process_jobs.sleep, 0.0, 30.0) == "slept"


def test_workers_keep_no_copy_of_a_pipe_open_at_the_fork() -> None:
    # A thread starting a subprocess at the fork has a pipe open whose reader waits for
    # every copy of the write end to close (subprocess's exec-error pipe, a stdout pipe).
    read_end, write_end = os.pipe()
    pool = ForkedWorkers(2)
    try:
        pool.run(process_jobs.whoami, 0, 30.0)  # the workers are up
        os.close(write_end)
        readable, _, _ = select.select([read_end], [], [], 10.0)
        assert readable and os.read(read_end, 1) == b""  # EOF: no worker holds a copy
    finally:
        pool.close()
        os.close(read_end)


def test_closing_the_pool_ends_its_workers() -> None:
    pool = ForkedWorkers(2)
    pids = {pool.run(process_jobs.whoami, i, 30.0)[0] for i in range(8)}
    pool.close()
    assert all(_gone(p) for p in pids)


def test_pool_for_forks_once_refuses_while_another_thread_compiles_and_renews_when_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUNEDSL_COMPILE_PROCESSES", "on")
    compile_processes.shutdown()
    first = object()
    pool = compile_processes.pool_for([first], 2)
    assert pool is not None
    assert compile_processes.pool_for([first], 2) is pool  # reused
    entered, release = threading.Event(), threading.Event()

    def compiling() -> object:
        entered.set()
        release.wait()
        return None

    job = compile_pool.CompileJob("held", compiling)
    stream = compile_pool.compile_stream([job], workers=1)
    busy = threading.Thread(target=lambda: list(stream))
    busy.start()
    try:
        assert entered.wait(30)
        later = object()  # unknown to the pool, and a job is compiling: no fork now
        assert compile_processes.pool_for([later], 2) is None
        assert compile_processes.pool_for([first], 2) is pool  # still fine for the known
    finally:
        release.set()
        busy.join()
    assert not compile_pool.compiling_elsewhere()
    renewed = compile_processes.pool_for([later], 2)
    assert renewed is not None and renewed is not pool and not pool.alive()
    key = compile_processes.register(later)
    assert renewed.run(process_jobs.registered, key, 30.0).startswith("<object object")
    compile_processes.shutdown()


@pytest.mark.parametrize(
    ("setting", "workers", "expected"),
    [("off", 16, False), ("on", 1, True), ("auto", 2, False), ("auto", 4, True)],
)
def test_the_setting_and_the_worker_count_choose(
    monkeypatch: pytest.MonkeyPatch, setting: str, workers: int, expected: bool
) -> None:
    monkeypatch.setenv("TUNEDSL_COMPILE_PROCESSES", setting)
    assert compile_processes.enabled(workers) is expected


def test_a_bad_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedsl.errors import UsageError

    monkeypatch.setenv("TUNEDSL_COMPILE_PROCESSES", "sometimes")
    with pytest.raises(UsageError, match="TUNEDSL_COMPILE_PROCESSES"):
        compile_processes.enabled(4)


ORPHAN = r"""
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import process_jobs
from tunedsl.backends.compile_processes import ForkedWorkers

pool = ForkedWorkers(1)
print(pool.run(process_jobs.whoami, None, 30.0)[0], flush=True)
threading.Thread(target=pool.run, args=(process_jobs.sleep, 120.0, 300.0), daemon=True).start()
time.sleep(0.5)  # the worker is inside its job now
os._exit(0)  # the tuning process dies (a kill -9 looks the same to the worker)
"""


def test_a_worker_busy_with_a_job_ends_when_its_parent_dies() -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", ORPHAN, str(Path(__file__).resolve().parent)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[0])
    assert _gone(pid, within_s=10.0)  # not after its 120 s job


_EXIT_IN_LINE = """
import sys, time
sys.path.insert(0, sys.argv[1])
import process_jobs
from tunedsl.backends import compile_pool
from tunedsl.backends.compile_processes import ForkedWorkers

workers = ForkedWorkers(1)
ran = []

def job():
    ran.append(workers.run(process_jobs.sleep, 1.0, 60.0, priority=1.0))

def drive():  # a compile-ahead: six jobs, five of them in line for the one process
    for _ in compile_pool.compile_stream([compile_pool.CompileJob(i, job) for i in range(6)], workers=6):
        pass

import atexit  # before tunedsl's exit drain: runs after it
atexit.register(lambda: print("jobs run:", len(ran), flush=True))
compile_pool.start_drained_thread(drive, name="drives-a-stream")
time.sleep(0.3)
"""


def test_at_exit_jobs_waiting_for_a_compile_process_start_none(tmp_path: Path) -> None:
    """The program ends while a stream's jobs wait in line for a compile process: like a
    stream's jobs not yet started, they start nothing, so the exit waits only for the one
    running and ends normally (each took the process in turn until the exit drain gave up
    after 10 s and left with status 1, "a compile was still running at exit")."""
    import subprocess

    script = tmp_path / "exits_in_line.py"
    script.write_text(_EXIT_IN_LINE)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(script), str(Path(process_jobs.__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "jobs run: 1" in proc.stdout.splitlines(), proc.stdout
    assert took < 8, took
