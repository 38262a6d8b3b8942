"""The configuration a tuning in this process is launching, kept on disk while it runs
(storage layer).

A process that dies inside a launch (a segfault or an abort in a kernel, the system
killing it for its memory) runs no clean-up, and its next run would tune the same key the
same way and die again. So while a tuning measures in its own process, the configuration
it is launching is written to ``<cache>/inflight/<key digest>.<pid>.json``, a file held
under ``flock`` for the tuning's life: one that nobody holds and that names a configuration
belongs to a process that died in that launch (``died_in_launch``). An empty one belongs to
a process that died between launches, or whose launch ended. ``tunedsl cache clear --all``
removes the files of every ended process (``remove_dead``).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["Inflight", "died_in_launch", "remove_dead"]

_FLAGS = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_MAX_BYTES = 1 << 16  # a configuration's JSON; anything longer is not one of these files


def _directory() -> Path:
    from tunedsl.store.paths import cache_root

    return cache_root() / "inflight"


class Inflight:
    """The file of one tuning of the key ``digest`` in this process, made at its first
    launch. Best effort: where the cache cannot hold it, nothing is written."""

    def __init__(self, digest: str) -> None:
        self.digest = digest
        self.fd: int | None = None  # -1: the file could not be made
        self.name = ""
        self.dir_fd = -1

    def trying(self, config: dict[str, Any]) -> None:
        """``config`` (its JSON form) is about to be launched."""
        if self.fd is None:
            self._open()
        if self.fd is not None and self.fd >= 0:
            data = json.dumps({"config": config, "pid": os.getpid(), "time": time.time()})
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
                os.pwrite(self.fd, data.encode(), 0)

    def done(self) -> None:
        """The launch begun by ``trying`` ended (well or with an error)."""
        if self.fd is not None and self.fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)

    def close(self) -> None:
        """The tuning ended: its file goes."""
        if self.fd is not None and self.fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.name, dir_fd=self.dir_fd)
            os.close(self.fd)
            os.close(self.dir_fd)
        self.fd = -1

    def _open(self) -> None:
        import secrets

        from tunedsl.store.paths import open_or_make_private_dir

        self.fd = -1
        try:
            import fcntl
        except ImportError:  # no flock: no file either
            return
        try:
            self.dir_fd = open_or_make_private_dir(_directory())
        except OSError:  # an unwritable or untrusted cache: its records say so, not this
            return
        self.name = f"{self.digest}.{os.getpid()}.json"
        hidden = f".{self.name}.{secrets.token_hex(4)}"
        try:  # locked under a hidden name first: never seen unlocked, so never taken as dead
            fd = os.open(hidden, _FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=self.dir_fd)
        except OSError:
            os.close(self.dir_fd)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(hidden, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(hidden, dir_fd=self.dir_fd)
            os.close(fd)
            os.close(self.dir_fd)
            return
        self.fd = fd


def died_in_launch(digest: str) -> list[dict[str, Any]]:
    """What the files of processes that died tuning the key ``digest`` name (each a dict
    with ``config``, ``pid`` and ``time``), for those that died inside a launch; every file
    of a dead process is removed. Files of live processes, another user's files and
    anything else are left alone and never read."""
    died: list[dict[str, Any]] = []
    for data in _take_dead(lambda name: name.startswith(digest + ".")):
        # A damaged file is no death: bad UTF-8 or JSON (ValueError), or JSON nested
        # deeper than Python parses (RecursionError).
        with contextlib.suppress(ValueError, RecursionError):
            entry = json.loads(data) if 0 < len(data) <= _MAX_BYTES else None
            if isinstance(entry, dict) and isinstance(entry.get("config"), dict):
                died.append(entry)
    return died


def remove_dead() -> int:
    """Remove the files of every process that has ended (``tunedsl cache clear --all``),
    those a process killed while making its file left under a hidden name too; how many.
    A live process's file (it holds its lock) and another user's are left alone."""
    # A hidden one a minute old: a new one is locked a moment after it is made.
    settled = lambda name, st: name[:1] != "." or time.time() - st.st_mtime > 60  # noqa: E731
    return sum(1 for _ in _take_dead(_is_journal, settled))


def _is_journal(name: str) -> bool:
    """``<digest>.<pid>.json``, or ``.<that>.<random hex>`` (``Inflight._open``)."""
    if name.startswith("."):
        name, _, tail = name[1:].rpartition(".")
        if not (len(tail) == 8 and all(c in "0123456789abcdef" for c in tail)):
            return False
    digest, _, rest = name.partition(".")
    pid, _, suffix = rest.partition(".")
    return bool(digest) and "." not in digest and pid.isdigit() and suffix == "json"


def _take_dead(
    named: Callable[[str], bool], settled: Callable[[str, os.stat_result], bool] | None = None
) -> Iterator[bytes]:
    """The contents of the files of ended processes that ``named`` accepts (and ``settled``,
    given their ``fstat``), each removed once read: regular files of this user that no live
    process holds locked."""
    try:
        import fcntl

        from tunedsl.store.paths import open_private_dir

        dir_fd = open_private_dir(_directory())
    except (ImportError, OSError):  # none made yet (or an untrusted cache: never read)
        return
    try:
        for name in [n for n in os.listdir(dir_fd) if named(n)]:
            try:
                fd = os.open(name, _FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                    continue
                if settled is not None and not settled(name, st):
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:  # a live process holds it
                    continue
                data = os.pread(fd, _MAX_BYTES + 1, 0)
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                continue
            finally:
                os.close(fd)
            yield data
    finally:
        os.close(dir_fd)
