"""Where tunedsl keeps its per-user caches, and the one way to create those directories.

Layout under the cache root (``TUNEDSL_CACHE_DIR`` or platformdirs' user cache dir)::

    bytecode/   content-addressed code objects of expanded DSL modules
    records/    one JSON tuning record per (site, key)
    binaries/   the chosen variants' compiled binaries, for a warm start without triton.compile
    locks/      cross-process lock files

Directories are created with mode 0700. A cache directory is trusted only when the whole
chain from the cache root down to it is: the root and every directory below it owned by
this user and not writable by group or others, and none below the root a symbolic link
(``open_private_dir``). Files in it are then opened through the directory's descriptor, so a
directory renamed or swapped after the check cannot redirect what is read or written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

from tunedsl import knobs


@knobs.per_environ  # TUNEDSL_CACHE_DIR, or the platform's cache (XDG_CACHE_HOME, HOME)
def cache_root() -> Path:
    override = knobs.cache_dir_override()
    if override:
        return Path(override).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tunedsl", appauthor=False))


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if missing; return it. The cache root and everything
    below it get mode 0700, and below the root nothing is created inside a directory that is
    not trusted (``open_or_make_private_dir``). May raise OSError (``UntrustedDir``)."""
    root = cache_root()
    if not path.is_relative_to(root):
        make_dirs(path)
        return path
    if not os.path.lexists(root):
        make_dirs(root)
    os.close(open_or_make_private_dir(path))
    return path


def make_dirs(path: Path) -> None:
    """``mkdir -p path`` with every directory it makes of mode 0700 whatever the umask
    (``Path.mkdir(parents=True)`` gives the parents the umask's mode: 0777 under
    ``umask 0``, a ``~/.cache`` every user could write). Nothing is made inside a directory
    another user could change, nor through a symbolic link another user owns: the directory
    the missing ones go in is reached as :func:`_open_chain` reaches those above a trusted
    one, and each is made through its parent's descriptor (a ``HOME`` or cache directory of
    another user's, whose ``.cache`` links to a third user's directory, had this user make
    ``tunedsl/`` there). Raises ``UntrustedDir`` (which directory, and why)."""
    path = Path(os.path.abspath(path))
    missing = []
    while not os.path.lexists(path):
        missing.append(path.name)
        if path.parent == path:
            break
        path = path.parent
    if not missing:
        return
    fd = _open_chain(path, True, True, last_above=True)
    try:
        for name in reversed(missing):
            path = path / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
            below = _open_above(name, fd, path)
            os.close(fd)
            fd = below
    finally:
        os.close(fd)


class UntrustedDir(OSError):
    """A directory that another user could change (the message names it and why): nothing
    in it is read or written."""


def untrusted_fix() -> str:
    """The fix of a cache directory refused as ``UntrustedDir`` (the error names it): the
    cache root may be fine, and only a directory inside it another user's (one a run as
    root, under ``sudo``, made)."""
    return (
        "set TUNEDSL_CACHE_DIR to a directory of your own, or, where the directory named is "
        "yours to fix (made by a run as another user, such as under sudo), chown it to "
        "yourself and chmod go-w"
    )


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_private_dir(path: Path, *, root_may_own: bool = False) -> int:
    """A descriptor of the directory ``path``, opened and checked component by component.

    Under the cache root, the root is reached from ``/`` (:func:`_open_chain`: following a
    symbolic link the user chose) and each directory below it is opened relative to its
    parent's descriptor without following a symbolic link; every one must be owned by this
    user and not writable by group or others. A directory outside the cache root (a
    ``TUNEDSL_RECORDS_PATH`` entry) is reached the same way from ``/`` but is not itself a
    symbolic link, and may also belong to root with ``root_may_own``. The caller closes the
    descriptor. Raises ``UntrustedDir`` (which directory, and why), ``FileNotFoundError``
    when a directory is missing, or another ``OSError``."""
    root = cache_root()
    if path.is_relative_to(root):
        base, parts, follow = root, path.relative_to(root).parts, True
    else:
        base, parts, follow = path, (), False
    fd = _open_chain(base, follow, root_may_own)
    for i, name in enumerate(parts):
        try:
            fd_below = _open_checked(name, fd, base.joinpath(*parts[: i + 1]), False, False)
        finally:
            os.close(fd)
        fd = fd_below
    return fd


