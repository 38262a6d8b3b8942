"""SIGTERM as Ctrl-C for what runs long: ``tunedsl sweep``, ``tunedsl precompile`` (with
``--tune`` or not) and the library's ``sweep()``.

SIGTERM (a job scheduler's time limit, ``kill``, ``docker stop``) ends a Python process at
once: a sweep's finished tasks' records were never written, and the processes it started
(GPU processes, compile workers, a Ray instance) were left to notice by themselves. While one
of these runs, SIGTERM raises ``Terminated`` (a ``KeyboardInterrupt``) in the main thread
instead: the Ctrl-C path runs (children ended, finished records written), and the command
exits with status 143 and the line ``tunedsl: terminated (SIGTERM)``; ``sweep()`` raises
``Terminated`` to its caller. A handler the program set for itself is kept, and the one
there before is put back after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tunedsl.errors import Terminated

__all__ = [
    "interrupt_as_terminated",
    "noting_sigterm",
    "sigterm_as_interrupt",
    "take_sigterm",
    "takes_as_interrupt",
]


class _AsInterrupt:
    """The handler: notes each SIGTERM in ``got`` and raises ``Terminated``.

    A SIGTERM while an interrupt is being handled (the command stopping its children and
    writing what finished) is noted only: not one more interrupt. One that comes after a
    workload caught the first interrupt and went on raises ``Terminated`` again, so the
    command still stops. The handler stays set throughout: SIGTERM is never ignored, so no
    process started meanwhile inherits an ignored SIGTERM. In a process forked from the one
    that set it, SIGTERM does what it does by default."""

    def __init__(self) -> None:
        self.got: list[int] = []
        self.pid = os.getpid()

    def __call__(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:  # a forked child: SIGTERM ends it, as by default
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.got.append(signum)
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # already stopping
            return
        raise Terminated("SIGTERM")


def takes_as_interrupt(before: Any) -> bool:
    """Whether ``take_sigterm`` makes SIGTERM an interrupt where ``before`` is the handler
    found (no handler of the program's own), in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return False
    return isinstance(before, _AsInterrupt) or not (callable(before) or before == signal.SIG_IGN)


def take_sigterm(stack: contextlib.ExitStack, before: Any) -> list[int]:
    """SIGTERM to an interrupt, or to the program's own handler where it had one
    (``before``: the handler found there; put back when ``stack`` closes). Only on the main
    thread: Python runs handlers there alone. Returns the list the interrupt's handler
    notes each SIGTERM in (an outer ``take_sigterm``'s, where that one's handler is
    ``before``; one that stays empty where the program's own handler is kept)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    if isinstance(before, _AsInterrupt):  # an outer command's: one handler, one list
        handler = before
    elif callable(before) or before == signal.SIG_IGN:  # the program's own: kept
        signal.signal(signal.SIGTERM, before)
        got: list[int] = []
        if before is not None:
            stack.callback(signal.signal, signal.SIGTERM, before)
        return got
    else:
        handler = _AsInterrupt()
    signal.signal(signal.SIGTERM, handler)
    if before is not None:  # None: a handler not set from Python, which cannot be put back
        stack.callback(signal.signal, signal.SIGTERM, before)
    return handler.got


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[list[int]]:
    """Within: SIGTERM raises ``Terminated`` in the main thread (``take_sigterm``, from the
    handler there now). A ``KeyboardInterrupt`` that replaced it on its way out (a library
    that catches the interrupt and raises its own) leaves as ``Terminated``."""
    with contextlib.ExitStack() as stack:
        got = take_sigterm(stack, signal.getsignal(signal.SIGTERM))
        with interrupt_as_terminated(got):
            yield got


@contextlib.contextmanager
def interrupt_as_terminated(got: list[int]) -> Iterator[None]:
    """Within: where ``got`` (``take_sigterm``'s list) noted a SIGTERM, a
    ``KeyboardInterrupt`` that replaced its ``Terminated`` on the way out (a library that
    catches the interrupt and raises its own) leaves as ``Terminated``."""
    try:
        yield
    except KeyboardInterrupt as err:
        if got and not isinstance(err, Terminated):
            raise Terminated("SIGTERM") from None
        raise


@contextlib.contextmanager
def noting_sigterm() -> Iterator[Callable[[], bool]]:
    """Within: yields a function that says whether SIGTERM has arrived since the start,
    whatever handler took it (the signal's wakeup descriptor notes each arrival): a library
    that sets a handler of its own for a while, one whose exception Python may drop (a
    handler run inside a fork's callbacks: "Exception ignored", here left unsaid). Only on
    the main thread; elsewhere the function says False."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    seen = bytearray()

    def arrived() -> bool:
        with contextlib.suppress(OSError):  # nothing more to read
            while chunk := os.read(r, 4096):
                seen.extend(chunk)
        return signal.SIGTERM in seen

    try:
        before = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        os.close(r)
        os.close(w)
        yield lambda: False
        return
    hook = sys.unraisablehook

    def unsaid(dropped: Any) -> None:  # a handler's exit that Python dropped: noted here
        exit_ = dropped.exc_value
        if not (isinstance(exit_, SystemExit) and exit_.code == signal.SIGTERM):
            hook(dropped)

    sys.unraisablehook = unsaid
    try:
        yield arrived
    finally:
        sys.unraisablehook = hook
        signal.set_wakeup_fd(before)
        os.close(r)
        os.close(w)
