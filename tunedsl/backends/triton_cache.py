"""Triton's cache directory as tunedsl compiles into it: whether an entry is there, the
cross-process lock of one entry, and whether the directory may be trusted at all.

Triton loads the binaries it finds there and, on a GPU, builds and then imports launcher
modules (shared libraries) there: a directory another user can write (a shared
``TRITON_CACHE_DIR``) would run their code as this user, and a cross-compile put there is
one they can replace before a later run loads it. Every compile tunedsl drives checks it
first (:func:`check_triton_cache`); ``tunedsl precompile --target`` before any work; and
Triton's driver is started only through ``compat.active_driver``, which checks it first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tunedsl.backends import compat
from tunedsl.store.locks import file_lock

__all__ = ["check_triton_cache", "triton_cache_has", "triton_cache_lock"]


def check_triton_cache() -> None:
    """A ``UsageError`` naming Triton's cache directory, why and the fix, when another user
    could put files there (``compat.check_triton_cache``)."""
    compat.check_triton_cache()


def triton_cache_has(key: str, name: str) -> bool:
    """True if Triton's cache dir holds the compiled kernel for cache key ``key``."""
    return compat.triton_cache_has(key, name)


@contextmanager
def triton_cache_lock(key: str) -> Iterator[None]:
    """Cross-process lock for one Triton cache entry (one empty lock file per entry, like
    Triton's own cache dir has one directory per entry; threads of one process compiling
    different variants never wait for each other). A holder that hangs is waited for half the
    compile's timeout (``compile_pool.job_timeout_s``: ``tunedsl precompile --timeout``, else
    ``TUNEDSL_CONFIG_TIMEOUT``), then the compile goes ahead without it. Raises
    :func:`check_triton_cache`'s error first, before anything is compiled there."""
    import hashlib

    from tunedsl.backends.compile_pool import job_timeout_s

    check_triton_cache()
    name = f"triton-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}"
    with file_lock(name, timeout_s=job_timeout_s() / 2):
        yield
