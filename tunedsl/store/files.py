"""``FileRecordStore``: the engine's ``RecordStore`` seam over JSON record files (store layer).

One store per directory: the user's cache (``records/``, writable) and, read-only, each
``TUNEDSL_RECORDS_PATH`` directory. Everything goes through ``store/records.py``, so the
stores read and write exactly what ``load_record``/``save_record`` do: strict validation,
one warning for anything damaged or untrusted, atomic writes, a per-digest lock that says
who holds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from tunedsl.store import paths
from tunedsl.store import records as rec
from tunedsl.warn import warn_once


class FileRecordStore:
    """Records as ``<digest>.json`` files in one directory (``engine.seams.RecordStore``)."""

    def __init__(self, root: Path | None = None, *, writable: bool = True) -> None:
        # root None: the user's cache, looked up per call (TUNEDSL_CACHE_DIR may change).
        # Another directory keeps its lock files beside it, in ``<root>/../locks``.
        self._root = root
        self.writable = writable
        where = "cache" if root is None else str(root)
        self.name = f"files:{where}" + ("" if self.writable else " (read-only)")

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else paths.records_dir()

    @property
    def lock_dir(self) -> Path:
        return paths.locks_dir() if self._root is None else self._root.parent / "locks"

    def get(self, digest: str) -> rec.Record | None:
        # A record of the cache found is in use: its file's time says so to `cache gc`
        # (once a day at most; a hit is asked once a process, then memory answers).
        record = rec.load_from(self.root, digest, mark_used=self.writable)
        if record is None or self.writable:
            return record
        return record.from_elsewhere()  # shipped: its failures are hints here

    def where(self, digest: str) -> str:
        """The file a record of ``digest`` is read from (for warnings)."""
        return str(rec.record_path(digest, self.root))

    def put(self, record: rec.Record) -> bool:
        if not self.writable:
            return False
        return rec.save_record(record, self._root)

    def delete(self, digest: str) -> bool:
        if not self.writable:
            return False
        return rec.remove_record_files(digest, self._root, self.lock_dir)

    def iter_records(self) -> Iterator[rec.Record]:
        """Every valid record (files that are not are skipped with one warning each)."""
        for path in rec.iter_record_files([self.root]):
            try:
                yield rec.read_record_file(path)
            except (OSError, rec.InvalidRecord) as err:
                warn_once(f"bad:{path}", f"ignoring tuning record {path}: {err}")

    def lock(self, digest: str, timeout_s: float) -> AbstractContextManager[bool]:
        if not self.writable:
            return _no_lock()
        return rec.record_lock(digest, timeout_s, self.lock_dir)


@contextmanager
def _no_lock() -> Iterator[bool]:
    yield False


def default_stores() -> list[FileRecordStore]:
    """The cache, then each ``TUNEDSL_RECORDS_PATH`` directory (read-only), in lookup order."""
    shipped = rec.extra_record_dirs()
    for directory in shipped:
        _say_if_no_directory(directory)
    return [FileRecordStore(), *(FileRecordStore(d, writable=False) for d in shipped)]


def _say_if_no_directory(path: Path) -> None:
    """One warning for a ``TUNEDSL_RECORDS_PATH`` entry that is missing or not a directory
    (a bundle, a rule file): no record or rule is ever read from it, and nothing else would
    say so."""
    import os
    import stat

    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except FileNotFoundError:
        warn_once(f"records-path:{path}", f"TUNEDSL_RECORDS_PATH names {path}, which does "
                  "not exist: no records are read from it; create it, or take it off the path",
                  stacklevel="user")  # fmt: skip
        return
    except OSError:  # unreadable: the trust check of the directory says why
        return
    below = _files_one_level_down(path) if is_dir else None
    if below is not None:  # a cache root (records/), or the parent of a rules --out
        warn_once(f"records-path:{path}", f"TUNEDSL_RECORDS_PATH names {path}, which holds "
                  f"no record or rule file, but {below} does: records and rules are read "
                  "only from the files of the path's directories themselves, not from their "
                  f"subdirectories, so nothing is read from it; name {below} instead",
                  stacklevel="user")  # fmt: skip
    elif not is_dir and path.name.endswith(rec.RULE_SUFFIX):  # a rule file: its directory
        warn_once(f"records-path:{path}", f"TUNEDSL_RECORDS_PATH names {path}, a rule file: "
                  "rules and records are read only from the path's directories, so nothing "
                  f"is read from it; name its directory, {path.parent}", stacklevel="user")  # fmt: skip
    elif not is_dir:
        warn_once(f"records-path:{path}", f"TUNEDSL_RECORDS_PATH names {path}, which is not "
                  "a directory: no records are read from it; name the directory of record "
                  f"files, or for a bundle run `tunedsl cache import {path}`", stacklevel="user")  # fmt: skip


def _files_one_level_down(path: Path) -> Path | None:
    """The subdirectory of ``path`` holding record or rule files (``records/`` of a cache
    root first, then ``rules/``, then the others by name) when ``path`` holds none itself;
    None when it does, or none of its first subdirectories does."""
    import os

    def json_in(directory: str) -> tuple[bool, list[str]]:
        try:
            with os.scandir(directory) as entries:
                names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            return False, []
        found = any(name.endswith(".json") and not is_dir for name, is_dir in names)
        return found, sorted(name for name, is_dir in names if is_dir)

    found, subdirectories = json_in(os.fspath(path))
    if found:
        return None
    first = [n for n in ("records", "rules") if n in subdirectories]
    for name in (first + [n for n in subdirectories if n not in first])[:_LOOKED_BELOW]:
        if json_in(os.path.join(path, name))[0]:
            return path / name
    return None


_LOOKED_BELOW = 32  # the subdirectories of a path entry looked into, at most
