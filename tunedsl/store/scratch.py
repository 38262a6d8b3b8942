"""Scratch directories: private directories in the temporary directory that a task keeps its
work in (a sweep task's records, the claims of a multi-GPU ``precompile --tune``), each
removed on leaving, and those that this user's killed processes left, removed by the next.
A child process this process starts (a measurement worker, a Ray actor) gets one made for
it inside this process's own (``child_scratch_dir``), which it takes as its process scratch
directory (``adopt_scratch_dir``), and which this process removes once the child is gone:
a child killed by SIGKILL leaves nothing behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tunedsl.store.paths import STALE_TEMP_AGE_S, untrusted_output_dir

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

#: The lock file of a scratch directory, locked for the directory's life: one that a killed
#: process left (SIGKILL runs no clean-up) has it unlocked, and is removed by the next.
SCRATCH_ALIVE = ".alive"


@contextlib.contextmanager
def scratch_dir(prefix: str, base: str | None = None) -> Iterator[Path]:
    """A new private directory ``<prefix>*`` in the temporary directory (or ``base``), removed
    on leaving (a sweep task's records, the claims of a multi-GPU ``precompile --tune``). A
    ``UsageError`` naming ``TMPDIR`` where another user could swap it (the chain rule of the
    cache), before anything there is removed: there they could rename any directory of this
    user's to a scratch name. Then removes the ones this user's killed processes left
    (``remove_abandoned_scratch``)."""
    with _held_scratch_dir(prefix, base) as (path, _):
        yield path


@contextlib.contextmanager
def _held_scratch_dir(prefix: str, base: str | None) -> Iterator[tuple[Path, os.stat_result]]:
    """``scratch_dir``, and the directory's ``fstat``, its descriptor held open while it
    lasts (so its inode is never another's): the directory is still this one only while its
    name leads to that inode (``_still_there``). Removed on leaving only then: something
    else under its name (another user's, made once a sweeper of old files removed this
    one) is left alone. In ``base`` (None: the temporary directory)."""
    import shutil
    import tempfile

    maker = os.getpid()
    tmp = tempfile.mkdtemp(prefix=prefix, dir=base)
    try:
        dir_fd = os.open(tmp, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fd = None
    try:
        held = os.fstat(dir_fd)
        _refuse_untrusted_scratch(tmp)  # first: there, another user names what is removed
        fd = _locked_alive(tmp)
        remove_abandoned_scratch(prefix, os.path.dirname(tmp))
        yield Path(tmp), held
    finally:
        # Removed while locked: never taken for a killed process's. Only by this process: a
        # forked child leaving normally (its exit, or its garbage collector, ends this
        # generator there too) leaves the directory its parent and siblings still use.
        if os.getpid() == maker and _still_there(tmp, os.fstat(dir_fd)):
            shutil.rmtree(tmp, ignore_errors=True)
        if fd is not None:
            os.close(fd)
        os.close(dir_fd)


def _still_there(path: str, held: os.stat_result) -> bool:
    """Whether the name ``path`` still leads to the directory ``held`` (its ``fstat``)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_ino == held.st_ino and st.st_dev == held.st_dev and stat.S_ISDIR(st.st_mode)


# The scratch directory this process keeps for its whole life: (maker's pid, path, the
# path as text, the directory's fstat, its exit).
_kept: tuple[int, Path, str, os.stat_result, contextlib.ExitStack] | None = None
_kept_lock = threading.Lock()
_exit_registered = False
if hasattr(os, "register_at_fork"):  # a child forked while another thread held it
    os.register_at_fork(after_in_child=_kept_lock._at_fork_reinit)  # type: ignore[attr-defined]


def process_scratch_dir(prefix: str = "tunedsl-process-", base: str | None = None) -> Path:
    """A private scratch directory (``scratch_dir``'s) for the rest of this process, made on
    first use, made again where something removed it (a sweeper of old files in ``/tmp``),
    never taking another directory made under its name since for it, and removed at exit; a
    forked child uses its parent's. Made in ``base`` (None: the temporary directory).
    ``scratch_dir``'s ``UsageError`` where ``TMPDIR`` cannot hold one."""
    global _kept, _exit_registered
    kept = _kept
    if kept is not None and _still_there(kept[2], kept[3]):  # (a microsecond: one lstat)
        return kept[1]
    with _kept_lock:
        if _kept is not None and _still_there(_kept[2], _kept[3]):
            return _kept[1]
        stack = contextlib.ExitStack()
        path, held = stack.enter_context(_held_scratch_dir(prefix, base))
        if not _exit_registered:
            atexit.register(_remove_kept)
            _exit_registered = True
        if _kept is not None and _kept[0] in (os.getpid(), _PARENTS):
            _kept[4].close()
        _kept = (os.getpid(), path, str(path), held, stack)
        return path


#: ``_kept``'s maker where the directory was made by the parent process (``adopt_scratch_dir``):
#: never this process's to remove.
_PARENTS = -1


class ChildScratch:
    """A private directory made for a child process (``child_scratch_dir``): its path, and
    its descriptor, held open while it lasts (so its inode is never another's)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | os.O_CLOEXEC)
        self.held = os.fstat(self.fd)
        self.maker = os.getpid()

    @property
    def identity(self) -> tuple[str, int, int]:
        """What a child that cannot inherit the descriptor (a Ray actor) is given: the path,
        and the directory's device and inode (``adopt_scratch_dir``'s ``identity``)."""
        return self.path, self.held.st_dev, self.held.st_ino

    def remove(self) -> None:
        """Remove the directory and what the child left in it (once the child is gone),
        where its name still leads to it; close the descriptor. Again: nothing. In a forked
        copy of the process that made it (its exit runs the clean-up of the parent's workers):
        only the descriptor is closed, as the child lives on, the parent's."""
        import shutil

        fd, self.fd = self.fd, None
        if fd is None:
            return
        try:
            if os.getpid() == self.maker and _still_there(self.path, self.held):
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            os.close(fd)


def child_scratch_dir(parent: Path | str, prefix: str) -> ChildScratch:
    """A new private directory ``<prefix>*`` in ``parent`` (a scratch directory of this
    process's own) for a child process about to start, which keeps its temporary files
    there (``adopt_scratch_dir``) instead of making a directory of its own in the temporary
    directory, one that a SIGKILL would leave behind. The caller removes it
    (``ChildScratch.remove``) once the child is gone."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        return ChildScratch(path)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        raise


def adopt_scratch_dir(
    path: str, dir_fd: int | None = None, identity: tuple[int, int] | None = None
) -> bool:
    """Take ``path``, a directory the parent process made for this one
    (``child_scratch_dir``), as this process's scratch directory (``process_scratch_dir``
    answers it while its name leads to it; it is never removed by this process: the parent
    removes it). Known by the descriptor ``dir_fd`` (inherited; kept open here), or by its
    (device, inode) ``identity`` (the parent holds it open). False, and nothing taken, where
    the name leads elsewhere, or to no private directory of this user's."""
    global _kept, _exit_registered
    fd = dir_fd
    try:
        if fd is None:
            fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | os.O_CLOEXEC)
        held = os.fstat(fd)
    except OSError:
        if fd is not None:
            os.close(fd)
        return False
    ours = stat.S_ISDIR(held.st_mode) and held.st_uid == os.getuid()
    if not ours or held.st_mode & 0o077 or not _still_there(path, held):
        os.close(fd)
        return False
    if identity is not None and identity != (held.st_dev, held.st_ino):
        os.close(fd)
        return False
    stack = contextlib.ExitStack()
    stack.callback(os.close, fd)
    with _kept_lock:
        if not _exit_registered:  # a directory of its own, made later, is removed at exit
            atexit.register(_remove_kept)
            _exit_registered = True
        _kept = (_PARENTS, Path(path), path, held, stack)
    return True


