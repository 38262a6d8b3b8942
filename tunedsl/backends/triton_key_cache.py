"""Triton's own key, kept between processes (backends layer).

Every compile's cache key starts with ``triton_key()``: Triton's version and a sha256 of its
compiler sources and shared library, computed once per process (0.36-0.5 s), on the way of
a process's first tune, whose compile jobs carry it (``process_compile.py``). tunedsl keeps
the key in its cache root (``triton_key.json``, private as the rest of it) beside a
fingerprint of the Triton installation that made it: the version, and the path, size,
modification time and inode of every file in Triton's package directory and in the
directories linked into it (bytecode caches aside), a superset of what ``triton_key()``
reads. A later process whose fingerprint is the same takes the stored key instead of
hashing; reinstalling, upgrading or editing Triton, or a backend installed into its package,
changes the fingerprint, and the key is hashed and stored again. A missing, damaged or
untrusted file is the hash as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re

from tunedsl.backends import compat
from tunedsl.store import paths
from tunedsl.store.cache_notes import read_note, write_note

__all__ = ["store", "use_stored"]

_NAME = "triton_key.json"
_FILE_LIMIT = 1 << 20  # bytes: a key is the version and a digest per source file
_KEY_SHAPE = re.compile(r"[0-9A-Za-z.+_]+(-[0-9a-f]{64})+")
_settled: list[str] = []  # this process's key, once taken from the store or stored


@functools.lru_cache(maxsize=1)
def fingerprint() -> str | None:
    """The installed Triton's fingerprint (see the module docstring); None where Triton's
    package directory cannot be read."""
    try:
        import triton
    except ImportError:
        return None
    return fingerprint_of(os.path.dirname(os.path.abspath(triton.__file__)), triton.__version__)


def fingerprint_of(root: str, version: str) -> str | None:
    """The fingerprint of the Triton package at ``root``: every file's path, size,
    modification time and inode (bytecode caches aside); None where the directory cannot be
    read or holds no ``_C/libtriton.*`` (a zipped or unusual installation, whose changes
    the walk would not see)."""
    digest = hashlib.sha256(f"triton=={version}\n{root}\n".encode())
    library = False
    walked: set[tuple[int, int]] = set()  # directories seen: a linked cycle ends
    try:
        # Linked directories are followed: a Triton installed from its sources links its
        # backends into the package, and triton_key() reads the files behind the link.
        for directory, subdirs, files in os.walk(root, followlinks=True):
            here = os.stat(directory)
            if (here.st_dev, here.st_ino) in walked:
                subdirs[:] = []
                continue
            walked.add((here.st_dev, here.st_ino))
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(files):
                st = os.stat(os.path.join(directory, name))
                digest.update(
                    f"{directory}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode()
                )
                library |= name.startswith("libtriton.") and os.path.basename(directory) == "_C"
    except OSError:
        return None
    return digest.hexdigest() if library else None


def _is_key_of(key: str) -> bool:
    """Whether ``key`` has the shape of a key of the installed Triton: its version, then a
    sha256 per file hashed."""
    import triton

    return key.startswith(str(triton.__version__)) and _KEY_SHAPE.fullmatch(key) is not None


def use_stored() -> bool:
    """Answer this process's ``triton_key()`` with the stored key where it was made by this
    very Triton installation; True when it does."""
    if _settled:
        return True
    mark = fingerprint()
    if mark is None:
        return False
    data = read_note(paths.cache_root(), _NAME, _FILE_LIMIT)
    key = data.get("key") if isinstance(data, dict) and data.get("fingerprint") == mark else None
    if not isinstance(key, str) or not _is_key_of(key):
        return False
    compat.use_triton_key(key)
    _settled.append(key)
    return True


def store() -> None:
    """Keep this process's ``triton_key()`` for later processes (after it was hashed here;
    nothing when it came from the store). A failure to write is no error."""
    if _settled:
        return
    mark = fingerprint()
    if mark is None:
        return
    key = compat.triton_key()
    if not _is_key_of(key):
        return  # a Triton whose key this module does not know how to check
    write_note(paths.cache_root(), _NAME, {"fingerprint": mark, "key": key})
    _settled.append(key)
