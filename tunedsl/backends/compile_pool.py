"""Compile every candidate configuration in parallel and hand results back as they finish.

``compile_stream(jobs)`` runs each job's ``compile()`` on a pool of worker **threads** and
yields ``(job, result_or_exception)`` in completion order, so the tuner can benchmark the
first finished variant while the others still compile (a producer-consumer pipeline, as
in cuTile.jl's autotuner).

The jobs run on threads; where many compile at once, each job hands its compile to a
forked worker process and loads the result here (``compile_processes.py``,
``backends/process_compile.py``; ``TUNEDSL_COMPILE_PROCESSES``):

* A GPU compile must end in this process's JIT table (``JITFunction.device_caches``), where
  the launch looks; a worker process fills Triton's on-disk cache, and the job then loads
  the entry here.
* Triton runs the heavy stages in C++ (MLIR/LLVM passes) and ``ptxas`` as a subprocess,
  without the GIL (``benchmarks/bench_compile_pool.py --gil-probe``), but the Python around
  them queues on one GIL with 16 threads: 48 anchor configurations took 4.55 s on 16
  threads and 3.16 s on 16 forked workers on the H100 machine (20.4 s serially).

The price of threads is that a thread cannot be killed: a configuration that runs past
its timeout (``TUNEDSL_CONFIG_TIMEOUT``) is reported as failed and its thread is
abandoned (a daemon thread, replaced by a fresh one so the pool keeps its size). On
Ctrl-C or when the consumer stops early, no further job starts and the stream returns at
once; compiles already running finish in the background. A thread still alive when the
interpreter finalizes can abort the process (``terminate called without an active
exception``: seen on the H100 with a compile-ahead thread alive at exit, 3 runs of 4), so
an ``atexit`` hook starts no further job in any stream, waits up to ``EXIT_DRAIN_S`` for
the compile threads and for the threads that drive streams (:func:`join_at_exit`), and
otherwise leaves with ``os._exit`` (under plain ``python``, whose status it cannot read,
at the C library's ``exit``, before its C++ teardown); when the program died of an uncaught Ctrl-C it leaves
at once (``os._exit(130)``).
``tunedsl`` commands leave at once on Ctrl-C (:func:`exit_now_if_compiling`: kill the
compiler subprocesses and wait until they are gone, flush, ``os._exit(130)``).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tunedsl import knobs
from tunedsl.backends.compile_limit import compile_limit_s
from tunedsl.model.config import Config

__all__ = [
    "CompileCancelled",
    "CompileJob",
    "CompileTimeout",
    "compile_stream",
    "compiling_elsewhere",
    "default_workers",
    "exit_now_if_compiling",
    "job_running",
    "job_timeout_s",
    "job_waiting",
    "join_at_exit",
    "note_exit_status",
    "start_drained_thread",
    "workers_busy",
]

# Worker threads still running, process-wide. A daemon thread inside Triton's C++ code when
# the interpreter finalizes aborts the process ("terminate called ... exception not
# rethrown"), so at exit they are joined first (see _drain_at_exit).
_live: set[threading.Thread] = set()
_live_lock = threading.Lock()
_interrupted = False  # a stream was closed by an exception (Ctrl-C): exit status 130
_compiling = 0  # jobs inside compile() now, every stream (abandoned ones until they end)
_exiting = threading.Event()  # the interpreter is exiting: no stream starts another job
EXIT_DRAIN_S = 10.0  # at interpreter exit, wait this long for running compiles to finish
_atexit_registered = False
_exit_status: int | None = None  # the status the program exits with, where it is known


def note_exit_status(status: int) -> None:
    """The status the process is about to exit with (the ``tunedsl`` command's, which is a
    ``tunedsl run`` script's own): the exit drain leaves with it where a compile it cannot
    stop is still running, and at once for 130 (Ctrl-C, which the command reported). Under
    plain ``python`` it is not known there (``sys.exit(n)`` keeps ``n`` in the interpreter's
    C code), so the process leaves at the C library's ``exit`` (:func:`_leave_at_c_exit`)."""
    global _exit_status
    _exit_status = int(status)


def join_at_exit(thread: threading.Thread) -> None:
    """Have the exit drain wait for ``thread`` too (a thread that drives a compile stream or
    otherwise calls into compiled extensions), as for the pool's own workers."""
    _register_atexit()
    with _live_lock:
        _live.difference_update([t for t in _live if not t.is_alive() and t.ident is not None])
        _live.add(thread)


def start_drained_thread(
    target: Callable[..., object], *args: object, name: str
) -> threading.Thread:
    """Start a daemon thread that the exit drain waits for (:func:`join_at_exit`)."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    join_at_exit(thread)
    thread.start()
    return thread


def workers_busy() -> bool:
    """True while a compile thread of any stream is still running (possibly abandoned)."""
    with _live_lock:
        return any(t.is_alive() for t in _live)


def compiling_elsewhere() -> bool:
    """True while a job of any stream is compiling, or a compile thread that timed out and
    was abandoned may still be: forking now could copy a compiler lock that thread holds.
    (Threads that only drive a stream, and pool threads between jobs, do not count.)"""
    with _live_lock:
        return _compiling > 0


def exit_now_if_compiling(status: int) -> None:
    """Leave the process at once (``os._exit``) if compile threads are still running.

    For a command-line tool interrupted by Ctrl-C: the compiles cannot be stopped, and
    letting the interpreter finalize under them would abort the process.
    """
    if workers_busy():
        _kill_compiler_children()  # a ptxas left running would outlive us
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)


def _drain_at_exit() -> None:
    if _exit_status == 130 or isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        # The program died of Ctrl-C (a `tunedsl` command reports it itself and notes 130):
        # leave now rather than wait for running compiles.
        exit_now_if_compiling(130)
    _exiting.set()  # running compiles finish; no stream starts another
    deadline = time.monotonic() + EXIT_DRAIN_S
    while time.monotonic() < deadline:  # a joined thread may have started others: look again
        with _live_lock:
            threads = [t for t in _live if t.is_alive()]
        if not threads:
            break
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
    if workers_busy():
        status = 130 if _interrupted else _exit_status
        if status is None and getattr(sys, "last_value", None) is not None:
            status = 1  # an uncaught exception, which the interpreter reported
        # Under plain ``python`` a normal end (0) and ``sys.exit(n)`` look alike here: the
        # status is the interpreter's until it calls ``exit(status)``. Then the process
        # leaves with it at once, before any C++ teardown that the compile still uses.
        later = status is None and _leave_at_c_exit()
        with contextlib.suppress(Exception):
            sys.stderr.write(
                "tunedsl: a compile was still running at exit (past its limit, or started ahead): "
                "abandoned it, leaving without cleanup"
                + ("" if status is not None or later else " with status 1")
                + "\n"
            )
        if later:
            _kill_compiler_children()
            return
        exit_now_if_compiling(1 if status is None else status)


def _leave_at_c_exit() -> bool:
    """Have the C library's ``exit(status)`` call ``_exit(status)`` first (glibc's
    ``on_exit``, whose handler is given the status), so the process ends with its own status
    and runs no C or C++ teardown under a compile thread. False where there is no
    ``on_exit`` (not glibc): the caller leaves now, with status 1."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        on_exit, leave = libc.on_exit, libc._exit
    except (OSError, AttributeError):
        return False
    on_exit.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    on_exit.restype = ctypes.c_int
    return bool(on_exit(ctypes.cast(leave, ctypes.c_void_p), None) == 0)


