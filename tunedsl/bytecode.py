"""Content-addressed cache of expanded DSL code objects, one file per entry, per user.

Expanding a DSL module (lex, parse, rewrite, compile) costs milliseconds; loading its code
object back costs microseconds. Entries live in ``tunedsl.store.paths.bytecode_dir()`` and
are named by a SHA-256 *key* over everything that decides the code object:

- the source bytes (content, never modification times: mtime-keyed caches go stale),
- the filename baked into the code (see ``cache_key``),
- the tunedsl version, the grammar version and a fingerprint of the front end's own files,
- Python's bytecode magic number and the optimisation level.

An entry is ``HEADER + marshal data``; the header holds a format tag, the magic number, the
full key and a SHA-256 of the payload, and all of it is checked before ``marshal.loads``
sees a byte. Anything that does not check out (truncated, corrupt, another Python's entry,
a file or directory that is not private to this user) is a miss with exactly one
``CacheWarning``, and the entry is rebuilt. Writes are atomic (temp file in the same
directory, then ``os.replace``), so concurrent writers of one entry are harmless. A writer
killed between the two leaves its temporary file (``.tmp-*.tbc``): never read as an entry,
removed by ``clear()`` and, once it is an hour old, by the first write of a later process.

Writing is off under ``TUNEDSL_SAFE=bytecode`` or ``sys.dont_write_bytecode``; a
read-only or full cache directory turns it off for the rest of the process, with one warning.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import marshal
import os
import stat
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING

from tunedsl import knobs
from tunedsl.errors import CacheWarning
from tunedsl.store import atomic, paths
from tunedsl.warn import forget, warn_at, warn_once, warnings_at

FORMAT_TAG = b"TDSLBC\x00\x01"  # bump the last byte when the entry layout changes
ENTRY_SUFFIX = ".tbc"
TEMP_PREFIX = ".tmp-"  # a writer's temporary file: TEMP_PREFIX + random + ENTRY_SUFFIX
# A writer holds its temporary file for milliseconds; one an hour old was left by a writer
# that was killed between creating it and renaming it into place.
STALE_TEMP_AGE_S = paths.STALE_TEMP_AGE_S
_HEADER = struct.Struct("<8s4s32s32s")  # tag, magic number, key digest, payload digest
HEADER_SIZE = _HEADER.size

if TYPE_CHECKING:  # subscripting typing.Literal at import costs more than the rest here
    from typing import Literal

    WarmResult = Literal["cached", "compiled"]


class CacheStats:
    """Counters of this process's cache traffic (tests and ``tunedsl cache`` read them).

    A plain class, not a dataclass: this module is imported on every warm DSL import.
    """

    __slots__ = ("compiles", "hits", "misses", "rejected", "writes")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.hits = 0
        self.misses = 0
        self.compiles = 0
        self.writes = 0
        self.rejected = 0  # entries that existed but failed validation (each warned once)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)}" for name in self.__slots__)
        return f"CacheStats({fields})"


stats = CacheStats()

# Process-wide state: warn once about an unusable directory, then stop trying it.
_write_disabled_reason: str | None = None
_untrusted_dirs: set[str] = set()
_swept_dirs: set[str] = set()  # directories this process already swept of stale temporaries
_frontend_fingerprint: bytes | None = None


class _Rejected(Exception):
    """An entry that exists but must not be trusted; the message says why."""


def _resolve_optimize(optimize: int) -> int:
    return sys.flags.optimize if optimize == -1 else optimize


# Modules outside frontend/ that the expansion imports (its output depends on them:
# options.py names the macro keywords, options and hints; knobs.py the choices of effort= and
# search=, which a literal option is checked against). tests/unit/test_bytecode.py
# checks that this covers every tunedsl module frontend/ imports, transitively.
EXPANSION_MODULES = (
    "model/options.py",
    "model/identity.py",
    "errors.py",
    "warn.py",
    "knobs.py",
    "environ.py",
)


def digest_files() -> list[str]:
    """Every file the expansion depends on: the front end, the grammar, and
    :data:`EXPANSION_MODULES`."""
    root = os.path.dirname(os.path.abspath(__file__))
    files: list[str] = []
    for directory in (
        os.path.join(root, "frontend"),
        os.path.join(os.path.dirname(root), "grammar"),
    ):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        files.extend(
            os.path.join(directory, n)
            for n in names
            if not n.startswith(".") and n != "__pycache__"
        )
    files.extend(os.path.join(root, *m.split("/")) for m in EXPANSION_MODULES)
    return files


def _frontend_digest() -> bytes:
    """A signature of the files the expansion depends on, computed once per process.

    The version and ``GRAMMAR_VERSION`` are bumped by hand; in an editable install the front
    end changes without either moving, and stale expansions would be served. The files'
    names, sizes and modification times (:func:`digest_files`) catch such edits for the
    price of a few ``stat`` calls (hashing their contents cost more than the rest of a warm
    import).
    """
    global _frontend_fingerprint
    if _frontend_fingerprint is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        digest = hashlib.sha256()
        for path in digest_files():
            try:
                st = os.stat(path)
            except OSError:
                continue
            name = os.path.relpath(path, root)
            digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        _frontend_fingerprint = digest.digest()
    return _frontend_fingerprint


def _grammar_version() -> str:
    import tunedsl.frontend

    return str(getattr(tunedsl.frontend, "GRAMMAR_VERSION", "0"))


def cache_key(source_bytes: bytes, filename: str, *, optimize: int = -1) -> bytes:
    """The 32-byte key of the code object compiled from ``source_bytes`` as ``filename``.

    The filename is part of the key because the expansion bakes it into the code: it is every
    code object's ``co_filename`` and the ``filename=`` constant of every site (error messages
    and records name it). The same text at two paths gives two different code objects.
    """
    from tunedsl import __version__

    digest = hashlib.sha256()
    for part in (
        b"tunedsl-bytecode",
        __version__.encode(),
        _grammar_version().encode(),
        _frontend_digest(),
        importlib.util.MAGIC_NUMBER,
        str(_resolve_optimize(optimize)).encode(),
        os.fsencode(filename),
        hashlib.sha256(source_bytes).digest(),
    ):
        digest.update(len(part).to_bytes(4, "little") + part)  # length-prefixed: unambiguous
    return digest.digest()


def entry_path(key: bytes) -> Path:
    return paths.bytecode_dir() / (key.hex() + ENTRY_SUFFIX)


def _warn(message: str, filename: str) -> None:
    """A ``CacheWarning`` at the first line of the module being cached (``filename``): the
    frames between here and the user's are tunedsl's and the import system's."""
    warn_at(message, CacheWarning, filename, 1)


