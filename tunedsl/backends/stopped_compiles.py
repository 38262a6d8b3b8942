"""Compiles a worker stopped over the GPU's shared memory, remembered (backends layer).

A compile worker stops a kernel that needs more shared memory than the launching GPU has
after its LLVM-IR stage (``process_compile.py``), and Triton's cache then holds nothing for
it. Without a memory of that verdict, every later compile of the same kernel and
specialization (another size in a sweep or a serving loop, the run after ``tunedsl
precompile``) ran the stage again and its tune waited for it. A verdict is kept by a digest
of everything that decides the kernel's shared memory: the kernel's source key, the
launch's signature, constexprs, attributes and options, the target, the limit, Triton's own
key (its sources and ``libtriton``) and its cache-invalidating environment; in the process,
and as ``stopped/<digest>.json`` under the cache root (private, as every cache directory),
so that a new process does not run those stages either. A missing, damaged or untrusted file
is a miss: the worker compiles, and the verdict is written again.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tunedsl.store import paths
from tunedsl.store.cache_notes import read_note, write_note

__all__ = ["digest", "known", "remember"]

_known: dict[str, tuple[int, int]] = {}  # digest -> (required, limit), this process
_KEPT = 4096  # verdicts kept in memory at most
_FILE_LIMIT = 256  # bytes: a verdict is two numbers


def digest(parts: tuple[Any, ...]) -> str:
    """The key of a compile described by ``parts`` (every field that decides its shared
    memory, none of them local to this process)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def known(key: str) -> tuple[int, int] | None:
    """``(required, limit)`` where the compile of ``key`` was stopped over the limit, in
    this process or, stored, in an earlier one; None where no verdict is known."""
    hit = _known.get(key)
    if hit is not None:
        return hit
    data = read_note(paths.stopped_compiles_dir(), f"{key}.json", _FILE_LIMIT)
    try:
        required, limit = data["required"], data["limit"]
    except (TypeError, KeyError):
        return None
    if not (type(required) is int and type(limit) is int and required > limit > 0):
        return None  # nonsense in a file of the user's own: compile and write it again
    return _keep(key, (required, limit))


def remember(key: str, required: int, limit: int) -> None:
    """Keep the verdict that the compile of ``key`` needs ``required`` bytes of shared
    memory, over ``limit``: here, and in the cache (a failure to write is no error)."""
    _keep(key, (required, limit))
    write_note(paths.stopped_compiles_dir(), f"{key}.json", {"required": required, "limit": limit})


def _keep(key: str, verdict: tuple[int, int]) -> tuple[int, int]:
    if len(_known) < _KEPT:
        _known[key] = verdict
    return verdict
