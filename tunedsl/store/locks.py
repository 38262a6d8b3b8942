"""The global compile lock, and a cross-process file lock for on-disk state.

What ``compile_lock`` guards, and why (Triton 3.6 through 3.9):

* ``JITFunction.device_caches`` is a ``defaultdict(create_binder)``: two threads missing
  the same device at once each build a binder and one of them wins, so kernels the loser
  put in *its* ``kernel_cache`` vanish. Binder creation therefore happens under the lock.
* The per-device kernel tables (``kernel_cache``, ``kernel_key_cache``) are read and
  written in ``JITFunction.run``/``_do_compile`` without any lock; tunedsl fills them only
  while holding this lock.
* ``CompiledKernel._init_handles`` loads the binary into the CUDA context once, checking
  ``self.module is None`` without a lock; tunedsl calls it under the lock so a kernel is
  never loaded twice.
* Triton's compile hooks and ``knobs`` are process-global.

The heavy part of a compile (AST → TTIR → LLVM → PTX → ``ptxas``) runs *outside* the
lock: ``tunedsl.backends.triton_compile`` uses Triton's own async-compile protocol
(``triton.runtime._async_compile``) to split ``JITFunction`` compilation into a cheap
guarded prologue (bind, key, table look-up), the unguarded compile, and a cheap guarded
epilogue (insert into the table, load the module).

The lock is re-entrant (a ``threading.RLock``): a compile epilogue that triggers another
guarded step in the same thread does not deadlock. Hold it only for short, non-blocking
work; never hold it while waiting on another thread.

``file_lock(name)`` is a cross-process lock (``filelock``) under the tunedsl cache's
``locks/`` directory, for state several processes share on disk: the Triton cache
directory and tunedsl's own record of what was cross-compiled for which target.

``key_lock(path, what, timeout_s)`` is the lock of one tuning key (``store/records.py``):
its holder writes who it is (pid, host, start time) into a side file ``<lock>.owner``; a
waiter prints that, and how long it has waited, after ``FIRST_NOTICE_S`` and then every
``NOTICE_EVERY_S``, and gives up after ``timeout_s`` (the caller then tunes unlocked).
``WaitNotices`` prints those lines for the Redis lock too (``store/redis_store.py``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from tunedsl.store import atomic, paths
from tunedsl.warn import warn_once

#: The one process-wide compile lock (re-entrant). See the module docstring.
compile_lock = threading.RLock()


@contextmanager
def guarded() -> Iterator[None]:
    """``with guarded():`` holds the global compile lock (re-entrant)."""
    with compile_lock:
        yield


def _lock_path(name: str) -> str:
    """The lock file of ``name`` in the cache's ``locks/``, created private. Raises OSError
    (``paths.UntrustedDir`` when another user could change that directory: a lock file
    there is one they can hold forever)."""
    # A readable prefix plus a hash keeps any name (a path, a key) a safe file name.
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    directory = paths.locks_dir()
    os.close(paths.open_or_make_private_dir(directory))  # the whole chain from the root
    return str(directory / f"{safe}-{digest}.lock")


@contextmanager
def file_lock(name: str, *, timeout_s: float = -1) -> Iterator[Any]:
    """Hold the cross-process lock called ``name`` (a file under the cache's ``locks/``).

    ``timeout_s`` < 0 waits forever; otherwise, when the lock is not free in time (its
    holder hung or stopped), yields None after one ``CacheWarning`` naming the lock file.
    Re-entrant within one process (filelock counts acquisitions). Where no trusted lock file
    can be had (a cache that cannot be written, or a directory another user could change),
    yields None after one ``CacheWarning``. Without the lock the work goes on, as tuning
    does (other processes may then do the same work at once).
    """
    try:
        path = _lock_path(name)
    except OSError as err:
        warn_once(
            "unlocked-compiles",
            f"cannot use the compile lock files in {paths.locks_dir()} ({err}): compiling "
            "without them (other processes may compile the same kernel at the same time); "
            + (
                paths.untrusted_fix()
                if isinstance(err, paths.UntrustedDir)
                else f"make {paths.cache_root()} a directory this user owns and can write, or "
                "set TUNEDSL_CACHE_DIR to one"
            ),
            stacklevel="user",
        )
        yield None
        return
    from filelock import Timeout

    lock = new_file_lock(path, timeout_s)
    try:
        lock.acquire()
    except Timeout:
        warn_once(
            "compile-lock-waited",
            f"waited {timeout_s:.0f} s for the compile lock {path}, held by another process "
            "of this user compiling the same kernel (hung or stopped?): compiling without it",
            stacklevel="user",
        )
        yield None
        return
    except (OSError, NotImplementedError) as err:
        if not no_file_locks(err):
            raise
        warn_no_file_locks(path, err)
        yield None
        return
    try:
        yield lock
    finally:
        lock.release()


def new_file_lock(path: str | Path, timeout_s: float = -1) -> Any:
    """A ``filelock.FileLock`` on ``path`` that never falls back to a lock of its own where
    the filesystem has no ``flock``: filelock 3.20 raises ``NotImplementedError`` there, and
    later releases (4.x included) would switch to a marker file (a ``SoftFileLock``) that a
    killed process leaves behind, each later waiter waiting out its limit, with a warning
    that names no fix. Told not to, they raise the ``OSError`` (ENOSYS) instead, and tunedsl
    goes on without the lock after its own warning (``warn_no_file_locks``); 3.20 to 3.23
    ignore the option they do not know. 3.24 to 3.29 ignore it too and fall back all the same:
    the package's requirement excludes them (pyproject.toml)."""
    from filelock import FileLock

    return FileLock(str(path), timeout=timeout_s, fallback_to_soft=False)


#: What ``flock`` fails with where a filesystem has no file locks (Lustre mounted without
#: ``-o flock``, some NFS mounts).
_NO_FLOCK = frozenset(
    {errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}
)


def no_file_locks(err: BaseException) -> bool:
    """True when ``err``, from taking a file lock, says the filesystem has no file locks
    (filelock 3.20 raises ``NotImplementedError`` for ENOSYS; later ones the ``OSError``,
    from ``new_file_lock``)."""
    return isinstance(err, NotImplementedError) or (
        isinstance(err, OSError) and err.errno in _NO_FLOCK
    )


def warn_no_file_locks(path: str | Path, err: BaseException) -> None:
    """One ``CacheWarning``: the lock file's filesystem has no file locks, and the fix."""
    warn_once(
        "no-file-locks",
        f"the filesystem of {Path(path).parent} does not support file locks (locking {path}: "
        f"{err or type(err).__name__}): tuning and compiling go on without tunedsl's "
        "cross-process locks (other processes may tune or compile the same kernel at the "
        "same time); set TUNEDSL_CACHE_DIR to a directory on a local filesystem, or mount "
        "this one with file locks (Lustre: -o flock)",
        stacklevel="user",
    )


#: A waiter says who holds a key's lock after this many seconds, then every NOTICE_EVERY_S.
FIRST_NOTICE_S = 2.0
NOTICE_EVERY_S = 30.0
_POLL_S = 0.25


def owner_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".owner")


