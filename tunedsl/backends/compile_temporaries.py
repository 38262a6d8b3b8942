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

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from tunedsl.backends.compat import interpreting

__all__ = ["make_private_temporaries", "private_temporaries"]

_lock = threading.Lock()
if hasattr(os, "register_at_fork"):  # a compile worker forked while a thread held it
    os.register_at_fork(after_in_child=_lock._at_fork_reinit)  # type: ignore[attr-defined]
_depth = 0  # compiles now inside private_temporaries, over every thread
_saved: str | None = None  # tempfile.tempdir as it was before the first of them
_shared: dict[str, bool] = {}  # per temporary directory: whether another user could write it


@contextlib.contextmanager
def private_temporaries() -> Iterator[None]:
    """Within the block (on any thread, while any thread is inside it), Python's temporary
    directory is a private one where the process's is open to other users; restored when
    the last block ends. A ``UsageError`` naming ``TMPDIR`` where no private directory can
    be kept in it (open to writes by others, and not sticky)."""
    global _depth, _saved
    if interpreting():  # Triton's interpreter compiles nothing
        yield
        return
    with _lock:
        if _depth == 0:
            saved = tempfile.tempdir
            tempfile.tempdir = _private_for(tempfile.gettempdir())
            _saved = saved
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                tempfile.tempdir = _saved


def make_private_temporaries() -> None:
    """Make the private directory now, in a process about to fork compile workers: they
    use it, where each would make its own and, leaving by ``os._exit``, leave it behind.
    A ``TMPDIR`` that cannot hold one is reported by the first compile instead."""
    if interpreting():
        return
    from tunedsl.errors import UsageError

    with _lock, contextlib.suppress(UsageError, OSError):
        _private_for(tempfile.gettempdir())


def _private_for(base: str) -> str:
    from tunedsl.store.paths import untrusted_place
    from tunedsl.store.scratch import process_scratch_dir

    shared = _shared.get(base)
    if shared is None:
        shared = _shared[base] = untrusted_place(Path(base)) is not None
    return str(process_scratch_dir()) if shared else base
