"""The configuration a tuning in this process is launching, kept on disk while it runs
(storage layer).

A process that dies inside a launch (a segfault or an abort in a kernel, the system
killing it for its memory) runs no clean-up, and its next run would tune the same key the
same way and die again. So while a tuning measures in its own process, the configuration
it is launching is written to ``<cache>/inflight/<key digest>.<pid>.json``, a file held
under ``flock`` for the tuning's life: one that nobody holds and that names a configuration
belongs to a process that died in that launch (``died_in_launch``). The file also says how
often processes died launching that configuration before (``deaths``: a kill looks like a
crash, so one death is no proof of one) and carries the earlier deaths the tuning knew of
(``earlier``), so a death on another configuration does not forget them. An empty one
belongs to a process that died between launches, or whose launch ended, knowing of no
earlier death. ``tunedsl cache clear --all`` removes the files of every ended process
(``remove_dead``).
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

__all__ = ["Inflight", "death_count", "died_in_launch", "remove_dead"]

_FLAGS = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_MAX_BYTES = 1 << 16  # a configuration's JSON; anything longer is not one of these files
_MAX_DEATHS = 99  # a death count is capped: the rule asks only whether it died before


def _directory() -> Path:
    from tunedsl.store.paths import cache_root

    return cache_root() / "inflight"


class Inflight:
    """The file of one tuning of the key ``digest`` in this process, made at its first
    launch (at ``done``, before it, where there are earlier deaths to carry). Best effort:
    where the cache cannot hold it, nothing is written."""

    def __init__(self, digest: str, earlier: list[dict[str, Any]] | None = None) -> None:
        """``earlier``: the deaths this tuning knows of (``{"config": ..., "deaths": n}``),
        carried in the file so that they outlive this process too."""
        self.digest = digest
        self.fd: int | None = None  # -1: the file could not be made
        self.name = ""
        self.dir_fd = -1
        self.earlier = list(earlier or ())

    def trying(self, config: dict[str, Any], deaths: int = 0) -> None:
        """``config`` (its JSON form) is about to be launched; ``deaths``: how many
        processes died launching it before."""
        earlier = [e for e in self.earlier if e["config"] != config]
        self._write({"config": config, "deaths": deaths, **self._carried(earlier)})

    def done(self) -> None:
        """The launch begun by ``trying`` ended (well or with an error); also, before the
        first launch, the file is made where there are earlier deaths to carry."""
        self._write(self._carried(self.earlier))

    def _carried(self, earlier: list[dict[str, Any]]) -> dict[str, Any]:
        """``earlier`` as the file holds it, within its size limit (most deaths first)."""
        kept: list[dict[str, Any]] = []
        size = 0
        for entry in sorted(earlier, key=lambda e: -int(e["deaths"])):
            size += len(json.dumps(entry)) + 2
            if size > _MAX_BYTES // 2:
                break
            kept.append(entry)
        return {"earlier": kept} if kept else {}

    def _write(self, content: dict[str, Any]) -> None:
        """The file holds ``content`` (nothing where it is empty)."""
        if self.fd is None and content:
            self._open()
        if self.fd is not None and self.fd >= 0:
            data = b""
            if content:
                data = json.dumps({**content, "pid": os.getpid(), "time": time.time()}).encode()
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
                if data:
                    os.pwrite(self.fd, data, 0)

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
    """What the files of processes that died tuning the key ``digest`` say: each a dict
    with ``config`` (the configuration it died launching; absent where it died between
    launches), ``deaths`` (how often processes died launching it before), ``earlier`` (the
    earlier deaths it knew of, ``{"config": ..., "deaths": n}``), ``pid`` and ``time``,
    for those that died inside a launch or knew of an earlier death; every file of a dead
    process is removed. Files of live processes, another user's files and anything else
    are left alone and never read. The counts are as written: ``death_count`` reads them."""
    died: list[dict[str, Any]] = []
    for data in _take_dead(lambda name: name.startswith(digest + ".")):
        # A damaged file is no death: bad UTF-8 or JSON (ValueError), or JSON nested
        # deeper than Python parses (RecursionError).
        with contextlib.suppress(ValueError, RecursionError):
            entry = json.loads(data, parse_int=_int) if 0 < len(data) <= _MAX_BYTES else None
            if not isinstance(entry, dict):
                continue
            earlier = entry.get("earlier")
            entry["earlier"] = [
                e for e in (earlier if isinstance(earlier, list) else ())
                if isinstance(e, dict) and isinstance(e.get("config"), dict)
            ]  # fmt: skip
            if not isinstance(entry.get("config"), dict):
                entry.pop("config", None)
            if "config" in entry or entry["earlier"]:
                died.append(entry)
    return died


def death_count(value: object) -> int:
    """A ``deaths`` field as a count: anything but a non-negative int (a string, a float,
    a bool, a negative number: a damaged file) is 0; a huge one is capped."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(0, min(value, _MAX_DEATHS))


def _int(text: str) -> int:
    """A JSON integer, anywhere in the file: one of more digits than Python parses (a
    damaged or hostile file) reads as large as a count can be, or as small, rather than
    as the whole file's error (a configuration holding it then matches none)."""
    try:
        return int(text)
    except ValueError:
        return -_MAX_DEATHS if text.startswith("-") else _MAX_DEATHS


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
