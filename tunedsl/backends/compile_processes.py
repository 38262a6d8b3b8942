"""Compile in forked worker processes, each with its own GIL (``TUNEDSL_COMPILE_PROCESSES``).

Why: the compile pool's threads run Triton's C++ passes and ``ptxas`` without the GIL, but
every compile also spends tens of milliseconds in Python holding it (the AST code generator,
``triton.compile``'s own steps, cache writes). With 16 threads those parts queue on one
GIL: on the H100 machine 48 anchor configurations took 4.55 s on 16 threads and 3.16 s on
16 forked workers (``benchmarks/bench_compile_pool.py``), and the threads' waiting slowed
the measuring thread too.

How, and why fork: a worker must compile the user's kernel, which may live in ``__main__``
or in a closure that no fresh interpreter can import. A forked child has it already. The
pool forks one short-lived *zygote* (one fork on the caller's path), and the zygote, which
has a single thread, forks the workers and exits; the caller does not wait for it. Each
worker answers requests on its own pipe: ``fn(payload)`` where ``fn`` is a module-level
function (pickled by reference) and the payload names objects of the :func:`register`
table by number (the table as it was at the fork; an object registered later makes the
pool *stale*, and the next safe point forks a new one).

Safety: the fork happens only where no other thread of this process is compiling
(:func:`tunedsl.backends.compile_pool.compiling_elsewhere`), so no thread holds a compiler
lock that the child inherits. The threads that may run then (hashing Triton, waiting for
the host compiler to build Triton's C utilities: ``compat.start_warming``) hold no lock
that a worker takes (a worker gets the hash with each job and never starts a driver). A
thread that is only reading a kernel's Triton hash (``JITFunction.cache_key``, as jobs are
built) holds that kernel's lock, which every worker's compile takes: the zygote makes those
locks anew before it forks the workers. A worker closes the pipes it inherited, so a subprocess being started at the fork still
sees its pipes close. A child touches no GPU (it compiles for a named target) and leaves
with ``os._exit`` (no parent's exit handler runs twice). A pool serves only the process
that forked it: a child the user forks later inherits the pool but not its workers, whose
pipes it shares with its parent, so it forks workers of its own. Workers ignore Ctrl-C (the
parent stops them) and exit when their pipe closes, between jobs or in the middle of one (a
watchdog thread peeks at the pipe), so they never outlive the parent.

What a caller gets from :meth:`ForkedWorkers.run`: the function's result; a
:class:`WorkerFailed` when it raised (the caller compiles in-process instead, which raises
the real error); :class:`WorkerCrashed` when the worker died (a compiler crash stays out of
the tuning process); ``CompileTimeout`` after the timeout (the worker is killed);
:class:`NoWorkerLeft` when every worker is gone (the job did not run).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import pickle
import select
import signal
import socket
import stat
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from typing import Any

from tunedsl import knobs
from tunedsl.backends.compile_temporaries import make_private_temporaries

__all__ = [
    "Cancelled",
    "ForkedWorkers",
    "NoWorkerLeft",
    "WorkerCrashed",
    "WorkerFailed",
    "lookup",
    "pool_for",
    "register",
    "shutdown",
    "stats",
]

# Objects that jobs name by number (kernels); a forked worker holds the table as it was.
_registry: dict[int, Any] = {}
_lock = threading.Lock()
_pool: ForkedWorkers | None = None
_parent_ends: list[Connection] = []  # every pool's pipes: a new worker closes its copies
_in_worker = False
#: Counts for benchmarks and tests: forks of the pool, jobs run in a worker, fallbacks.
stats = {"pools": 0, "jobs": 0, "failed": 0, "crashed": 0, "timeouts": 0, "stale": 0}

_START_TIMEOUT_S = 30.0  # a worker that has not said hello by then is taken as dead


class WorkerFailed(Exception):
    """The function raised in the worker (its type and message are in the text)."""


class WorkerCrashed(Exception):
    """The worker process died while running the job (a crash of the compiler)."""


class Cancelled(Exception):
    """The caller's job was cancelled while it waited for a worker (it did not run)."""


