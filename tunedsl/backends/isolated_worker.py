"""The measurement worker process (backends layer), started by ``isolated.py``.

Started as ``python -c`` with the parent's import path (``isolated._BOOTSTRAP``); it leaves
when the parent dies (``_leave_with_parent``). The protocol is length-prefixed frames:
requests are cloudpickles on stdin (a pipe only the parent holds: the kernel must come by
value), replies are JSON on the process's original stdout (so the parent never unpickles
anything); fd 1 is then pointed at stderr, so a kernel's or a hook's ``print`` cannot
corrupt a reply, and fd 0 at ``/dev/null``, so code reading stdin cannot take a request. One request at a time:

- ``("setup", payload)``: the kernel, every variant (tensors as ``TensorRef`` into copied
  storages), the tuning options; replaces any earlier state. Reply ``("ok",)``.
- ``("prepare", [index, ...])``: compile (through the compile pool) and verify each; one reply
  per variant, in completion order: ``("prepared", index, status, reason)``, then ``("done",)``.
- ``("open", [index, ...], reps)``: ``prepare``, then each one that is ok timed ``reps`` times,
  one reply per variant: ``("opened", index, status, reason, [ms, ...], load_s, time_s)``
  (``load_s``: this worker's seconds loading and verifying it, ``time_s``: timing it), then
  ``("done",)``. One request per part, not two round trips per configuration
  (``multi_device.py``). After a launch failed on a GPU the rest are answered with status
  ``"retry"`` (the context may be poisoned): the parent sends them again.
- ``("sample", index, reps)``: ``("ok", [ms, ...])``.
- ``("settle", {index: median_ms})``: the auto timer picks its mode for the leaders.
- ``("reset",)``: drop the state (tensors, kernels) and free cached device memory; answered
  ``("ok", [name, ...])``, the arguments the tuning found changed in place (the parent warns).

A configuration failing with an exception is answered ``("failed", reason)``; a
``UsageError`` (a mistake in the call or a hook, such as a ``pre_hook`` that raised) is
answered ``("error", message)`` and stops the tuning; a configuration that crashes or hangs
the process is the parent's business (it kills and restarts this worker).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import struct
import sys
import threading
import time
import warnings
from typing import Any, BinaryIO

from tunedsl.errors import UsageError

_HEADER = struct.Struct("<Q")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_in_worker = False


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    # The parent reads an unbuffered pipe (so select() sees every byte): reads may be short.
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO) -> bytes | None:
    header = _read_exactly(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    return _read_exactly(stream, size)


def write_frame(stream: BinaryIO, data: bytes) -> None:
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _reason(err: BaseException) -> str:
    from tunedsl.backends.inprocess import reason

    return reason(err)


class _State:
    """One tuning's worker-side state: the rebuilt inputs, guard, verifier and timer."""

    def __init__(self, payload: dict[str, Any]) -> None:
        from tunedsl.backends import graph_timing
        from tunedsl.backends import isolated_transfer as isolated
        from tunedsl.backends import triton as bt
        from tunedsl.backends.guard import Guard, Verifier
        from tunedsl.backends.inprocess import per_launch_setup, per_launch_timing
        from tunedsl.engine.request import TuneRequest

        device = payload["device"]
        self.gpu = device is not None
        self.run_failed = False  # a launch raised (on a GPU: restart before the next request)
        if device is not None:
            import torch

            torch.cuda.set_device(device)
        storages = isolated.rebuild_storages(payload["storages"], device)
        self.kernel = payload["kernel"]
        self.variants = [isolated.rebuild_variant(v, storages) for v in payload["variants"]]
        req = TuneRequest(
            kernel=self.kernel,
            variants=self.variants,
            settings=payload["settings"],
        )
        self.req = req
        self.compile_s = payload.get("compile_s")  # the tuning's compile limit
        first = self.variants[0]
        self.bound = bt.bind_arguments(bt.kernel_info(self.kernel), first.args, first.kwargs)
        # The worker's copies are launched many times, as the caller's tensors are in
        # process: an argument the kernel changes in place is found and restored before
        # each launch (each launch started from the one before: an index advanced in place
        # ran past its bounds). The worker gives no notice (it would name no caller's line):
        # the arguments it found are sent with its answer to "reset", and the parent warns.
        name = bt.kernel_info(self.kernel).qualname
        self.guard = Guard(self.bound, req, watch=True, kernel=name, around_views=False)
        warnings.filterwarnings("ignore", message=r"tunedsl: \S+ changes .* in place")
        self.verifier = (
            Verifier(req, self.guard) if req.settings.verify not in (None, False) else None
        )
        self.timer = graph_timing.make_timer(payload["timing"], per_launch_setup(req))
        self.timer_chosen = False
        self.warmed: set[int] = set()  # configurations given their warm-up launch
        # Arguments found in place are restored before every launch: timing="auto" keeps
        # per-launch timing then (a graph's launches run back to back, unrestored).
        self.guard.on_found = functools.partial(per_launch_timing, self.timer)

    def run(self, index: int) -> Any:
        from tunedsl.backends.triton_launch import launch_jit

        v = self.variants[index]
        options = {**v.kwargs, **v.options}
        return lambda: launch_jit(self.kernel, v.grid, v.args, options)

    def prepare(self, indices: list[int], reply: Any) -> None:
        from tunedsl.backends.compile_ahead import compile_jobs

        by_config = {self.variants[i].config: i for i in indices}
        todo = [self.variants[i] for i in indices]
        for v, handle in compile_jobs(self.req.kernel, todo, timeout_s=self.compile_s):
            index = by_config[v.config]
            if isinstance(handle, BaseException):
                self.post_hook(index, handle)  # as in process (inprocess.py)
                reply(("prepared", index, "failed", "compile: " + _reason(handle)))
                continue
            if self.verifier is None:
                self.post_hook(index, None)  # prepared: as in process, after its check
                reply(("prepared", index, "ok", None))
                continue
            error: BaseException | None = None
            try:
                problem = self.verifier.check(self.run(index), self.hook_args(index))
            except UsageError:  # a mistake in the call or a hook, not in the configuration
                raise
            except Exception as err:
                error = err
                self.run_failed = True
                self.launch_failed()
                reply(("prepared", index, "failed", "run: " + _reason(err)))
                continue
            finally:
                self.post_hook(index, error)
            if problem is not None:
                reply(("prepared", index, "rejected", problem))
            else:
                reply(("prepared", index, "ok", None))
        reply(("done",))

    def open(self, indices: list[int], reps: int, reply: Any) -> None:
        mark = time.perf_counter()
        poisoned = False  # a launch of an earlier one failed on the GPU

        def opened(message: tuple[Any, ...]) -> None:
            nonlocal mark, poisoned
            if message[0] != "prepared":
                return  # prepare's ("done",): sent below
            _, index, status, reason = message
            if poisoned:
                reply(("opened", index, "retry", None, [], 0.0, 0.0))
                return
            loaded = time.perf_counter() - mark
            samples: list[float] = []
            start = time.perf_counter()
            if status == "ok":
                try:
                    samples = self.sample(index, reps)
                except UsageError:
                    raise
                except Exception as err:
                    self.run_failed = True
                    status, reason = "failed", "run: " + _reason(err)
            took = time.perf_counter() - start
            reply(("opened", index, status, reason, samples, loaded, took))
            poisoned = self.gpu and self.run_failed  # (prepare flags its own culprit first)
            mark = time.perf_counter()

        self.prepare(indices, opened)
        reply(("done",))

    def post_hook(self, index: int, error: BaseException | None) -> None:
        if self.req.settings.post_hook is not None:  # Triton's hook signature
            self.req.settings.post_hook(self.hook_args(index), exception=error)

    def hook_args(self, index: int) -> dict[str, Any]:
        from tunedsl.backends import triton as bt
        from tunedsl.backends.hooks import hook_args

        return hook_args(bt.kernel_info(self.kernel), self.variants[index], self.req.settings.hints)

    def sample(self, index: int, reps: int) -> list[float]:
        run = self.run(index)
        args = self.hook_args(index)

        def setup() -> None:
            self.guard.before_rep(args)

        try:
            if index not in self.warmed:  # one launch, discarded, as in process (inprocess.py):
                self.warmed.add(index)  # the in-place watch counts it as a tuning there does
                self.timer.sample(run, setup, 1)
            settle = getattr(self.timer, "settle", None)
            if settle is not None and not self.timer_chosen:
                # timing="auto": one probe decides events or graphs for every sample of this
                # tuning, as in the parent (backends/inprocess.py): samples never mix timers.
                self.timer_chosen = True
                probe = self.timer.sample(run, setup, 5)
                settle([min(probe)])
            return list(self.timer.sample(run, setup, reps))
        except UsageError:
            raise
        except Exception as err:  # a later launch failed: the hook hears it, as in process
            self.launch_failed()
            self.post_hook(index, err)
            raise

    def found_in_place(self) -> list[str]:
        """The arguments the watch found changed in place (not those restored only because
        there was no room to compare), for the parent's warning."""
        watch = self.guard.watch
        if watch is None:
            return []
        # The tuning's end, as the guard's close is in process: a tuning of two launches (a
        # space of launch hints only, one program under the interpreter, timed once) makes
        # its last comparison now, so it finds what a tuning in process finds.
        try:
            self.guard.close()
        except Exception:  # a device the tuning left unusable: nothing more to tell
            pass
        return [] if watch.unsure else list(watch.found)

    def launch_failed(self) -> None:
        if self.guard.watch is not None:  # not a launch the watch compares
            self.guard.watch.failed()


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    import cloudpickle

    state: _State | None = None

    def reply(message: tuple[Any, ...]) -> None:
        write_frame(replies, json.dumps(message).encode("utf-8"))

    while True:
        frame = read_frame(requests)
        if frame is None:
            return  # the parent closed the pipe: leave quietly
        try:
            request = cloudpickle.loads(frame)
        except Exception as err:
            reply(("error", "cannot unpickle the request: " + _reason(err)))
            continue
        op = request[0]
        try:
            if op == "setup":
                state = None
                payload = request[1]
                # (Absolute entries only: "" would be the working directory, maybe shared.)
                sys.path[:] = [p for p in payload["sys_path"] if os.path.isabs(p)]
                if payload.get("scripts"):  # imported by name here (the kernel's module)
                    from tunedsl.activate import read_scripts

                    read_scripts(payload["scripts"])
                state = _State(cloudpickle.loads(payload["body"]))
                reply(("ok",))
            elif op == "reset":  # the tuning's end: the arguments it found in place
                found = [] if state is None else state.found_in_place()
                state = None
                _free_memory()
                reply(("ok", found))
            elif state is None:
                reply(("error", f"{op}: no setup"))
            elif op == "prepare":
                state.prepare(request[1], reply)
            elif op == "open":
                state.open(request[1], request[2], reply)
            elif op == "sample":
                reply(("ok", state.sample(request[1], request[2])))
            elif op == "settle":  # the timer was chosen before the first sample (sample())
                reply(("ok", state.timer.kind))
            else:
                reply(("error", f"unknown request {op!r}"))
        except UsageError as err:  # the parent raises it: no configuration's failure
            reply(("error", str(err)))
        except Exception as err:
            reply(("failed", _reason(err)))
            if state is not None and state.gpu:
                _exit_after_gpu_error()
        if state is not None and state.gpu and state.run_failed:
            _exit_after_gpu_error()