def adopted_scratch_dir() -> str | None:
    """The directory the parent process made for this one (``adopt_scratch_dir``), while its
    name leads to it; else None."""
    kept = _kept
    if kept is not None and kept[0] == _PARENTS and _still_there(kept[2], kept[3]):
        return kept[2]
    return None


def _remove_kept() -> None:
    if _kept is not None and _kept[0] == os.getpid():  # never a forked child's parent's
        _kept[4].close()


def check_scratch() -> None:
    """Raise ``scratch_dir``'s ``UsageError`` now, before any work, where ``TMPDIR`` cannot
    hold a private scratch directory."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tunedsl-check-") as tmp:
        _refuse_untrusted_scratch(tmp)


def _refuse_untrusted_scratch(tmp: str) -> None:
    """A ``UsageError`` naming ``TMPDIR`` when another user could swap the new scratch
    directory ``tmp`` (the cache's chain rule): nothing kept there would be trusted."""
    why = untrusted_output_dir(Path(tmp))
    if why is not None:
        from tunedsl.errors import UsageError

        raise UsageError(
            f"cannot keep a private scratch directory in TMPDIR={os.path.dirname(tmp)} "
            f"({why}): set TMPDIR to a directory of your own, closed to writes by others "
            "(or sticky, as /tmp is)"
        )


def _locked_alive(directory: str) -> int | None:
    """Create ``directory/SCRATCH_ALIVE`` already locked: it is locked under another name,
    then renamed, so nobody sees it unlocked while its directory is in use."""
    try:
        import fcntl
    except ImportError:  # no flock: nothing left behind is ever removed either
        return None
    hidden = os.path.join(directory, SCRATCH_ALIVE + ".new")
    fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(hidden, os.path.join(directory, SCRATCH_ALIVE))
    return fd


def remove_abandoned_scratch(prefix: str, base: str | None = None) -> int:
    """Remove this user's ``<prefix>*`` scratch directories that no live process holds;
    return how many. Only real directories this user owns, whose lock file this process
    can lock at once, or that have none an hour after they last changed; never anything
    through a symbolic link, nor another user's. In ``base`` (None: the temporary
    directory)."""
    try:
        import fcntl
    except ImportError:
        return 0
    import shutil
    import tempfile

    base = base or tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix)]
    except OSError:
        return 0
    removed = 0
    for name in names:
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:  # gone
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        try:
            flags = os.O_RDWR | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
            fd = os.open(os.path.join(path, SCRATCH_ALIVE), flags)
        except FileNotFoundError:  # just being made, or its maker was killed before its lock
            if st.st_mtime < time.time() - STALE_TEMP_AGE_S:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
            continue
        except OSError:  # gone, or not ours
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
        except OSError:  # a live process holds it
            pass
        finally:
            os.close(fd)
    return removed
