"""Where tunedsl keeps its per-user caches, and the one way to create those directories.

Layout under the cache root (``TUNEDSL_CACHE_DIR`` or platformdirs' user cache dir)::

    bytecode/   content-addressed code objects of expanded DSL modules
    records/    one JSON tuning record per (site, key)
    binaries/   the chosen variants' compiled binaries, for a warm start without triton.compile
    locks/      cross-process lock files

Directories are created with mode 0700. A directory that exists but is owned by another
user, or is writable by others, is not trusted for loading code (see ``is_private_dir``).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from tunedsl import knobs


def cache_root() -> Path:
    override = knobs.cache_dir_override()
    if override:
        return Path(override).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tunedsl", appauthor=False))


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0700 if missing; return it. May raise OSError."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def is_private_dir(path: Path) -> bool:
    """True if ``path`` is a real directory owned by this user and not writable by others."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def bytecode_dir() -> Path:
    return cache_root() / "bytecode"


def records_dir() -> Path:
    return cache_root() / "records"


def locks_dir() -> Path:
    return cache_root() / "locks"


def binaries_dir() -> Path:
    """The chosen variants' stored kernel binaries (``backends/triton_binaries.py``)."""
    return cache_root() / "binaries"


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
