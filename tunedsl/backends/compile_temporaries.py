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
    """The context manager of :func:`private_temporaries`: one per process. A decision's
    first launch enters it too, where it may compile, so a warm entry costs a lock and a
    few attribute stores, with no system call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0  # blocks now inside, over every thread
        self.saved: str | None = None  # tempfile.tempdir as it was before the first of them
        self.shared: dict[str, bool] = {}  # per temporary directory: open to other users?
        self.private: str | None = None
        self.seen = -math.inf  # time.monotonic() when self.private was last seen there

    def __enter__(self) -> None:
        with self.lock:
            if self.depth == 0:
                # Worked out once, as by any use of tempfile (it then keeps the answer): put
                # back after each block, it is not worked out again (a file made and removed).
                base = self.saved = tempfile.gettempdir()
                if not interpreting():  # Triton's interpreter compiles nothing
                    tempfile.tempdir = self.private_for(base)
            self.depth += 1

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
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

            self.private = str(process_scratch_dir())  # made again where it was removed
            self.seen = now
        return self.private


_ONE = _PrivateTemporaries()
if hasattr(os, "register_at_fork"):  # a compile worker forked while a thread held it
    os.register_at_fork(after_in_child=_ONE.lock._at_fork_reinit)  # type: ignore[attr-defined]


def private_temporaries() -> _PrivateTemporaries:
    """A context manager: within its block (on any thread, while any thread is inside one),
    Python's temporary directory is a private one where the process's is open to other
    users; restored when the last block ends. A ``UsageError`` naming ``TMPDIR`` where no
    private directory can be kept in it (open to writes by others, and not sticky)."""
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