def open_or_make_private_dir(path: Path) -> int:
    """:func:`open_private_dir`, first creating what is missing of ``path`` (mode 0700).
    Below the cache root each missing directory is made through its checked parent's
    descriptor: nothing is created inside a directory that is not trusted."""
    try:
        return open_private_dir(path)
    except FileNotFoundError:
        pass
    root = cache_root()
    if not path.is_relative_to(root) or not os.path.lexists(root):
        ensure_private_dir(path)
        return open_private_dir(path)
    parts = path.relative_to(root).parts
    fd = _open_chain(root, True, False)
    for i, name in enumerate(parts):
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
            fd_below = _open_checked(name, fd, root.joinpath(*parts[: i + 1]), False, False)
        finally:
            os.close(fd)
        fd = fd_below
    return fd


def _open_checked(
    name: str,
    dir_fd: int | None,
    shown: Path,
    follow: bool,
    root_ok: bool,
    not_link_ok: bool = False,
    group_ok: bool = False,
) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS | (0 if follow else _NOFOLLOW), dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ENOTDIR, errno.ELOOP) and not follow:
            if not_link_ok and err.errno == errno.ENOTDIR and not _is_link(name, dir_fd):
                raise  # a regular file where the cache root should be: a plain error
            raise UntrustedDir(f"{shown} is a symbolic link or not a directory") from None
        raise
    st = os.fstat(fd)  # the directory opened, not the path: what we check is what we use
    why = None
    if hasattr(os, "getuid") and st.st_uid != os.getuid() and not (root_ok and st.st_uid == 0):
        why = f"{shown} is owned by another user (uid {st.st_uid})"
    elif _writable_by_others(st, group_ok):
        why = f"{shown} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    if why is not None:
        os.close(fd)
        raise UntrustedDir(why)
    return fd


def _writable_by_others(st: os.stat_result, group_ok: bool) -> bool:
    """Whether the mode of ``st`` lets another user write: writable by others, or by its
    group unless ``group_ok`` and the group is this user's alone
    (:func:`tunedsl.store.local_peer.private_group`)."""
    if st.st_mode & stat.S_IWOTH:
        return True
    if not st.st_mode & stat.S_IWGRP:
        return False
    from tunedsl.store.local_peer import private_group  # (pwd and grp: not on Windows)

    return not (group_ok and private_group(st.st_gid))


#: Symbolic links followed on the way to one directory before giving up (the kernel's own).
_MAX_LINKS = 40


def _open_chain(
    path: Path,
    follow_last: bool,
    root_ok: bool,
    last_above: bool = False,
    last_open_ok: bool = False,
    group_ok: bool = False,
) -> int:
    """A descriptor of the directory ``path``, reached from ``/`` one name at a time, each
    opened relative to its parent's descriptor: every directory above it must be owned by
    this user or root and closed to writes by group and others, unless sticky (``/tmp``:
    others cannot rename or replace what is not theirs there), or another user could swap
    what lies below; ``path`` itself must pass :func:`_open_checked`. A symbolic link on the
    way is followed only when this user or root owns it, as the directory holding it was
    checked already; the last name is followed only with ``follow_last`` (the cache root).
    ``last_above``: ``path`` itself is judged as those above it are (where directories are
    to be made); ``last_open_ok``: then also where it is open to writes by others.
    ``group_ok``: a directory writable by its group is closed to others where that group is
    this user's alone (``local_peer.private_group``)."""
    names = list(reversed(Path(os.path.abspath(path)).parts[1:]))  # a stack: next name last
    if not names:
        return _open_checked(os.sep, None, path, True, root_ok, group_ok=group_ok)
    shown, fd, links = Path(os.sep), _open_above(os.sep, None, Path(os.sep), group_ok=group_ok), 0
    try:
        while names:
            name = names.pop()
            last = not names
            target = _link_target(name, fd, shown / name) if follow_last or not last else None
            if target is not None:
                links += 1
                if links > _MAX_LINKS:
                    raise OSError(errno.ELOOP, f"too many symbolic links in {path}")
                names.extend(reversed(Path(target).parts))
                if os.path.isabs(target):
                    names.pop()  # the "/" part
                    os.close(fd)
                    shown, fd = Path(os.sep), -1
                    fd = _open_above(os.sep, None, shown, group_ok=group_ok)
                continue
            shown = shown.parent if name == ".." else shown if name == "." else shown / name
            if last and not last_above:
                below = _open_checked(name, fd, path, False, root_ok, follow_last, group_ok)
            else:
                below = _open_above(name, fd, shown, last and last_open_ok, group_ok)
            os.close(fd)
            fd = below
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    return fd


