"""Persistent tuning records: one JSON file per (site, key), validated strictly on load.

A record is named by its key digest (``records/<digest>.json``) and holds the chosen
configuration, every configuration's timing or failure reason, the key in readable form,
the device, the versions, how long tuning took and when, and what ``tunedsl precompile
--replay`` needs to recompile without the user's script (kernel module, qualname, file,
source hash, the Triton signature of each argument, each configuration's launch options).

Loading never executes code (plain ``json``); anything unexpected (bad JSON, wrong types,
a future schema) is a miss with one ``CacheWarning``. Writes go to a temporary file in the
same directory and ``os.replace`` it, under a per-digest file lock, so two processes
tuning the same key leave one valid record. A read-only or full cache directory means
tuning results are kept in memory only, with one warning.

Extra read-only record directories (records shipped with an application) are searched
after the cache: ``TUNEDSL_RECORDS_PATH=dir1:dir2``. Their records are never copied into the
cache, and one newer than the cache's record of the same key wins. Every record file must be
owned by this user (or root) and closed to writes by group and others.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tunedsl import knobs
from tunedsl.model.record import (  # noqa: F401 (re-exported: the store's records)
    KEYED_TOOLS,
    SCHEMA_VERSION,
    STATUSES,
    ConfigResult,
    InvalidRecord,
    Record,
    keyed_toolchain,
)
from tunedsl.store import atomic, paths
from tunedsl.warn import warn_once

#: The single-document bundle format {"tunedsl_records": 1, "records": [...]} (still read, up
#: to MAX_BUNDLE_BYTES; ``cache export`` and ``sweep --bundle`` write JSON Lines, LINES_VERSION).
BUNDLE_VERSION = 1
#: The streamed bundle format: a header line {"tunedsl_records": 2}, then a record a line.
LINES_VERSION = 2
MAX_BUNDLE_BYTES = 512 * 1024 * 1024
_UNWRITABLE = "unwritable"  # the topic of every "cannot write to the cache" warning


def extra_record_dirs() -> list[Path]:
    """``TUNEDSL_RECORDS_PATH``: read-only directories of shipped records. An entry naming
    the directory this process writes its records to is that directory, read first
    already: not a second, read-only source of the same files."""
    own = os.path.normpath(os.path.abspath(paths.records_dir()))
    return [d for d in _extra_record_dirs() if os.path.normpath(os.path.abspath(d)) != own]


@knobs.per_environ  # asked on every miss: parsed again only when the environment changed
def _extra_record_dirs() -> tuple[Path, ...]:
    return tuple(Path(p).expanduser() for p in knobs.records_path())


def bundle_lines(records: Iterable[Record]) -> Iterator[bytes]:
    """The lines of a JSON Lines bundle of ``records``: its header, then a record a line."""
    yield json.dumps({"tunedsl_records": LINES_VERSION}).encode() + b"\n"
    for record in records:
        yield json.dumps(record.to_json(), separators=(",", ":")).encode() + b"\n"


def record_file_name(digest: str) -> str:
    """The name of ``digest``'s record file in a records directory."""
    return f"{digest}.json"


def record_path(digest: str, root: Path | None = None) -> Path:
    return (root or paths.records_dir()) / record_file_name(digest)


#: The largest record file read (a real one is a few KiB per configuration); anything
#: bigger is not a record, and reading it whole could exhaust memory.
MAX_RECORD_BYTES = 16 * 1024 * 1024