def _warn_once_at(filename: str, topic: str, message: str) -> None:
    """``warn_once`` at the first line of the module being cached: the frames between here
    and the user's are tunedsl's and the import system's (it pointed at this module)."""
    before = warnings_at((filename, 1))
    try:
        warn_once(topic, message, stacklevel="user")
    finally:
        warnings_at(before)


def _open_dir(directory: Path, filename: str) -> int | None:
    """A descriptor of the entries' directory (:func:`paths.open_private_dir`: the chain from
    the cache root is checked); None when it is missing, or not trusted (one warning per
    process, at ``filename``, the module being cached). The caller closes it."""
    if str(directory) in _untrusted_dirs:
        return None
    try:
        return paths.open_private_dir(directory)
    except paths.UntrustedDir as why:
        _untrusted_dirs.add(str(directory))
        _warn_once_at(
            filename,
            f"bytecode:untrusted:{directory}",
            f"bytecode cache directory {directory} is not private to this user ({why}); not "
            "using it. Fix its ownership and mode (chown to yourself, chmod 700), or point "
            "TUNEDSL_CACHE_DIR at a directory of your own",
        )
    except OSError:
        pass  # missing (a plain miss), or unreadable: writing it reports that
    return None


def _read_entry(dir_fd: int, path: Path, key: bytes, filename: str) -> CodeType | None:
    """The entry's code object (``path``'s name in the directory ``dir_fd``); None if there
    is no entry; _Rejected if it is not trustworthy."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path.name, flags, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return None  # no entry (or no cache directory at all): a plain miss
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW on a symbolic link
            raise _Rejected("a symbolic link") from None
        raise _Rejected(f"unreadable ({err.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        # fstat the open file, not the path: what we check is what we read.
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _Rejected("not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise _Rejected("owned by another user")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _Rejected("writable by group or others")
        data = file.read()
    if len(data) < HEADER_SIZE:
        raise _Rejected("truncated")
    tag, magic, entry_key, payload_digest = _HEADER.unpack_from(data)
    if tag != FORMAT_TAG:
        raise _Rejected("not a tunedsl bytecode entry (bad format tag)")
    if magic != importlib.util.MAGIC_NUMBER:
        raise _Rejected(f"written by another Python (magic number {magic.hex()})")
    if entry_key != key:
        raise _Rejected("stored under the wrong key")
    payload = memoryview(data)[HEADER_SIZE:]
    if hashlib.sha256(payload).digest() != payload_digest:
        raise _Rejected("corrupt or truncated (payload digest mismatch)")
    try:
        code = marshal.loads(payload)
    except (EOFError, ValueError, TypeError) as err:
        raise _Rejected(f"corrupt ({err})") from None
    if not isinstance(code, CodeType) or code.co_filename != filename:
        raise _Rejected("not the code object of this source")
    return code


def _write_entry(path: Path, key: bytes, code: CodeType) -> None:
    filename = code.co_filename
    global _write_disabled_reason
    payload = marshal.dumps(code)
    header = _HEADER.pack(
        FORMAT_TAG, importlib.util.MAGIC_NUMBER, key, hashlib.sha256(payload).digest()
    )
    try:
        try:
            directory = paths.ensure_private_dir(path.parent)
        except paths.UntrustedDir:
            directory = path.parent  # _open_dir says why, once
        dir_fd = _open_dir(directory, filename)
        if dir_fd is None:
            return
        try:
            if str(directory) not in _swept_dirs:  # once per process: writes are on misses only
                _swept_dirs.add(str(directory))
                remove_stale_temporaries(directory)
            # atomic: readers see the old entry or the whole new one; no fsync, since an
            # entry lost to a power cut is rebuilt from its source. Through the checked
            # directory's descriptor: a swapped path cannot redirect the write.
            atomic.write_bytes(
                path,
                header + payload,
                prefix=TEMP_PREFIX,
                suffix=ENTRY_SUFFIX,
                durable=False,
                dir_fd=dir_fd,
            )
        except FileNotFoundError:
            # clear() ran meanwhile and took our temporary file with the entries: this entry
            # is simply not written; the cache is still writable.
            return
        finally:
            os.close(dir_fd)
        stats.writes += 1
    except OSError as err:
        _write_disabled_reason = f"{err.strerror or err} ({path.parent})"
        _warn_once_at(
            filename,
            "bytecode:unwritable",
            f"cannot write to the bytecode cache: {_write_disabled_reason}; running without "
            "it for the rest of this process (set TUNEDSL_CACHE_DIR to a writable directory, "
            "or TUNEDSL_SAFE=bytecode to silence this)",
        )


def reset() -> None:
    """Forget this process's decisions (warned directories, writes turned off) and counters."""
    global _write_disabled_reason
    _write_disabled_reason = None
    _untrusted_dirs.clear()
    _swept_dirs.clear()
    forget("bytecode:")
    stats.reset()


