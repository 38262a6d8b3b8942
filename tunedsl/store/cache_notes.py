"""Small facts kept in the private cache as JSON files (storage layer): what a later process
may reuse instead of working it out again (a compile stopped over shared memory, Triton's
own key). A note is read only from a directory of this user's that no one else can write,
from a file no one else could have written; anything missing, damaged or untrusted is no
note. A note is written whole or not at all, and failing to write one is no error."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from tunedsl.store import atomic, paths

__all__ = ["read_note", "write_note"]


def read_note(directory: Path, name: str, limit: int) -> Any:
    """The JSON value of ``directory / name`` (at most ``limit`` bytes); None where there is
    none to trust."""
    try:
        fd = paths.open_private_dir(directory)
    except OSError:  # none written yet, or not a directory this user can trust
        return None
    try:
        return json.loads(atomic.read_regular_file(name, limit, dir_fd=fd, private=True))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def write_note(directory: Path, name: str, value: Any) -> None:
    """Keep ``value`` as ``directory / name``, making the directory where it is missing."""
    with contextlib.suppress(OSError):
        fd = paths.open_or_make_private_dir(directory)
        try:
            atomic.write_json(directory / name, value, durable=False, dir_fd=fd)
        finally:
            os.close(fd)