class NoWorkerLeft(Exception):
    """Every worker of the pool has died or been killed: the job was not run."""


def _count(name: str) -> None:
    with _lock:
        stats[name] += 1


def register(obj: Any) -> int:
    """Number ``obj`` for jobs (its ``id``); kept alive while this process runs."""
    key = id(obj)
    with _lock:
        if _registry.get(key) is not obj:
            _registry[key] = obj
    return key


def lookup(key: int) -> Any:
    """In a worker: the object registered as ``key`` before the fork (KeyError if none)."""
    return _registry[key]


def enabled(workers: int) -> bool:
    """Whether a stream of ``workers`` compile workers should use processes."""
    setting = knobs.compile_processes()
    if setting == "off" or _in_worker or not hasattr(os, "fork"):
        return False
    return setting == "on" or workers >= knobs.COMPILE_PROCESSES_FROM


def pool_for(objects: list[Any], workers: int) -> ForkedWorkers | None:
    """The process-wide pool of ``workers`` processes that knows ``objects``, forked now if
    there is none or it predates one of them; None where processes are off or forking is
    not safe now (another thread is compiling): the caller compiles on threads."""
    global _pool
    if not enabled(workers):
        return None
    from tunedsl.backends.compile_pool import compiling_elsewhere

    keys = [register(obj) for obj in objects]
    with _lock:
        pool = _pool
        usable = pool if pool is not None and pool.alive() and pool.knows(keys) else None
        if usable is not None and usable.size >= workers:
            return usable
        if compiling_elsewhere():  # no fork now: a smaller pool that knows them still serves
            return usable
        if pool is not None:
            stats["stale"] += 1  # under _lock
            pool.close()
        try:
            _pool = ForkedWorkers(workers)
        except OSError:  # no processes left, say: threads still work
            _pool = None
        return _pool