def writing_enabled() -> bool:
    """Whether new entries are written (off by knob, ``-B``, or after a failed write)."""
    return not (
        sys.dont_write_bytecode or knobs.no_bytecode_cache() or _write_disabled_reason is not None
    )


def _decode(source_bytes: bytes) -> str:
    # Honours a PEP 263 coding cookie and a BOM, as Python's own loader does.
    return importlib.util.decode_source(source_bytes)


def lookup(source_bytes: bytes, filename: str, *, optimize: int = -1) -> CodeType | None:
    """The cached code object for this source at this path, or None (a miss)."""
    filename = os.path.abspath(filename)
    key = cache_key(source_bytes, filename, optimize=optimize)
    path = entry_path(key)
    dir_fd = _open_dir(path.parent, filename)
    if dir_fd is None:
        return None
    try:
        code = _read_entry(dir_fd, path, key, filename)
    except _Rejected as why:
        stats.rejected += 1
        _warn(f"bytecode cache entry {path} is {why}; ignoring it and rebuilding it", filename)
        return None
    finally:
        os.close(dir_fd)
    return code


def load_or_compile(source_bytes: bytes, filename: str, *, optimize: int = -1) -> CodeType:
    """The code object of a (DSL) module's source: from the cache, or expanded and cached.

    ``filename`` becomes the code's ``co_filename`` (made absolute). Raises
    ``TunedslSyntaxError`` (or ``SyntaxError``) for bad source; cache trouble never raises.
    """
    filename = os.path.abspath(filename)
    code = lookup(source_bytes, filename, optimize=optimize)
    if code is not None:
        stats.hits += 1
        return code
    return compile_and_store(source_bytes, filename, optimize=optimize)