def read_owner(lock_path: Path) -> str:
    """Who holds the lock, in words, from its side file ("an unknown process" if unreadable)."""
    try:
        data = json.loads(atomic.read_regular_file(owner_path(lock_path), limit=4096))
    except (OSError, ValueError, RecursionError):
        return "an unknown process"
    return describe_owner(data)


def owner_note() -> dict[str, Any]:
    """Who this process is, as a lock's holder writes it (pid, host, start time)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}


def describe_owner(data: Any) -> str:
    """An ``owner_note`` in words ("an unknown process" when it is not one)."""
    try:
        pid, host, since = int(data["pid"]), str(data["host"]), float(data["since"])
        started = time.strftime("%H:%M:%S", time.localtime(since))
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        return "an unknown process"
    held = max(0.0, time.time() - since)
    return f"process {pid} on {host!r} (holding it since {started}, {held:.0f} s)"


class WaitNotices:
    """What a waiter on a key's lock prints: who holds it after ``FIRST_NOTICE_S``, then
    every ``NOTICE_EVERY_S``, and one line when it gives up (file and Redis locks alike).
    ``where`` names the lock (its file, its Redis key)."""

    def __init__(self, what: str, where: str, timeout_s: float, out: TextIO | None = None):
        self.what, self.where, self.timeout_s, self.out = what, where, timeout_s, out
        self.start = time.monotonic()
        self._next = FIRST_NOTICE_S

    def waited(self) -> float:
        return time.monotonic() - self.start

    def due(self) -> bool:
        """True when the next notice should be printed now."""
        return self.waited() >= self._next

    def waiting(self, holder: str) -> None:
        waited = self.waited()
        self._print(
            f"tunedsl: waiting {waited:.0f} s for the tuning lock of {self.what}, held "
            f"by {holder} ({self.where}; gives up after {self.timeout_s:.0f} s, "
            "TUNEDSL_LOCK_TIMEOUT)"
        )
        self._next = waited + NOTICE_EVERY_S

    def gave_up(self, holder: str) -> None:
        self._print(
            f"tunedsl: gave up waiting for the tuning lock of {self.what} after "
            f"{self.waited():.0f} s (TUNEDSL_LOCK_TIMEOUT); held by {holder}; tuning "
            "without the lock"
        )

    def _print(self, text: str) -> None:
        print(text, file=self.out if self.out is not None else sys.stderr, flush=True)


def _write_owner(lock_path: Path) -> None:
    try:
        atomic.write_text(owner_path(lock_path), json.dumps(owner_note()), durable=False)
    except OSError:  # a note for people (a full disk, say): never worth failing over
        pass


@contextmanager
def key_lock(
    lock_path: Path, what: str, timeout_s: float, out: TextIO | None = None
) -> Iterator[bool]:
    """Hold the file lock at ``lock_path``; yields True when held, False when another
    process still held it after ``timeout_s`` seconds, or when the filesystem has no file
    locks (one warning naming the fix; then nothing is held). Raises OSError when the lock
    file cannot be created at all."""
    from filelock import Timeout

    lock = new_file_lock(lock_path)
    notices = WaitNotices(what, f"lock file {lock_path}", timeout_s, out)
    while True:
        try:
            lock.acquire(timeout=min(_POLL_S, max(0.0, timeout_s - notices.waited())))
            break
        except Timeout:
            if notices.waited() >= timeout_s:
                notices.gave_up(read_owner(lock_path))
                yield False
                return
            if notices.due():
                notices.waiting(read_owner(lock_path))
        except (OSError, NotImplementedError) as err:
            if not no_file_locks(err):
                raise
            warn_no_file_locks(lock_path, err)
            yield False
            return
    try:
        _write_owner(lock_path)
        yield True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(owner_path(lock_path))
        lock.release()


def remove_free_lock(path: Path) -> None:
    """Delete a key's lock file and its owner note, but only while nobody holds the lock
    (deleting a held lock file would let a second process take a fresh one)."""
    from filelock import Timeout

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return
        lock = new_file_lock(path)
        lock.acquire(timeout=0)
    except (OSError, NotImplementedError, Timeout):
        return
    try:
        for victim in (owner_path(path), path):
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(victim).st_mode):
                    os.unlink(victim)
    finally:
        lock.release()