def _exit_after_gpu_error() -> None:
    # A failed launch may leave a sticky CUDA error (an illegal address poisons the
    # context): leave, and the parent starts a clean worker for the next request.
    sys.stderr.flush()
    os._exit(0)


def _free_memory() -> None:
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _leave_with_parent(parent: int, from_main_thread: bool, requests_fd: int) -> None:
    """Never outlive the tuning process, even in the middle of a configuration that spins:
    SIGKILL when it dies (Linux; armed only when its main thread started this worker, as
    the signal comes when the starting *thread* ends), and a thread that leaves when the
    request pipe's last writer is gone (whichever thread started it)."""
    if from_main_thread and sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)
    threading.Thread(
        target=_exit_when_orphaned, args=(requests_fd,), name="tunedsl-orphan-watch", daemon=True
    ).start()


def _exit_when_orphaned(fd: int) -> None:
    # A poll for no event reports only the hang-up: requests stay for the main loop to read.
    watch = select.poll()
    watch.register(fd, 0)
    while True:
        for _, event in watch.poll():
            if event & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                os._exit(0)


def in_worker() -> bool:
    """Whether this process is a measurement worker (where nothing may tune: see main)."""
    return _in_worker


def main(parent: int | None = None, from_main_thread: bool = False, scratch: str = "") -> None:
    """Serve the parent ``parent`` (its pid) until it closes the pipe or dies. ``scratch``:
    ``FD:PATH``, the directory the parent made for this worker's compile temporaries
    (``compile_temporaries.worker_temporaries``), or empty.

    The worker imports the kernel's module when the kernel was sent by reference, which runs
    that module's top-level code again here: a tune in it would wait for the key lock the
    parent holds (or tune the key a second time, starting workers of its own), so in this
    process a tune fails at once (``runtime/decide.py``) and the parent reports why."""
    global _in_worker
    _in_worker = True
    # Requests come on the original stdin; the kernel's module or a hook that reads stdin
    # reads nothing (it read the request pipe, waiting there until the configuration timed out).
    requests_fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)  # the process's stdin for its whole life
    if parent is not None:
        _leave_with_parent(parent, from_main_thread, requests_fd)
    if scratch:  # the parent removes it once this worker is gone, killed or not
        from tunedsl.store.scratch import adopt_scratch_dir

        fd, _, path = scratch.partition(":")
        adopt_scratch_dir(path, dir_fd=int(fd))
    # Replies go to the original stdout; anything the kernel or a hook prints goes to stderr.
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    requests = os.fdopen(requests_fd, "rb")
    try:
        import tunedsl.activate as activate

        activate.install()  # kernels of DSL modules are sent by reference: import them here
    except Exception:  # pragma: no cover - the hook is optional for plain-Python kernels
        pass
    serve(requests, replies)  # type: ignore[arg-type]