def compile_and_store(source_bytes: bytes, filename: str, *, optimize: int = -1) -> CodeType:
    """Expand and compile without looking in the cache (after a miss), then store the code."""
    filename = os.path.abspath(filename)
    stats.misses += 1
    from tunedsl.frontend.compile import compile_source

    try:
        text = _decode(source_bytes)
    except UnicodeDecodeError as err:
        # As Python does: a SyntaxError naming the file and line, not a bare ValueError
        # (found by tests/reliability/test_bad_arguments.py).
        line = source_bytes.count(b"\n", 0, err.start) + 1
        raise SyntaxError(
            f"(unicode error) {err}; save the file as UTF-8 or declare its encoding (PEP 263)",
            (filename, line, 0, None),
        ) from None
    code = compile_source(text, filename, optimize=optimize)
    stats.compiles += 1
    store(source_bytes, filename, code, optimize=optimize)
    return code


def store(source_bytes: bytes, filename: str, code: CodeType, *, optimize: int = -1) -> None:
    """Write ``code`` as the entry of this source at this path (atomically; unless off)."""
    if writing_enabled():
        key = cache_key(source_bytes, os.path.abspath(filename), optimize=optimize)
        _write_entry(entry_path(key), key, code)


def warm(path: str | os.PathLike[str], *, optimize: int = -1) -> WarmResult:
    """Make sure the cache holds ``path``'s expanded code; used by ``tunedsl precompile``.

    Returns ``"cached"`` when a valid entry was already there, ``"compiled"`` when the file was
    expanded and compiled now (and written, unless writing is off). Raises ``OSError`` when
    the file cannot be read and ``TunedslSyntaxError`` when it is not valid DSL. Entries are
    keyed by the absolute path, so warm the file at the path it will be imported from.
    """
    filename = os.path.abspath(os.fspath(path))
    with open(filename, "rb") as file:
        source_bytes = file.read()
    before = stats.hits
    load_or_compile(source_bytes, filename, optimize=optimize)
    return "cached" if stats.hits > before else "compiled"


def iter_entries() -> Iterator[Path]:
    """Every entry file in the cache directory (for ``tunedsl cache``)."""
    directory = paths.bytecode_dir()
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in sorted(names):
        if name.endswith(ENTRY_SUFFIX) and not name.startswith(TEMP_PREFIX):
            yield directory / name


def clear() -> int:
    """Delete every entry and every writer's temporary file (a killed writer's, or one being
    written now: that writer then skips its entry); return how many entries were removed."""
    directory = paths.bytecode_dir()
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        if name.endswith(ENTRY_SUFFIX):
            try:
                os.unlink(directory / name)
            except OSError:
                continue
            removed += not name.startswith(TEMP_PREFIX)
    return removed


def remove_stale_temporaries(
    directory: Path | None = None, *, older_than_s: float = STALE_TEMP_AGE_S
) -> int:
    """Delete writers' temporary files not modified for ``older_than_s`` seconds (left by
    killed writers); return how many. Entries and other files are never touched."""
    directory = paths.bytecode_dir() if directory is None else directory
    return paths.remove_stale_temporaries(directory, _is_writer_temporary, older_than_s)


def _is_writer_temporary(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(ENTRY_SUFFIX)