def shutdown() -> None:
    """Stop the pool's workers (tests; at exit the closed pipes end them without this)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


class _Worker:
    __slots__ = ("conn", "pid")

    def __init__(self, conn: Connection) -> None:
        self.conn, self.pid = conn, 0


class _Waiter:
    """A caller waiting for a worker: served by (priority, arrival), lowest first."""

    __slots__ = ("arrival", "gone", "handed", "priority", "worker")

    def __init__(self, priority: float, arrival: int) -> None:
        self.priority, self.arrival = priority, arrival
        self.handed = threading.Event()
        self.worker: _Worker | None = None
        self.gone = False  # cancelled or given up: skipped when its turn comes

    def __lt__(self, other: _Waiter) -> bool:
        return (self.priority, self.arrival) < (other.priority, other.arrival)


class ForkedWorkers:
    """``size`` forked worker processes; :meth:`run` hands one a job and waits for it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.known = frozenset(_registry)
        # A child forked from this process inherits the pool but not its workers: their
        # pipes are the parent's, whose answers it could read (or the parent its answers).
        self._owner = os.getpid()
        self._idle: deque[_Worker] = deque()  # first in, first out: every worker serves
        self._waiting: list[_Waiter] = []  # a heap: the first in line is served first
        self._arrivals, self._alive = itertools.count(), size
        self._guard, self._closed = threading.Lock(), False
        pairs = [Pipe() for _ in range(size)]
        make_private_temporaries()  # the workers share it: none makes (and leaks) its own
        for stream in (sys.stdout, sys.stderr):  # else the child would print it again
            with contextlib.suppress(Exception):
                stream.flush()
        with warnings.catch_warnings():  # 3.12+: "multi-threaded, fork() may deadlock"
            warnings.simplefilter("ignore", DeprecationWarning)
            zygote = os.fork()
        if zygote == 0:  # pragma: no cover - runs in the child
            _zygote_main(pairs)
        for parent_end, child_end in pairs:
            child_end.close()
            _parent_ends.append(parent_end)
            self._idle.append(_Worker(parent_end))
        # It exits once the workers are forked (0.1-0.15 s for 16 from a process holding a
        # CUDA context): reaped aside, so the caller goes on while workers start.
        threading.Thread(target=_reap, args=(zygote,), name="tunedsl-zygote", daemon=True).start()
        stats["pools"] += 1  # under _lock

    def knows(self, keys: list[int]) -> bool:
        return all(k in self.known for k in keys)

    def alive(self) -> bool:
        return not self._closed and self._alive > 0 and os.getpid() == self._owner

    def run(
        self,
        fn: Callable[[Any], Any],
        payload: Any,
        timeout_s: float,
        *,
        priority: float = 0.0,
        cancelled: threading.Event | None = None,
    ) -> Any:
        """``fn(payload)`` in a free worker; see the module docstring. Callers waiting for a
        worker are served lowest ``priority`` first (a search's current batch before the
        batches it announced ahead); one whose ``cancelled`` is set (or stream stopped, at
        exit) before a process takes its job gets :class:`Cancelled`: the job did not run."""
        from tunedsl.backends.compile_pool import CompileTimeout, job_running, job_waiting

        ended = job_waiting(cancelled)  # in line for a process: no compile, no timeout
        try:
            worker = self._take(priority, ended)
        finally:  # the stream's timeout counts the compile (a fallback's too), not the wait
            job_running()
        try:
            message = pickle.dumps((fn, payload), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            self._release(worker)
            raise
        start = time.monotonic()
        try:
            worker.conn.send_bytes(message)
            answered = worker.conn.poll(timeout_s)
            if answered:
                data = worker.conn.recv_bytes()
        except (EOFError, OSError) as err:
            self._lose(worker, kill=True)
            _count("crashed")
            raise WorkerCrashed(
                f"the compile process died after {time.monotonic() - start:.1f} s"
            ) from err
        except BaseException:  # the answer may still come: the worker serves no one else
            self._lose(worker, kill=True)
            raise
        if not answered:
            self._lose(worker, kill=True)
            _count("timeouts")
            raise CompileTimeout(timeout_s)
        self._release(worker)  # it answered in full: it serves on
        _count("jobs")
        try:
            ok, value = pickle.loads(data)
        except Exception as err:
            ok, value = False, f"unreadable result: {type(err).__name__}: {err}"
        if not ok:
            _count("failed")
            raise WorkerFailed(value)
        return value

    def _take(self, priority: float, ended: Callable[[], bool]) -> _Worker:
        while True:
            worker = self._next_idle(priority, ended)
            if worker.pid == 0 and not self._hello(worker):
                continue
            return worker

    def _next_idle(self, priority: float, ended: Callable[[], bool]) -> _Worker:
        """A free worker: at once when one is idle, else handed over by ``_release`` to the
        waiter first in line (no thread wakes for a worker it is not given)."""
        with self._guard:
            if ended():  # its batch was cancelled (or its stream stopped): run nothing
                raise Cancelled("cancelled before a compile process took it")
            if not self.alive():
                raise NoWorkerLeft("no compile process is left")
            if self._idle:
                return self._idle.popleft()
            waiter = _Waiter(priority, next(self._arrivals))
            heapq.heappush(self._waiting, waiter)
        while True:
            # Timed: a cancel or the owner's exit is noticed without a handover.
            waiter.handed.wait(0.5)
            with self._guard:
                stop = ended()
                if waiter.worker is not None and not stop:
                    return waiter.worker
                if waiter.worker is None and self.alive() and not stop:
                    continue
                waiter.gone = True  # left in the heap: _release skips it
            if waiter.worker is not None:  # handed as its batch ended: to the next in line
                self._release(waiter.worker)
            # Cancelled first: NoWorkerLeft has the caller compile in-process.
            if stop:
                raise Cancelled("cancelled while waiting for a compile process")
            raise NoWorkerLeft("no compile process is left")

    def _hello(self, worker: _Worker) -> bool:
        """The worker's first message is its pid (it may still be starting)."""
        try:
            if worker.conn.poll(_START_TIMEOUT_S):
                worker.pid = int(worker.conn.recv())
                return True
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            pass
        self._lose(worker, kill=False)
        return False

    def _release(self, worker: _Worker) -> None:
        """Hand ``worker`` to the first in line, or keep it idle."""
        with self._guard:
            if not self._closed:
                self._hand(worker)
                return
        with contextlib.suppress(OSError):  # the pool was closed while this job ran
            worker.conn.close()

    def _hand(self, worker: _Worker) -> None:  # under _guard
        while self._waiting:
            waiter = heapq.heappop(self._waiting)
            if not waiter.gone:
                waiter.worker = worker
                waiter.handed.set()
                return
        self._idle.append(worker)

    def _lose(self, worker: _Worker, *, kill: bool) -> None:
        if kill and worker.pid:
            with contextlib.suppress(OSError):
                os.kill(worker.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            worker.conn.close()
        with self._guard:
            self._alive -= 1
            if self._alive <= 0:
                self._wake_all()

    def _wake_all(self) -> None:  # under _guard: every waiter looks again (none is served)
        for waiter in self._waiting:
            waiter.handed.set()

    def close(self) -> None:
        """Close every idle worker's pipe (it exits); busy ones exit when their job ends."""
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, deque()
            self._wake_all()
        for worker in idle:
            with contextlib.suppress(OSError):
                worker.conn.close()
        _parent_ends[:] = [end for end in _parent_ends if not end.closed]


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _zygote_main(pairs: list[tuple[Connection, Connection]]) -> None:  # pragma: no cover
    """In the zygote (one thread): fork each worker, then leave. First, the locks of the
    registered kernels that a parent thread may have held at the fork are made anew
    (``compat.free_jit_locks``), so the workers inherit them free."""
    status = 0
    with contextlib.suppress(Exception):  # (a kernel with no such lock: nothing to free)
        from tunedsl.backends import compat

        compat.free_jit_locks(list(_registry.values()))
    try:
        for index in range(len(pairs)):
            if os.fork() == 0:
                _worker_main(pairs, index)
    except BaseException:
        status = 1
    os._exit(status)


def _worker_main(
    pairs: list[tuple[Connection, Connection]], index: int
) -> None:  # pragma: no cover
    """Serve jobs on pair ``index`` until its pipe closes; never returns."""
    global _in_worker
    _in_worker = True
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us, not Ctrl-C
        conn = pairs[index][1]
        # EOF must reach each side: keep no copy of any other pipe's end, this pool's or
        # an older pool's.
        for end in _parent_ends:
            with contextlib.suppress(OSError):
                end.close()
        for i, (parent_end, child_end) in enumerate(pairs):
            parent_end.close()
            if i != index:
                child_end.close()
        _close_inherited_pipes(keep=conn.fileno())
        conn.send(os.getpid())
        threading.Thread(target=_exit_when_orphaned, args=(conn.fileno(),), daemon=True).start()
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break
            try:
                fn, payload = pickle.loads(message)
                reply = (True, fn(payload))
            except BaseException as err:  # reported to the parent, which compiles itself
                reply = (False, f"{type(err).__name__}: {err}")
            try:
                data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as err:
                data = pickle.dumps((False, f"unpicklable result: {err}"))
            conn.send_bytes(data)
    except BaseException:
        status = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _close_inherited_pipes(keep: int) -> None:  # pragma: no cover - runs in a worker
    """Close every pipe this worker inherited except ``keep`` and the standard streams.
    Another thread of the tuning process may have been starting a subprocess at the fork
    (Triton's C utilities are built beside the tune): its reader waits for every copy of a
    pipe's write end to close, and a worker's copy would keep it waiting for good."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):  # no /proc: nothing to look through
        return
    for fd in fds:
        if fd <= 2 or fd == keep:
            continue
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone already
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.close(fd)


def _exit_when_orphaned(fd: int) -> None:  # pragma: no cover - runs in a worker
    """Leave as soon as the parent's end of the pipe closes, even in the middle of a job (a
    compile that hangs must not outlive the tuning process): a peek that reads nothing from
    a readable pipe is its end. The parent never writes while a job runs, so data is only
    ever a next job, which the worker's loop reads."""
    sock = socket.socket(fileno=os.dup(fd))
    while True:
        select.select([sock], [], [])
        try:
            if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                os._exit(0)
        except BlockingIOError:
            pass
        except OSError:
            os._exit(0)
        time.sleep(0.05)  # a job waits for the loop to read it