def _link_target(name: str, dir_fd: int, shown: Path) -> str | None:
    """The target of the symbolic link ``name`` in the checked directory ``dir_fd``; None
    when it is not a link. A link another user owns (in a sticky directory) is refused."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # the open that follows says it is missing
    if not stat.S_ISLNK(st.st_mode):
        return None
    if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
        raise UntrustedDir(f"{shown} is a symbolic link owned by another user (uid {st.st_uid})")
    return os.readlink(name, dir_fd=dir_fd)


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _open_above(
    name: str, dir_fd: int | None, shown: Path, open_ok: bool = False, group_ok: bool = False
) -> int:
    """A directory above a trusted one: this user's or root's, and closed to writes by group
    and others unless sticky (or ``open_ok``; ``group_ok``: see :func:`_open_chain`)."""
    try:
        fd = os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:  # made a link since it was looked at
            raise UntrustedDir(f"{shown} is a symbolic link") from None
        raise
    st = os.fstat(fd)
    why = None
    if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
        why = f"{shown} is owned by another user (uid {st.st_uid})"
    elif _writable_by_others(st, group_ok) and not (st.st_mode & stat.S_ISVTX or open_ok):
        why = f"{shown} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    if why is not None:
        os.close(fd)
        raise UntrustedDir(why)
    return fd


def untrusted_output_dir(path: Path) -> str | None:
    """Why another user could change what is written in the directory ``path`` (a report
    directory), or None: the rule of :func:`_open_chain`, the directory itself this user's."""
    try:
        os.close(_open_chain(path, True, False))
    except UntrustedDir as why:
        return str(why)
    except OSError as err:
        return f"{path} cannot be opened ({err.strerror or err})"
    return None


def redirected_destination(path: Path) -> str | None:
    """Why another user could send what this user writes into the directory ``path`` (a
    command's ``--out``) somewhere else, or None: a symbolic link of theirs on the way, the
    directory (or, while it is missing, the nearest one above it) theirs, or a directory above
    open to their writes and not sticky (:func:`_open_chain`). Whether ``path`` itself is
    open to writes is the caller's to judge, as is a path that is no directory or cannot be
    reached."""
    try:
        os.close(_open_chain(_nearest_existing(path), True, True, True, last_open_ok=True))
    except UntrustedDir as why:
        return str(why)
    except OSError:
        return None  # not a directory, or not reachable: the write's own error says so
    return None


def untrusted_source(path: str, *, on_path: bool = False) -> str | None:
    """Why another user could have written the code file ``path`` (its real path), or None.

    Trusted: the file, the ``__pycache__`` beside it (as named and real: Python runs its code
    instead; under ``sys.pycache_prefix``, the directory there instead) and every directory
    above, owned by this user or root and closed to writes by group and others (a directory
    above may be sticky, as ``/tmp``; a group of this user's alone is no other user). With ``on_path`` (the file's directory, as named, goes
    on ``sys.path``) it must pass the cache's chain rule."""
    named = () if os.path.isdir(path) else {os.path.abspath(path), os.path.realpath(path)}
    if sys.pycache_prefix:  # the compiled code of every module is read from under the prefix
        why = _untrusted_file(path) or next(filter(None, map(_untrusted_prefix, named)), None)
    else:
        caches = sorted({os.path.join(os.path.dirname(p), "__pycache__") for p in named})
        caches = [c for c in caches if os.path.lexists(c)]  # (none for a package's directory)
        why = _untrusted_file(path) or next(filter(None, map(_untrusted_file, caches)), None)
    if why is not None or not on_path:
        return why
    return untrusted_place(Path(os.path.dirname(os.path.abspath(path))))


def _untrusted_prefix(path: str) -> str | None:
    """Why another user could put the compiled code Python runs for the source ``path``
    under ``sys.pycache_prefix`` (``PYTHONPYCACHEPREFIX``), or None: Python runs a pyc found
    there instead of the source, and the modules beside ``path`` are compiled there too."""
    import importlib.util

    directory = os.path.dirname(os.path.abspath(importlib.util.cache_from_source(path)))
    why = untrusted_place(Path(directory))
    if why is None:
        return None
    return (
        f"Python reads the compiled code of {path} from {directory} (PYTHONPYCACHEPREFIX), "
        f"and {why}; point PYTHONPYCACHEPREFIX at a directory of your own"
    )


