"""Compile every candidate configuration in parallel and hand results back as they finish.

``compile_stream(jobs)`` runs each job's ``compile()`` on a pool of worker **threads** and
yields ``(job, result_or_exception)`` in completion order, so the tuner can benchmark the
first finished variant while the others still compile (a producer-consumer pipeline, as
in cuTile.jl's autotuner).

Why threads, not processes (measured; details in ``docs/precompile.md``):

* A GPU compile must end in this process's JIT table (``JITFunction.device_caches``), where
  the launch looks; a process worker could only fill the on-disk cache.
* Triton runs the heavy stages in C++ (MLIR/LLVM passes) and ``ptxas`` as a subprocess,
  without the GIL: ``benchmarks/bench_compile_pool.py --gil-probe`` shows a spinning
  Python thread progressing as much during ``make_llir`` as during ``ptxas``. On the
  anchor's H100, 48 matmul configurations compiled in 22.6 s on 1 thread, 4.7 s on 16.
* Process workers each import torch and Triton and get the kernel by pickle: on the
  2-core development machine they spent 15-55% more CPU time than a serial compile for
  the same 48 cubins, threads 4-7% more.

The price of threads is that a thread cannot be killed: a configuration that runs past
its timeout (``TUNEDSL_COMPILE_TIMEOUT``) is reported as failed and its thread is
abandoned (a daemon thread, replaced by a fresh one so the pool keeps its size). On
Ctrl-C or when the consumer stops early, no further job starts, the stream returns at
once, and compiler subprocesses (``ptxas``) started by the pool are terminated.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tunedsl import knobs

__all__ = ["CompileJob", "CompileTimeout", "compile_stream", "default_workers"]


@dataclass
class CompileJob:
    """One configuration to compile: ``compile()`` returns a handle or raises."""

    config: Any
    compile: Callable[[], object]
    # Filled by the pool: seconds the compile took (None until it finished).
    seconds: float | None = field(default=None, compare=False)


class CompileTimeout(TimeoutError):
    """A configuration compiled for longer than the timeout and was dropped."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"compile timed out after {seconds:g} s (TUNEDSL_COMPILE_TIMEOUT)")
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


# Compiler tools a compile may spawn; on interrupt, new children with these names die too.
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


def _kill_new_compiler_children(before: set[int]) -> None:
    import signal

    for pid in _child_pids() - before:
        if _is_compiler_tool(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


class _Slot:
    """What one worker thread is doing: the job and when it started (for timeouts)."""

    __slots__ = ("abandoned", "job", "started")

    def __init__(self) -> None:
        self.job: CompileJob | None = None
        self.started = 0.0
        self.abandoned = False


def compile_stream(
    jobs: Iterable[CompileJob],
    *,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> Iterator[tuple[CompileJob, object | BaseException]]:
    """Compile ``jobs`` on ``workers`` threads; yield ``(job, result or exception)`` as each ends.

    ``workers`` defaults to :func:`default_workers`; ``timeout_s`` (default
    ``TUNEDSL_COMPILE_TIMEOUT``) bounds each job: a job past it is yielded with a
    :class:`CompileTimeout`. A job's exception is yielded, never raised. Closing the
    generator (``break``, an exception in the consumer, Ctrl-C) starts no further job.
    """
    job_list = list(jobs)
    if not job_list:
        return
    n_workers = default_workers() if workers is None else max(1, int(workers))
    timeout = knobs.compile_timeout_s() if timeout_s is None else float(timeout_s)
    yield from _threaded(job_list, min(n_workers, len(job_list)), timeout)


def _run_one(job: CompileJob) -> object | BaseException:
    start = time.perf_counter()
    try:
        return job.compile()
    except BaseException as err:  # reported to the consumer, never raised in the worker
        return err
    finally:
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
    children_before = _child_pids()

    def work(slot: _Slot) -> None:
        while not stop.is_set() and not slot.abandoned:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            with state:
                slot.job, slot.started = job, time.monotonic()
            result = _run_one(job)
            with state:  # a job either times out or reports, never both
                slot.job = None
                if not slot.abandoned:
                    done.put((job, result))

    def start_worker() -> None:
        slot = _Slot()
        slots.append(slot)
        thread = threading.Thread(
            target=work, args=(slot,), name=f"tunedsl-compile-{len(slots)}", daemon=True
        )
        thread.start()

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
                pass
            else:
                pending -= 1
                yield job, result
            pending -= yield from _expire(slots, state, timeout, start_worker)
        finished_normally = True
    finally:
        stop.set()
        if not finished_normally:
            _kill_new_compiler_children(children_before)


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