def parse_json(data: bytes) -> Any:
    """``json.loads`` where every failure (bad UTF-8, bad JSON, hostile nesting, memory) is
    an InvalidRecord."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise InvalidRecord(f"not UTF-8 text: {err}") from None
    except json.JSONDecodeError as err:
        raise InvalidRecord(f"not valid JSON: {err}") from None
    except RecursionError:  # hostile nesting ([[[[...]]]]): a bad record, not a crash
        raise InvalidRecord("not a record: JSON nested too deeply") from None
    except MemoryError:
        raise InvalidRecord("not a record: too large to parse") from None
    except ValueError as err:  # an integer past Python's digit limit for int(str)
        raise InvalidRecord(f"not a record: {err}") from None


def read_record_file(path: Path) -> Record:
    """Load one file; raise InvalidRecord (bad content) or OSError (unreadable, a symbolic
    link, not a regular file, too large, or a file another user could have written)."""
    data = atomic.read_regular_file(path, MAX_RECORD_BYTES, private=True)
    return Record.from_json(parse_json(data))


def open_trusted_dir(root: Path) -> int | None:
    """A descriptor of the records directory ``root``, or None: missing (a miss) or not
    trusted (one warning). Records directories get bytecode's trust rule, checked along the
    chain from the cache root (``paths.open_private_dir``); a ``TUNEDSL_RECORDS_PATH``
    directory may also belong to root (records installed with an application), still
    closed to writes by others. The caller closes it."""
    try:
        return paths.open_private_dir(root, root_may_own=root != paths.records_dir())
    except paths.UntrustedDir as why:
        warn_once(
            f"untrusted:{root}",
            f"tuning records directory {root} is not private to this user ({why}); not "
            "using it. Fix its ownership and mode (chown to yourself, chmod 700 / chmod "
            "go-w), or point TUNEDSL_CACHE_DIR or TUNEDSL_RECORDS_PATH elsewhere",
            stacklevel="user",
        )
    except OSError:
        pass  # missing, or unreadable: a miss (writing it reports that)
    return None


def trusted_dir(root: Path) -> bool:
    """Whether ``root`` is missing or trusted (:func:`open_trusted_dir`; one warning when
    it is not)."""
    if not os.path.lexists(root):
        return True
    fd = open_trusted_dir(root)
    if fd is None:
        return False
    os.close(fd)
    return True


def load_record(digest: str) -> Record | None:
    """The record for ``digest`` from the cache or TUNEDSL_RECORDS_PATH; None on a miss.
    The cache's record wins unless the first shipped record of ``digest`` is newer (as the
    layered store decides, ``store/layered.py``).

    A file that exists but is unusable (corrupt, wrong shape, future schema, or saved under
    another digest) is a miss with one CacheWarning; so is a directory that is not private.
    """
    mine = load_from(paths.records_dir(), digest)
    for root in extra_record_dirs():
        shipped = load_from(root, digest)
        if shipped is not None:
            newer = mine is None or shipped.timestamp > mine.timestamp
            return shipped.from_elsewhere() if newer else mine
    return mine


def load_from(root: Path, digest: str, mark_used: bool = False) -> Record | None:
    """The record of ``digest`` in the directory ``root``, or None (a miss; one warning for
    anything unusable). ``mark_used``: a record found moves its file's modification time to
    now (at most once a day), the last use ``tunedsl cache gc`` judges by."""
    # A key never tuned has no file: one stat answers that miss, before the directory chain
    # is opened and checked (which a file that exists always is, before it is read).
    if not _lexists(f"{root}{os.sep}{record_file_name(digest)}"):
        return None
    dir_fd = open_trusted_dir(root)
    if dir_fd is None:
        return None
    path = record_path(digest, root)
    try:
        data = atomic.read_regular_file(path.name, MAX_RECORD_BYTES, dir_fd=dir_fd, private=True)
        record = Record.from_json(parse_json(data))
        if mark_used and record.digest == digest:
            _mark_used(path.name, dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        # No record, or no records directory at all (the cache path runs through a
        # regular file): a plain miss; save_record warns once that it cannot write.
        return None
    except (OSError, InvalidRecord) as err:
        warn_once(f"bad:{path}", f"ignoring tuning record {path}: {err}")
        return None
    finally:
        os.close(dir_fd)
    if record.digest != digest:
        warn_once(f"bad:{path}", f"ignoring tuning record {path}: it names another key")
        return None
    return record


#: A record file's modification time is its last use: written, imported, or found by a run's
#: lookup (moved to now at most once in this many seconds, so a run's first look-up of a key
#: costs one ``stat`` and, once a day, one ``utime``). ``tunedsl cache gc`` reads it.
MARK_USED_EVERY_S = 24 * 3600.0


def _mark_used(name: str, dir_fd: int) -> None:
    """Move the modification time of the record file ``name`` (in the directory ``dir_fd``)
    to now, unless it was moved within ``MARK_USED_EVERY_S``. Never through a symbolic
    link; a file this user may not touch (a root-owned record) keeps its time."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime > MARK_USED_EVERY_S:
            os.utime(name, dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass  # a read-only cache: gc then judges by when the record was written


def absence_check(roots: Sequence[Path]) -> Callable[[str, str], bool]:
    """A function that says whether no directory of ``roots`` has a file for the record of
    either of two digests (a key's, and its space's own: True, none has; ``load_from``'s
    first test, without reading or trusting anything): a caller that meets many new keys
    asks it before ``load_from``."""
    prefixes = tuple(f"{root}{os.sep}" for root in roots)
    suffix = record_file_name("")  # a name is the digest and this (asked on every miss)
    exists = _lexists
    if len(prefixes) == 2 and exists is _no_follow_exists:  # the cache's and one shipped
        mine, shipped = prefixes
        access, present = os.access, os.F_OK

        def absent_of_two(digest: str, other: str) -> bool:  # (_no_follow_exists, inlined)
            name, other = digest + suffix, other + suffix
            return not (
                access(mine + name, present, follow_symlinks=False)
                or access(shipped + name, present, follow_symlinks=False)
                or access(mine + other, present, follow_symlinks=False)
                or access(shipped + other, present, follow_symlinks=False)
            )

        return absent_of_two

    def absent(digest: str, other: str) -> bool:
        for name in (digest + suffix, other + suffix):
            for prefix in prefixes:
                if exists(prefix + name):
                    return False
        return True

    return absent


def _no_follow_exists(path: str) -> bool:
    return os.access(path, os.F_OK, follow_symlinks=False)


# ``os.path.lexists``, where the platform allows without raising and catching an exception
# for a missing file (the common answer: asked per records directory on every miss).
_lexists = _no_follow_exists if os.access in os.supports_follow_symlinks else os.path.lexists


# Killed writers' temporaries are never read as records (their names start with a dot and
# end in .tmp); the first save of a process sweeps the old ones.
_swept = False


def is_writer_temporary(name: str) -> bool:
    """True for the names ``atomic.write_json`` gives the temporary files of records."""
    return name.startswith(".") and name.endswith(".tmp") and ".json." in name


def remove_stale_temporaries(
    root: Path | None = None, older_than_s: float = paths.STALE_TEMP_AGE_S
) -> int:
    """Delete record writers' temporary files not modified for ``older_than_s`` seconds."""
    root = paths.records_dir() if root is None else root
    return paths.remove_stale_temporaries(root, is_writer_temporary, older_than_s)


def save_record(record: Record, root: Path | None = None) -> bool:
    """Write atomically into ``root`` (default: the cache's records directory); on a
    read-only or full directory warn once and return False."""
    global _swept
    where = paths.records_dir() if root is None else root
    try:
        try:
            directory = paths.ensure_private_dir(where)
        except paths.UntrustedDir:
            directory = where  # open_trusted_dir says why, once
        dir_fd = open_trusted_dir(directory)
        if dir_fd is None:
            return False
        try:
            if root is None and not _swept:
                _swept = True
                remove_stale_temporaries(directory)
            path = record_path(record.digest, directory)
            atomic.write_json(path, record.to_json(), dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as err:
        warn_once(
            _UNWRITABLE if root is None else f"{_UNWRITABLE}:{root}",
            f"cannot write tuning records to {where} ({err}): tuning results are kept for "
            f"this process only, and every new process tunes again; {_fix(root)}",
            stacklevel="user",
        )
        return False
    return True


def _fix(where: Path | None) -> str:
    """How to give tunedsl a cache it can write (``where``: the directory that failed)."""
    root = paths.cache_root()
    if where is not None and where.parent != root:
        return f"make {where} a directory this user owns and can write"
    return f"make {root} a directory this user owns and can write, or set TUNEDSL_CACHE_DIR to one"


@contextlib.contextmanager
def record_lock(
    digest: str, timeout_s: float | None = None, lock_dir: Path | None = None
) -> Iterator[bool]:
    """Hold the cross-process lock of one key while it is tuned; yields False when no lock
    could be taken (unwritable cache: tuning goes ahead unlocked) or when another process
    held it for ``timeout_s`` (default ``TUNEDSL_LOCK_TIMEOUT``). While waiting, who holds
    it is printed after a couple of seconds and then periodically (``store/locks.py``).
    ``lock_dir``: where the lock files are (default: the cache's locks directory)."""
    from tunedsl import knobs
    from tunedsl.store.locks import key_lock

    wait_s = knobs.lock_timeout_s() if timeout_s is None else timeout_s
    try:
        locks = paths.locks_dir() if lock_dir is None else lock_dir
        # UntrustedDir says which directory, and why; nothing is created inside one.
        os.close(paths.open_or_make_private_dir(locks))
        held = key_lock(lock_path(digest, locks), f"key {digest[:12]}", wait_s)
        got = held.__enter__()
    except Exception as err:
        # Same topic as save_record's warning: one unwritable cache is one warning, so it
        # says here whether the records can be written.
        try:
            kept = os.access(paths.ensure_private_dir(paths.records_dir()), os.W_OK)
        except OSError:
            kept = False
        kept_where = "written to the records directory" if kept else "kept for this process only"
        warn_once(
            _UNWRITABLE,
            f"cannot lock the tuning cache ({err}): this process tunes without a lock (other "
            f"processes may tune the same key at the same time), and results are {kept_where}; "
            f"{paths.untrusted_fix() if isinstance(err, paths.UntrustedDir) else _fix(lock_dir)}",
            stacklevel="user",
        )
        yield False
        return
    try:
        yield got
    finally:
        held.__exit__(None, None, None)


def lock_path(digest: str, lock_dir: Path | None = None) -> Path:
    return (lock_dir or paths.locks_dir()) / f"{digest}.lock"


def remove_record_files(
    digest: str, root: Path | None = None, lock_dir: Path | None = None
) -> bool:
    """Remove the record of ``digest`` in ``root`` (default: the cache's), and its lock
    files unless another process holds the lock. Only a regular file named by tunedsl, in a
    records directory that is a real, private directory, is removed: never anything through
    a symbolic link. True when a record was removed."""
    root = paths.records_dir() if root is None else root
    removed = False
    if paths.is_private_dir(root):
        path = record_path(digest, root)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
                removed = True
        except OSError:
            pass
    lock_dir = paths.locks_dir() if lock_dir is None else lock_dir
    if paths.is_private_dir(lock_dir):
        from tunedsl.store.locks import remove_free_lock

        remove_free_lock(lock_path(digest, lock_dir))
    return removed


def is_record_name(name: str) -> bool:
    """True for the names tunedsl gives record files: ``<sha256 hex>.json``."""
    stem, dot, ext = name.partition(".")
    return dot == "." and ext == "json" and len(stem) == 64 and all(c in _HEX for c in stem)


_HEX = frozenset("0123456789abcdef")


#: The suffix of rule files (``store/rules.py``), shipped beside records: no record.
RULE_SUFFIX = ".rule.json"


def iter_record_files(roots: list[Path] | None = None) -> Iterator[Path]:
    """The record files of ``roots`` (default: the cache), trusted directories only."""
    for root in roots if roots is not None else [paths.records_dir()]:
        if root.is_dir() and trusted_dir(root):
            yield from sorted(p for p in root.glob("*.json") if not p.name.endswith(RULE_SUFFIX))


# The record directories' signature, and the sites of their records, by directories: site ->
# (file, the kernel's source hash, the launch) of each (one scan of the directories for every
# site, made on a miss that no record or rule decides, for each site once).
_sites: dict[tuple[str, ...], tuple[tuple[Any, ...], dict[str, list[tuple[Path, Any, Any]]]]] = {}


def records_of_renamed_sites(site: str, kernel: Mapping[str, Any]) -> list[tuple[Path, str]]:
    """The trusted, valid record files of the ``TUNEDSL_RECORDS_PATH`` directories for a site
    in a file of another name whose function, kernel (its source) and launch are ``site``'s
    (``kernel``: its context's), with that site: its file renamed since they were measured.
    A site's identity holds its file's name, so they decide nothing for it."""
    index = _site_index(extra_record_dirs())
    found = renamed_sites(site, kernel, index, lambda item: item[1:])
    return [(item[0], other) for other, item in found]


def records_of_other_kernels(
    site: str, kernel: Mapping[str, Any], roots: Sequence[Path]
) -> list[tuple[Path, Any, Any]]:
    """(file, the kernel's source hash, the launch) of the trusted, valid record files of
    ``roots`` for ``site`` measured on another version of its kernel: its source (or a
    function or value it reads) or launch (``kernel``: its context's now) edited since."""
    same = (kernel.get("source_hash"), kernel.get("launch"))
    return [item for item in _site_index(roots).get(site, ()) if item[1:] != same]


def renamed_sites(
    site: str,
    kernel: Mapping[str, Any],
    index: Mapping[str, Sequence[Any]],
    made_by: Callable[[Any], tuple[Any, Any]],
) -> list[tuple[str, Any]]:
    """``(other site, item)`` of ``index`` (site -> items) for the sites of ``site``'s
    function in a file of another name whose items ``made_by`` (their kernel source's hash
    and launch) match ``kernel``'s: records or rules of a file renamed since."""
    _file, sep, rest = site.partition(":")
    if not sep or not rest:  # a site named by name=: no file in its identity
        return []
    same = (kernel.get("source_hash"), kernel.get("launch"))
    return [
        (other, item)
        for other, items in index.items()
        if other != site and other.partition(":")[2] == rest
        for item in items
        if tuple(made_by(item)) == same
    ]


def _site_index(roots: Sequence[Path]) -> dict[str, list[tuple[Path, Any, Any]]]:
    """Every trusted, valid record file of ``roots`` by its site, read again when one of the
    directories changes (its mtime moves when a file comes or goes)."""
    signature = tuple((os.fspath(root), _dir_stat(root)) for root in roots)
    names = tuple(os.fspath(root) for root in roots)
    index = _sites.get(names)
    if index is None or index[0] != signature:
        found: dict[str, list[tuple[Path, Any, Any]]] = {}
        for path in iter_record_files(list(roots)):
            try:
                record = read_record_file(path)
            except (OSError, ValueError):
                continue  # a lookup of its own key warns about a damaged record
            kernel = record.kernel
            entry = (path, kernel.get("source_hash"), kernel.get("launch"))
            found.setdefault(record.site, []).append(entry)
        if len(_sites) >= 8:  # the path and the cache: a few sets of directories at most
            _sites.clear()
        index = _sites[names] = (signature, found)
    return index[1]


def _dir_stat(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_mtime_ns, st.st_ctime_ns)


def this_user() -> str:
    """Who measures here, for ``Record.measured_by``: a digest of the user id and host name
    (a record says it was measured by this user on this machine without naming either)."""
    import hashlib
    import socket

    uid = os.getuid() if hasattr(os, "getuid") else 0
    return hashlib.sha256(f"{uid}@{socket.gethostname()}".encode()).hexdigest()[:16]


def now() -> float:
    return time.time()