def untrusted_place(path: Path) -> str | None:
    """Why another user could put files in the directory ``path`` that a tool reads code
    from (Python's pycache prefix, Triton's cache), or None. The chain rule of the cache
    (:func:`_open_chain`, root may own it), applied to ``path`` or, while it is missing, to
    the nearest directory above it that exists, where the rest is made on the first write.
    A directory writable by its group passes where that group is this user's alone
    (``local_peer.private_group``: a project directory made under ``umask 002``)."""
    existing = _nearest_existing(path)
    try:
        os.close(_open_chain(existing, True, True, group_ok=True))
    except UntrustedDir as why:
        return str(why)
    except OSError as err:
        return f"{existing} cannot be checked ({err.strerror or err})"
    return None


def _nearest_existing(path: Path) -> Path:
    """``path`` made absolute, or while it is missing the nearest directory above it that
    exists (or is a link)."""
    existing = os.path.abspath(path)
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    return Path(existing)


def _untrusted_file(path: str) -> str | None:
    real = os.path.realpath(path)
    uid = os.getuid() if hasattr(os, "getuid") else None
    current, is_file = real, True
    while True:
        try:
            st = os.stat(current)
        except OSError as err:
            return f"{current} cannot be checked ({err.strerror or err})"
        if uid is not None and st.st_uid not in (uid, 0):
            return f"{current} is owned by another user (uid {st.st_uid})"
        open_to_others = _writable_by_others(st, True)
        if open_to_others and (is_file or not st.st_mode & stat.S_ISVTX):
            return f"{current} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current, is_file = parent, False


def is_private_dir(path: Path) -> bool:
    """True if ``path`` and the chain above it are trusted (:func:`open_private_dir`)."""
    try:
        os.close(open_private_dir(path))
    except OSError:
        return False
    return True


def bytecode_dir() -> Path:
    return cache_root() / "bytecode"


#: Set by ``records_kept_in``: where this thread's records go instead of the cache's own.
_records_elsewhere: ContextVar[Path | None] = ContextVar("tunedsl_records_kept_in", default=None)


def records_dir() -> Path:
    """Where this thread writes tuning records, and the first place it reads them."""
    return _records_elsewhere.get() or _cache_records_dir()


def records_kept_apart() -> Path | None:
    """The directory of ``records_kept_in`` while within it (a sweep task's), else None."""
    return _records_elsewhere.get()


@knobs.per_environ  # asked on every miss
def _cache_records_dir() -> Path:
    return cache_root() / "records"


@contextlib.contextmanager
def records_kept_in(directory: Path) -> Iterator[None]:
    """Within: records are written to and read from ``directory`` alone (a sweep task's
    own, so that it measures every key it meets and what it tunes comes back whole: no
    ``TUNEDSL_RECORDS_PATH`` record or Redis record decides a key, and nothing is written to
    Redis before the sweep merges), while the bytecode, binaries and locks stay the
    cache's: processes tuning side by side share their compile locks. In this context only
    (its thread): the process's other threads keep the cache's records meanwhile."""
    token = _records_elsewhere.set(directory)
    try:
        yield
    finally:
        _records_elsewhere.reset(token)


def locks_dir() -> Path:
    return cache_root() / "locks"


def binaries_dir() -> Path:
    """The chosen variants' stored kernel binaries (``backends/triton_binaries.py``)."""
    return cache_root() / "binaries"


def stopped_compiles_dir() -> Path:
    """Compiles stopped over a GPU's shared memory (``backends/stopped_compiles.py``)."""
    return cache_root() / "stopped"


# Writers killed between writing a temporary file and renaming it leave the file behind; it
# is never read as an entry, and an hour without change means its writer is gone.
STALE_TEMP_AGE_S = 3600.0


def remove_stale_temporaries(
    directory: Path, is_temporary: Callable[[str], bool], older_than_s: float = STALE_TEMP_AGE_S
) -> int:
    """Delete the regular files of ``directory`` whose names ``is_temporary`` accepts and
    that were not modified for ``older_than_s`` seconds; return how many. Nothing else is
    touched, and a file that vanishes meanwhile (another process swept it) is skipped."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    cutoff = time.time() - older_than_s
    removed = 0
    for name in names:
        if not is_temporary(name):
            continue
        path = directory / name
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_mtime <= cutoff:
                os.unlink(path)
                removed += 1
        except OSError:
            continue
    return removed