def _register_atexit() -> None:
    global _atexit_registered
    with _live_lock:
        if _atexit_registered:
            return
        _atexit_registered = True
    atexit.register(_drain_at_exit)


@dataclass
class CompileJob:
    """One configuration to compile: ``compile()`` returns a handle or raises."""

    config: Config
    compile: Callable[[], object]
    # Filled by the pool: seconds the compile took (None until it finished).
    seconds: float | None = field(default=None, compare=False)


class CompileCancelled(RuntimeError):
    """The compile was not run: what asked for it (a search's batch announced ahead) ended."""


class CompileTimeout(TimeoutError):
    """A configuration compiled for longer than the timeout and was dropped."""

    def __init__(self, seconds: float) -> None:
        # A record's reason says a compile timed out in these words (``runtime/timeouts.py``).
        super().__init__(
            f"compile timed out after {seconds:g} s (TUNEDSL_CONFIG_TIMEOUT; precompile --timeout)"
        )
        self.seconds = seconds

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.seconds,))


def default_workers() -> int:
    """``TUNEDSL_COMPILE_WORKERS``, else the CPUs this process may use (at least 1)."""
    configured = knobs.compile_workers()
    if configured is not None:
        return configured
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus)


# Compiler tools a compile may spawn; a command leaving at once on Ctrl-C kills them.
_COMPILER_TOOLS = ("ptxas", "nvlink", "fatbinary", "nvdisasm", "cuobjdump", "ld.lld")


