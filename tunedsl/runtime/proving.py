"""A new key's first launch, which other threads' calls of the key wait on.

A record's choice or a rule's pick is proved by its first launch in a process: where it
fails to build there, the key is decided again (``rule_plans.first_launch``). The thread that
decided the key holds its in-flight lock until that first launch stands or is redone, so the
calls that waited for the decision launch what stands. A call that found the key's entry in
the table meanwhile and failed on it waits for that first launch too, and is made again
where the entry was refused: no thread gets the error of a choice the process redid. A
process forked while a parent's thread launched it decides the key anew.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Flight:
    """A site's keys in flight: the in-flight locks of the keys being decided (shared with
    the site, under its lock) and the entries in their first launch."""

    __slots__ = ("_inflight", "_launching", "_lock", "_table")

    def __init__(self, lock: Any, inflight: dict[Any, Any], table: dict[Any, Any]) -> None:
        self._lock, self._inflight, self._table = lock, inflight, table
        self._launching: dict[Any, tuple[threading.Lock, int, int]] = {}

    def __bool__(self) -> bool:
        return bool(self._launching)

    @contextlib.contextmanager
    def first_launch(self, entry: Any, resolving: Any, busy: threading.Lock) -> Iterator[None]:
        """Around the first launch of ``entry`` by the thread holding ``busy``, the key's
        in-flight lock: its waiters stay blocked until the first launch ends. The key no
        longer counts as in flight (a redo decides it anew, under a lock of its own)."""
        with self._lock:
            self._inflight.pop(resolving, None)
            self._launching[entry] = (busy, os.getpid(), threading.get_ident())
        try:
            yield
        finally:
            with self._lock:
                self._launching.pop(entry, None)
            busy.release()

    def release(self, resolving: Any, busy: threading.Lock) -> None:
        """The key is no longer in flight: its waiters look again (nothing was kept)."""
        with self._lock:
            self._inflight.pop(resolving, None)
        busy.release()

    def refused_meanwhile(self, entry: Any, forget: Callable[[str], None]) -> bool:
        """For a call whose launch of ``entry`` failed: wait for another thread's first
        launch of it, if one is under way, and say whether the entry was refused there (the
        call is then made again, on what the key was decided to). ``forget``: the site's
        ``forget_decision``."""
        held = self._launching.get(entry) if entry is not None else None
        if held is None:
            return False
        busy, pid, thread = held
        if pid != os.getpid():  # forked while the parent's thread launched it: decide anew
            with self._lock:
                self._launching.pop(entry, None)
            forget(entry.result.digest)
            return True
        if thread == threading.get_ident():  # this thread's own first launch (re-entered)
            return False
        with busy:
            pass
        with self._lock:
            return all(e is not entry for e in self._table.values())
