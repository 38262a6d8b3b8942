"""Crash-isolated measurement (backends layer): compile and time configurations in a worker.

``IsolatedMeasurer`` implements the engine's ``Measurer`` seam (``engine/seams.py``) with a
worker process (``isolated_worker.py``), so a configuration that aborts, segfaults, makes an
illegal memory access or hangs kills the worker, never the user's process. Used when a site
has ``isolate=True`` or ``TUNEDSL_ISOLATE=1`` (and by ``tunedsl precompile --tune``).

- **Process**: ``python -c`` with this process's import path handed over (``_BOOTSTRAP``;
  a plain subprocess, not ``multiprocessing``: spawn would re-import the user's
  ``__main__``, re-running a script; not ``-m``, which puts the working directory first).
  One worker per GPU (the device current when tuning starts), kept warm between tunings of
  the process (importing torch and Triton costs seconds), killed at exit. A worker leaves
  when this process dies, even while a configuration spins (``isolated_worker.py``), and
  SIGTERM during a tuning kills the workers before the process ends.
- **Kernel**: sent by value with cloudpickle, so kernels defined in ``__main__``, in a
  ``tunedsl run`` script or in a notebook work. A ``@triton.jit`` function is reduced to its
  Python function plus its ``jit`` options and re-jitted in the worker; one that lives in an
  importable module is sent by reference (module and qualified name) and imported there,
  which runs the module's top-level code in the worker: a tune there fails at once (it
  would wait for this process's lock) and the tuning raises ``TuningError`` saying so.
- **Inputs are copied, not rebuilt**: every tensor argument's storage is copied once per
  tuning (to the CPU, pickled, back to the device in the worker), with its dtype, shape,
  strides and storage offset; arguments sharing a storage share it in the worker too. Data
  is kept (index tensors and data-dependent kernels stay in bounds) and the user's tensors
  are never touched by a measurement. ``restore_value``/``reset_to_zero``/``pre_hook`` run in
  the worker on its copies, before every repetition, exactly as in-process tuning does.
  ``benchmarks/bench_isolate.py`` measures the cost (worker start, copy, per-request IPC).
- **Failure**: a worker that dies (signal, exit) while a configuration runs, or does not
  answer within ``TUNEDSL_CONFIG_TIMEOUT`` seconds (default 60; a request that compiles
  may take the compile timeout more), is killed and restarted; that configuration is reported
  failed with the reason (``"crashed: worker killed by SIGSEGV"``, ``"timeout: ..."``); a
  timeout stands only under its limit (``runtime/timeouts.py``).
  A worker that cannot start or set up raises ``TuningError`` with the reason.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.backends.compile_limit import compile_limit_s
from tunedsl.backends.isolated_transfer import (
    TensorRef,
    dumps,
    pack_inputs,
    rebuild_storages,
    rebuild_variant,
)
from tunedsl.backends.python_child import child_import_path, path_left_out
from tunedsl.engine.bench import Timing
from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config

if TYPE_CHECKING:
    from tunedsl.store.scratch import ChildScratch

__all__ = [
    "IsolatedMeasurer",
    "TensorRef",
    "dumps",
    "pack_inputs",
    "rebuild_storages",
    "rebuild_variant",
    "shutdown_workers",
]

# -- the worker process ----------------------------------------------------------------------


def _crash_reason(code: int | None) -> str:
    if code is None:
        return "crashed: worker did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"crashed: worker killed by {name}"
    return f"crashed: worker exited with status {code}"


class WorkerDied(Exception):
    """The worker died or hung; the message is the reason (never raised to user code)."""


# The worker's first statement: its import path is this process's (argv[4:]), so nothing on
# the way (the working directory that ``-c`` puts first) is imported before tunedsl. argv[3]:
# the directory made for its compile temporaries, "FD:PATH" (or empty).
_BOOTSTRAP = (
    "import sys; parent, main_thread = int(sys.argv[1]), sys.argv[2] == '1'; "
    "scratch = sys.argv[3]; sys.path[:] = sys.argv[4:]; del sys.argv[1:]; "
    "from tunedsl.backends.isolated_worker import main; main(parent, main_thread, scratch)"
)

#: Seconds a worker's setup may take beyond ``TUNEDSL_CONFIG_TIMEOUT``: it starts Python,
#: imports torch and Triton, copies the inputs and computes ``verify=fn``'s reference.
SETUP_ALLOWANCE_S = 60.0

_pids: set[int] = set()  # every live worker's pid (multi_device's too), for SIGTERM


def _on_sigterm(signum: int, frame: Any) -> None:
    # As at exit after Ctrl-C, the workers go first (a spinning configuration would hold the
    # GPU); then the process ends as SIGTERM ends it. No lock taken: this interrupts anything.
    for pid in list(_pids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


_tunings = 0  # tunings of the main thread with _on_sigterm installed


def _kill_workers_on_sigterm(on: bool) -> None:
    """While a tuning of the main thread runs (Python runs a handler on that thread only,
    and delays it while C code runs: so only then), SIGTERM runs ``_on_sigterm``; only
    where it was untouched (a program's own handler is kept; the workers still leave when
    this process ends: ``isolated_worker.py``)."""
    global _tunings
    if threading.current_thread() is not threading.main_thread():
        return
    _tunings = _tunings + 1 if on else max(0, _tunings - 1)
    current = signal.getsignal(signal.SIGTERM)
    if _tunings == 1 and on and current is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    elif _tunings == 0 and current is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Worker:
    """One worker process and its pipes. Not thread-safe (the tuner holds BENCH_LOCK)."""

    def __init__(self, device: int | None) -> None:
        self.device = device
        self.proc: subprocess.Popen[bytes] | None = None
        self.scratch: ChildScratch | None = None  # its compile temporaries' directory
        self.setup_frame: bytes | None = None  # re-sent after a restart
        self.exit_code: int | None = None  # of the last worker that died
        # A request was sent and its answer not read to the end (an exception, Ctrl-C, came
        # in between): the next answer on the pipe would be that one's, so the worker goes.
        self.busy = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        # ``-c`` and ``-m`` put the working directory first on the worker's path, where
        # another user may have planted a ``tunedsl`` (a shared /tmp directory): the first
        # statement replaces the path with this process's, before anything is imported
        # (child_import_path: the working directory never on it, "" nor relative).
        main_thread = threading.current_thread() is threading.main_thread()
        path = child_import_path()
        # Its compile temporaries' directory is made here and removed here (kill()): a worker
        # killed by SIGKILL leaves nothing in the temporary directory.
        from tunedsl.backends.compile_temporaries import worker_temporaries

        self.scratch = scratch = worker_temporaries()
        fds = () if scratch is None or scratch.fd is None else (scratch.fd,)
        where = f"{fds[0]}:{scratch.path}" if fds and scratch is not None else ""
        argv = [sys.executable, "-c", _BOOTSTRAP, str(os.getpid()), str(int(main_thread)), where]
        try:
            self.proc = subprocess.Popen(
                [*argv, *path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                bufsize=0,
                pass_fds=fds,
            )
        except OSError as err:
            self._remove_scratch()
            raise TuningError(f"cannot start the measurement worker: {err}") from err
        _pids.add(self.proc.pid)
        if self.setup_frame is not None:
            try:
                self._setup()
            except WorkerDied as died:
                raise TuningError(f"the measurement worker could not set up: {died}") from None

    def setup(self, frame: bytes) -> None:
        """A new tuning: sent now to a running worker, else when the worker starts."""
        self.setup_frame = frame
        if self.busy:
            self.kill()
        if self.alive():
            try:
                self._setup()
            except WorkerDied:
                self.kill()  # started afresh (with this setup) by the first request

    def _setup(self) -> None:
        assert self.setup_frame is not None
        self.busy = True
        self._send(self.setup_frame)
        limit = knobs.isolate_timeout_s()
        answer = self._receive(
            limit + SETUP_ALLOWANCE_S,
            f"setting up (TUNEDSL_CONFIG_TIMEOUT={limit:g} s, plus {SETUP_ALLOWANCE_S:g} s "
            "to start the worker and copy the inputs; a hang, in verify=fn's reference?)",
        )
        self.busy = False
        if answer[0] != "ok":
            left = path_left_out() if "ModuleNotFoundError" in str(answer[-1]) else ""
            raise TuningError(
                f"the measurement worker could not set up: {answer[-1]}" + (left and f"; {left}")
            )

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        self.busy = False
        if proc is None:
            return
        _pids.discard(proc.pid)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        self._remove_scratch()  # gone: what it left there goes too

    def _remove_scratch(self) -> None:
        scratch, self.scratch = self.scratch, None
        if scratch is not None:
            scratch.remove()

    def _send(self, frame: bytes) -> None:
        from tunedsl.backends.isolated_worker import write_frame

        assert self.proc is not None and self.proc.stdin is not None
        try:
            write_frame(self.proc.stdin, frame)  # type: ignore[arg-type]
        except (BrokenPipeError, OSError):
            raise WorkerDied(self._death()) from None

    def _death(self) -> str:
        proc = self.proc
        try:
            code = proc.wait(timeout=5) if proc is not None else None
        except subprocess.TimeoutExpired:  # its pipe closed, yet it lives on: killed below
            code = None
        self.exit_code = code
        self.kill()
        return _crash_reason(code)

    def _receive(self, timeout_s: float, during: str = "") -> tuple[Any, ...]:
        """The next reply; raises WorkerDied (worker killed) on death or after ``timeout_s``
        (``during``: what the worker was doing, for the message)."""
        from tunedsl.backends.isolated_worker import read_frame

        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.kill()
            self.exit_code = None
            why = during or "(TUNEDSL_CONFIG_TIMEOUT; a hang?)"
            # A record's reason says a worker timed out in these words (runtime/timeouts.py).
            raise WorkerDied(f"timeout: no answer after {timeout_s:g} s {why}; worker killed")
        frame = read_frame(self.proc.stdout)  # type: ignore[arg-type]
        if frame is None:
            raise WorkerDied(self._death())
        try:
            return tuple(json.loads(frame))  # replies are JSON: this process unpickles nothing
        except ValueError:
            self.kill()
            self.exit_code = None
            raise WorkerDied("crashed: the worker's answer was garbled; worker killed") from None

    def ensure_started(self) -> None:
        """Start the process unless it is alive (a dead one, or one whose answer was not read
        to the end, is killed and reaped first). Raises TuningError when it cannot start."""
        if self.busy or not self.alive():
            self.kill()
            self.start()

    # A GPU worker leaves with status 0 right after replying to a request whose launch
    # failed (the CUDA context may be poisoned): a request sent before its exit was seen
    # finds it gone without having run. Such a request is sent once more, to a new worker;
    # a crash (a signal, another status, a timeout) is the request's own failure.
    def request(self, message: tuple[Any, ...], timeout_s: float) -> tuple[Any, ...]:
        attempt = 1
        while True:
            self.ensure_started()
            try:
                self.busy = True
                self._send(dumps(message))
                answer = self._receive(timeout_s)
                self.busy = False
                return answer
            except WorkerDied:
                if attempt == 2 or self.exit_code != 0:
                    raise
                attempt = 2

    def stream(self, message: tuple[Any, ...], timeout_s: float) -> Iterator[tuple[Any, ...]]:
        """Replies until ``("done",)``; each reply has its own ``timeout_s``."""
        answered = False
        for attempt in (1, 2):
            self.ensure_started()
            try:
                self.busy = True
                self._send(dumps(message))
                while True:
                    answer = self._receive(timeout_s)
                    if answer[0] == "done":
                        self.busy = False
                        return
                    answered = True
                    yield answer
            except WorkerDied:
                if answered or attempt == 2 or self.exit_code != 0:
                    raise


_workers: dict[int | None, Worker] = {}
_workers_lock = threading.Lock()


def worker_for(device: int | None) -> Worker:
    with _workers_lock:
        worker = _workers.get(device)
        if worker is None:
            worker = _workers[device] = Worker(device)
        return worker


@atexit.register
def shutdown_workers() -> None:
    """Kill every worker (at exit; tests call it to start from nothing)."""
    with _workers_lock:
        for worker in _workers.values():
            worker.kill()
        _workers.clear()


# -- the measurer ----------------------------------------------------------------------------


class IsolatedMeasurer:
    """The ``Measurer`` seam over one worker process (see the module docstring).

    Besides ``prepare``/``sample``/``close`` it offers ``measure`` (the calibrated first
    pass, run in the worker so its wall-time budget excludes the pipe) and ``settle`` (the
    auto timer's switch to graph timing for the leaders).
    """

    def __init__(
        self,
        req: Any,
        timing: str = "auto",
        *,
        device: int | str | None = "current",
        worker: Worker | None = None,
    ) -> None:
        """``device``: the GPU the worker measures on ("current": the caller's; ignored off
        a GPU). ``worker``: a given process (``multi_device.py`` runs several per device)."""
        from tunedsl.backends import triton as bt

        facts = bt.device_facts()
        if facts["type"] not in ("cuda", "hip"):
            device = None
        elif device == "current":
            import torch

            device = torch.cuda.current_device()
        assert device is None or isinstance(device, int)
        self.variants = list(req.variants)
        self.index = {v.config: i for i, v in enumerate(self.variants)}
        storages, packed = pack_inputs(self.variants)
        body = {
            "device": device,
            "kernel": req.kernel,
            "storages": storages,
            "variants": packed,
            # The site's settings but what stays here: the worker gets its variants bound,
            # so neither the space nor prune= (which need not pickle) goes along.
            "settings": dataclasses.replace(req.settings, configs=(), prune=None, space=None),
            "timing": timing,
            "compile_s": compile_limit_s(),  # the limit in force here (precompile --timeout)
        }
        name = getattr(getattr(req.kernel, "fn", req.kernel), "__qualname__", "kernel")
        self.kernel_name = name
        try:
            body_bytes = dumps(body)
        except Exception as err:
            raise UsageError(
                f"isolate=True: cannot send kernel {name} and its arguments to the "
                f"measurement worker ({type(err).__name__}: {err}); make hooks and "
                "arguments picklable, or tune with isolate=False"
            ) from err
        self.run_timeout_s = knobs.isolate_timeout_s()
        self.compile_timeout_s = body["compile_s"] + self.run_timeout_s
        self.worker = worker if worker is not None else worker_for(device)
        activate = sys.modules.get("tunedsl.activate")  # scripts imported by path, if any
        scripts = dict(getattr(activate, "SCRIPTS", {}))
        # The worker's import path: this process's, never its working directory (which
        # the worker runs in too, and may be shared: another user's torch.py there).
        setup = {"sys_path": child_import_path(), "scripts": scripts, "body": body_bytes}
        self.worker.setup(dumps(("setup", setup)))
        _kill_workers_on_sigterm(True)  # until close()

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        pending = [self.index[c] for c in configs]
        batch = True
        while pending:
            self.worker.ensure_started()
            todo = pending if batch else pending[:1]
            done: dict[int, Prepared] = {}
            # The whole batch is read before anything is yielded: the caller's next request
            # must not interleave with this stream's replies on the one pipe.
            try:
                for answer in self.worker.stream(("prepare", todo), self.compile_timeout_s):
                    if answer[0] != "prepared":
                        raise TuningError(f"measurement worker: {answer[-1]}")
                    _, index, status, reason = answer
                    done[index] = Prepared(self.variants[index].config, status, reason)
            except WorkerDied as died:
                if batch and len(todo) - len(done) > 1:
                    batch = False  # retry the rest one at a time to find the culprit
                else:
                    culprit = next(i for i in todo if i not in done)
                    done[culprit] = Prepared(
                        self.variants[culprit].config, "failed", f"run: {died}"
                    )
            yield from done.values()
            pending = [i for i in pending if i not in done]

    def _ask(self, message: tuple[Any, ...]) -> Any:
        self.worker.ensure_started()
        try:
            answer = self.worker.request(message, self.run_timeout_s)
        except WorkerDied as died:
            raise MeasureFailure(str(died)) from None
        if answer[0] == "ok":
            return answer[1] if len(answer) > 1 else None
        if answer[0] == "failed":
            raise MeasureFailure("run: " + answer[1])
        raise TuningError(f"measurement worker: {answer[-1]}")

    def sample(self, config: Config, reps: int) -> list[float]:
        return list(self._ask(("sample", self.index[config], reps)))

    def settle(self, first: dict[Config, Timing]) -> str:
        """The auto timer's choice for the leaders; returns the worker timer's kind."""
        kind = self._ask(("settle", {self.index[c]: t.median_ms for c, t in first.items()}))
        return str(kind)

    def close(self) -> None:
        """Drop the worker's copies (the process stays warm for the next tuning)."""
        _kill_workers_on_sigterm(False)
        self.worker.setup_frame = None
        if self.worker.busy:  # interrupted in the middle of a request: it may still be running
            self.worker.kill()
        elif self.worker.alive():
            try:
                answer = self.worker.request(("reset",), self.run_timeout_s)
            except (WorkerDied, TuningError):  # it died, and could not start again: nothing to drop
                return
            found = answer[1] if answer[0] == "ok" and len(answer) > 1 else None
            if found and isinstance(found, list):  # restored there: said here, as in process
                from tunedsl.backends.inplace import warn_in_place
                from tunedsl.warn import warn_once

                warn_in_place(self.kernel_name, [str(n) for n in found], warn_once)
