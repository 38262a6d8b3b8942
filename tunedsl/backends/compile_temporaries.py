"""Triton's temporary files of a compile, kept in a private directory.

Triton's NVIDIA backend writes a kernel's PTX to a temporary file and has ``ptxas`` write
the cubin beside it, under the PTX file's name with ``.o`` added, which nothing creates
first (``make_cubin``; 3.6.0 to 3.9.0). In a temporary directory other users can write, as
``/tmp``, one of them can watch for the PTX file and make that name first (a file of
theirs, or a link to one): Triton reads back, stores and loads their cubin as this user.
So every compile tunedsl drives runs with Python's temporary directory pointed at a private
scratch directory of the process (``scratch.process_scratch_dir``), made inside it.
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tunedsl.backends.compat import interpreting

__all__ = ["make_private_temporaries", "private_temporaries"]

#: How long the private directory is taken to be there without a look (a sweeper of old
#: files in ``/tmp`` may remove it from an idle process).
_RECHECK_S = 60.0


class _PrivateTemporaries:
    """The context manager of :func:`private_temporaries`: one per process. A launch through
    Triton's JIT enters it too, as it may compile, so a warm entry costs a lock and a few
    attribute stores, with no system call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0  # blocks now inside, over every thread
        self.thread = threading.local()  # .depth: those of this thread
        self.saved = ""  # the program's temporary directory, to put back
        self.ours: str | None = None  # what the blocks set tempfile.tempdir to
        self.shared: dict[str, bool] = {}  # per temporary directory: open to other users?
        self.private: str | None = None
        self.seen = -math.inf  # time.monotonic() when self.private was last seen there

    def __enter__(self) -> None:
        with self.lock:
            if self.depth == 0 or tempfile.tempdir != self.ours:  # or the program set its own
                # Worked out once, as by any use of tempfile (it then keeps the answer): put
                # back after each block, it is not worked out again (a file made and removed).
                self.saved, self.ours = tempfile.gettempdir(), None
            if not interpreting():  # Triton's interpreter compiles nothing
                self.ours = tempfile.tempdir = self.private_for(self.saved)
            self.depth += 1
        self.thread.depth = getattr(self.thread, "depth", 0) + 1

    def __exit__(self, *exc: Any) -> None:
        self.thread.depth -= 1
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and tempfile.tempdir == self.ours:  # else the program's own
                tempfile.tempdir = self.saved

    def private_for(self, base: str) -> str:
        """``base``, or where another user could write there, the private directory."""
        shared = self.shared.get(base)
        if shared is None:
            from tunedsl.store.paths import untrusted_place

            shared = self.shared[base] = untrusted_place(Path(base)) is not None
        if not shared:
            return base
        now = time.monotonic()
        if self.private is None or now - self.seen > _RECHECK_S:
            from tunedsl.store.scratch import process_scratch_dir

            # Made again where it was removed, never taking another directory made under
            # its name since (another user's, once a sweeper removed this one) for it.
            self.private = str(process_scratch_dir(base=base))
            self.seen = now
        return self.private

    def after_fork_in_child(self) -> None:
        """A forked child (a compile worker, a program's own: a DataLoader's) has only the
        thread that forked: the others' blocks are not its own, and its temporary files go
        where the program said once none of its own runs (they went into the parent's
        private directory, which the parent removes when it exits)."""
        self.lock._at_fork_reinit()  # type: ignore[attr-defined]
        self.depth = getattr(self.thread, "depth", 0)
        if self.depth == 0 and self.ours is not None and tempfile.tempdir == self.ours:
            tempfile.tempdir = self.saved


_ONE = _PrivateTemporaries()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ONE.after_fork_in_child)


def private_temporaries() -> _PrivateTemporaries:
    """A context manager: within its block (on any thread, while any thread is inside one),
    Python's temporary directory is a private one where the process's is open to other
    users; restored when the last block ends, unless the program set its own meanwhile
    (which the next block looks at: a block started while another ran used it as it was).
    The private directory is looked at again at most every ``_RECHECK_S`` seconds, by its
    inode. A ``UsageError`` naming ``TMPDIR`` where no private directory can be kept in it
    (open to writes by others, and not sticky)."""
    return _ONE


def make_private_temporaries() -> None:
    """Make the private directory now, in a process about to fork compile workers: they
    use it, where each would make its own and, leaving by ``os._exit``, leave it behind.
    A ``TMPDIR`` that cannot hold one is reported by the first compile instead."""
    if interpreting():
        return
    from tunedsl.errors import UsageError

    with _ONE.lock:
        try:
            _ONE.private_for(tempfile.gettempdir())
        except (UsageError, OSError):
            pass