def _child_pids() -> set[int]:
    """Direct children of this process (Linux /proc; empty elsewhere)."""
    pids: set[int] = set()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as fh:
                pids.update(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            continue
    return pids


def _is_compiler_tool(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    return os.path.basename(argv0).startswith(_COMPILER_TOOLS)


#: How long the exit waits for the compilers it killed to be gone (a killed process frees its
#: memory before it is; seconds on a loaded machine for a large kernel's ptxas).
KILLED_GONE_S = 10.0


def _kill_compiler_children() -> None:
    """Kill this process's compiler subprocesses and return once they are gone (each a
    zombie, for whoever reaps it), so none runs after this process's exit; then look again
    for one a compile thread started meanwhile."""
    import select
    import signal

    deadline = time.monotonic() + KILLED_GONE_S
    for _ in range(3):
        killed = []
        for pid in _child_pids():
            if not _is_compiler_tool(pid):
                continue
            try:
                fd = os.pidfd_open(pid)  # the process itself, whatever its pid becomes
            except (AttributeError, OSError):  # no pidfd (old kernel), or already gone
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                continue
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            killed.append(fd)
        if not killed:
            return
        for fd in killed:  # readable once the process has exited
            with contextlib.suppress(OSError):
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
            os.close(fd)


class _Slot:
    """What one worker thread is doing: the job and when it started (for timeouts)."""

    __slots__ = ("abandoned", "job", "started", "stopping")

    def __init__(self, stopping: Callable[[], bool] | None = None) -> None:
        self.job: CompileJob | None = None
        self.started = 0.0
        self.abandoned = False
        self.stopping = stopping  # whether the stream starts no further job


def compile_stream(
    jobs: Iterable[CompileJob],
    *,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> Iterator[tuple[CompileJob, object | BaseException]]:
    """Compile ``jobs`` on ``workers`` threads; yield ``(job, result or exception)`` as each ends.

    ``workers`` defaults to :func:`default_workers`; ``timeout_s`` (default
    ``compile_limit.compile_limit_s()``: ``TUNEDSL_CONFIG_TIMEOUT``) bounds each job: a job past it is yielded with a
    :class:`CompileTimeout`. A job's exception is yielded, never raised. Closing the
    generator (``break``, an exception in the consumer, Ctrl-C) starts no further job.
    """
    job_list = list(jobs)
    if not job_list:
        return
    n_workers = default_workers() if workers is None else max(1, int(workers))
    timeout = compile_limit_s() if timeout_s is None else float(timeout_s)
    yield from _threaded(job_list, min(n_workers, len(job_list)), timeout)


def job_timeout_s() -> float:
    """The timeout of the job this thread compiles (``compile_stream``'s ``timeout_s``, as
    ``tunedsl precompile --timeout`` sets it), else ``TUNEDSL_CONFIG_TIMEOUT``'s: what a wait
    inside a compile (for another process compiling the same kernel) is bounded by."""
    return getattr(_job, "timeout_s", None) or compile_limit_s()


_job = threading.local()  # timeout_s, slot: the stream's, while this thread runs one of its jobs


def job_waiting(cancelled: threading.Event | None = None) -> Callable[[], bool]:
    """The job this thread runs waits for a compile process from now on (behind the
    batches served first): it compiles nothing meanwhile, so its timeout does not run.
    Returns whether it should start none after all: ``cancelled`` is set, or its stream
    stopped (closed by its consumer, or the interpreter exits: like a job not yet started)."""
    slot = getattr(_job, "slot", None)
    if slot is not None:
        slot.started = math.inf
    stopping = getattr(slot, "stopping", None) or (lambda: False)
    return lambda: (cancelled is not None and cancelled.is_set()) or stopping()


def job_running() -> None:
    """The job this thread runs starts now: it waited for a compile process until here
    (behind the batches served first), and its timeout counts from now."""
    slot = getattr(_job, "slot", None)
    if slot is not None:
        slot.started = time.monotonic()


def _run_one(
    job: CompileJob, timeout: float | None = None, slot: _Slot | None = None
) -> object | BaseException:
    global _compiling
    start = time.perf_counter()
    with _live_lock:
        _compiling += 1
    _job.timeout_s, _job.slot = timeout, slot
    try:
        return job.compile()
    except BaseException as err:  # reported to the consumer, never raised in the worker
        return err
    finally:
        _job.timeout_s = _job.slot = None
        with _live_lock:
            _compiling -= 1
        job.seconds = time.perf_counter() - start


def _threaded(
    job_list: list[CompileJob], n_workers: int, timeout: float
) -> Iterator[tuple[CompileJob, object | BaseException]]:
    todo: queue.SimpleQueue[CompileJob] = queue.SimpleQueue()
    for job in job_list:
        todo.put(job)
    done: queue.SimpleQueue[tuple[CompileJob, object | BaseException]] = queue.SimpleQueue()
    stop = threading.Event()
    state = threading.Lock()  # guards the slots' job/abandoned fields
    slots: list[_Slot] = []

    def work(slot: _Slot) -> None:
        try:
            work_on(slot)
        finally:
            with _live_lock:
                _live.discard(threading.current_thread())

    # At exit, a stream that was running stops starting jobs; one started by an exit
    # handler (a tuning in an atexit function) has a caller waiting for it, and runs on
    # (Python 3.10-3.11: 3.12+ refuses to start threads at interpreter shutdown).
    born_exiting = _exiting.is_set()

    def stopping() -> bool:
        return _exiting.is_set() and not born_exiting

    def work_on(slot: _Slot) -> None:
        while not stop.is_set() and not slot.abandoned and not stopping():
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            with state:
                slot.job, slot.started = job, time.monotonic()
            result = _run_one(job, timeout, slot)
            with state:  # a job either times out or reports, never both
                slot.job = None
                if not slot.abandoned:
                    done.put((job, result))

    threads: list[threading.Thread] = []

    def start_worker() -> None:
        # A job waiting in line for a compile process starts none once the stream is
        # closed (the race ended), as a job still queued does.
        slot = _Slot(lambda: stop.is_set() or stopping())
        slots.append(slot)
        thread = threading.Thread(
            target=work, args=(slot,), name=f"tunedsl-compile-{len(slots)}", daemon=True
        )
        threads.append(thread)
        with _live_lock:
            _live.add(thread)
        thread.start()

    _register_atexit()
    for _ in range(n_workers):
        start_worker()
    pending = len(job_list)
    finished_normally = False
    try:
        while pending:
            # Short waits keep Ctrl-C and timeouts responsive.
            try:
                job, result = done.get(timeout=0.05)
            except queue.Empty:
                if stopping() and not any(t.is_alive() for t in threads):
                    break  # at exit: every worker has stopped, the rest will never start
            else:
                pending -= 1
                yield job, result
            pending -= yield from _expire(slots, state, timeout, start_worker)
        finished_normally = True
    finally:
        # Running compiles finish on their own (a killed ptxas would make Triton print a
        # reproducer); the exit paths wait for them or end them (see the module docstring).
        stop.set()
        if not finished_normally:
            global _interrupted
            _interrupted = True


def _expire(
    slots: list[_Slot],
    state: threading.Lock,
    timeout: float,
    start_worker: Callable[[], None],
) -> Generator[tuple[CompileJob, object | BaseException], None, int]:
    """Yield jobs that ran past ``timeout``; abandon their threads and start replacements."""
    now = time.monotonic()
    expired = 0
    for slot in list(slots):
        with state:
            job = slot.job
            if job is None or slot.abandoned or now - slot.started <= timeout:
                continue
            slot.abandoned = True
        slots.remove(slot)
        start_worker()
        expired += 1
        yield job, CompileTimeout(timeout)
    return expired
