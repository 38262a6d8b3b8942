"""Triton's temporary files of a compile, kept in a private directory.

Triton's NVIDIA backend writes a kernel's PTX to a temporary file and has ``ptxas`` write
the cubin beside it, under the PTX file's name with ``.o`` added, which nothing creates
first (``make_cubin``; 3.6.0 to 3.9.0). In a temporary directory other users can write, as
``/tmp``, one of them can watch for the PTX file and make that name first (a file of
theirs, or a link to one): Triton reads back, stores and loads their cubin as this user.

So Triton's backend compilers get a ``tempfile`` of their own (``compat``'s
``route_compile_temporaries``): the same module, but for the directory its files go to
when none is named, which is a private scratch directory of the process
(``scratch.process_scratch_dir``, looked up by its inode at each use) wherever the
process's temporary directory is open to other users. Nothing else in the process sees a
change: Python's ``tempfile.tempdir`` stays as the program set it.

A measurement worker (``isolated.py``) gets a directory inside its parent's private one,
made before it starts (``worker_temporaries``) and removed by the parent once the worker is
gone: a worker killed by SIGKILL (a hung or crashed configuration) runs no clean-up, and
one of its own would be left in ``/tmp`` until the user's next tunedsl process.
"""

from __future__ import annotations

import tempfile
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunedsl.backends import compat
from tunedsl.backends.compat import interpreting

if TYPE_CHECKING:
    from tunedsl.store.scratch import ChildScratch

__all__ = [
    "keep_temporaries_private",
    "make_private_temporaries",
    "private_dir",
    "worker_temporaries",
]

_shared: dict[str, bool] = {}  # per temporary directory: whether another user could write it


def private_dir() -> str:
    """Where a compile's temporary files go: the process's temporary directory, or where
    another user could write there, the private directory in it. ``UsageError`` naming
    ``TMPDIR`` where no private directory can be kept in it (open to writes by others, and
    not sticky)."""
    base = tempfile.gettempdir()
    shared = _shared.get(base)
    if shared is None:
        from tunedsl.store.paths import untrusted_place

        shared = _shared[base] = untrusted_place(Path(base)) is not None
    if not shared:
        return base
    from tunedsl.store.scratch import process_scratch_dir

    # Made again where it was removed, never taking another directory made under its name
    # since (another user's, once a sweeper removed this one) for it.
    return str(process_scratch_dir(base=base))


def _in_private(make: Any, dir_at: int) -> Any:
    """``make`` (a maker of temporary files of ``tempfile``, whose ``dir`` parameter is
    positional number ``dir_at``) with ``dir`` the private directory when none is given."""

    def made(*args: Any, **kwargs: Any) -> Any:
        if len(args) <= dir_at and kwargs.get("dir") is None:
            kwargs["dir"] = private_dir()
        return make(*args, **kwargs)

    return made


class _TempfileOfCompiles(types.ModuleType):
    """Python's ``tempfile`` as Triton's backend compilers see it."""

    NamedTemporaryFile = staticmethod(_in_private(tempfile.NamedTemporaryFile, 6))
    TemporaryFile = staticmethod(_in_private(tempfile.TemporaryFile, 6))
    TemporaryDirectory = staticmethod(_in_private(tempfile.TemporaryDirectory, 2))
    mkstemp = staticmethod(_in_private(tempfile.mkstemp, 2))
    mkdtemp = staticmethod(_in_private(tempfile.mkdtemp, 2))

    def __getattr__(self, name: str) -> Any:
        return getattr(tempfile, name)


_routed = False
_checked: str | None = None  # the temporary directory private_dir last answered for


def keep_temporaries_private() -> None:
    """Called before each compile tunedsl drives: from the first call on, Triton's backend
    compilers keep their temporary files in a private directory where the process's
    temporary directory is open to other users (see the module docstring). A
    ``UsageError`` naming ``TMPDIR`` where no private directory can be kept in it. A launch
    through Triton's JIT calls it too, as it may compile: a warm call compares two strings."""
    global _routed, _checked
    if _routed and tempfile.tempdir == _checked:  # (never None once checked)
        return
    if interpreting():  # Triton's interpreter compiles nothing
        return
    if not _routed:
        compat.route_compile_temporaries(_TempfileOfCompiles("tempfile"))
        _routed = True
    private_dir()  # first, or the program set another: its UsageError here, not in Triton
    _checked = tempfile.gettempdir()


def make_private_temporaries() -> None:
    """Make the private directory now, in a process about to fork compile workers: they
    use it, where each would make its own and, leaving by ``os._exit``, leave it behind.
    A ``TMPDIR`` that cannot hold one is reported by the first compile instead."""
    if interpreting():
        return
    from tunedsl.errors import UsageError

    try:
        private_dir()
    except (UsageError, OSError):
        pass


def worker_temporaries() -> ChildScratch | None:
    """A private directory for the compile temporaries of a measurement worker about to
    start, inside this process's private one; the caller hands it to the worker and removes
    it once the worker is gone. None where the worker needs none: the interpreter compiles
    nothing, and a temporary directory closed to other users keeps them itself; or where
    none can be made here (the worker's first compile reports why)."""
    if interpreting():
        return None
    from tunedsl.errors import UsageError
    from tunedsl.store.scratch import child_scratch_dir

    try:
        where = private_dir()
        if where == tempfile.gettempdir():
            return None
        return child_scratch_dir(where, "worker-")
    except (UsageError, OSError):
        return None
