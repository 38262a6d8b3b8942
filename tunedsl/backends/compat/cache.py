"""Triton's cache: its key format, file naming and stored binaries (see
``compat/__init__.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

# -- Triton's cache: key format and file naming -----------------------------------------------


def triton_cache_key(src: Any, backend: Any, options: Any, env: Mapping[str, str]) -> str:
    """Triton's cache key of a compile (``triton.runtime.cache.get_cache_key``; 3.6, 3.9)."""
    from triton.runtime.cache import get_cache_key

    return str(get_cache_key(src, backend, options, dict(env)))


def cache_key_with(fingerprint: str, src: Any, backend: Any, options: Any, env: Mapping) -> str:
    """Triton's cache-key format with ``triton_key()`` replaced by ``fingerprint``:
    ``f"{triton_key}-{src.hash()}-{backend.hash()}-{options.hash()}-{sorted env}"``
    (``get_cache_key``, 3.6.0 and 3.9.0)."""
    return f"{fingerprint}-{src.hash()}-{backend.hash()}-{options.hash()}-{sorted(env.items())!s}"


def kernel_hash(key: str) -> str:
    """``CompiledKernel.hash`` of a compile with cache key ``key``: its sha256 (3.6, 3.9)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def cache_file_stem(name: str) -> str:
    """The stem of the files ``triton.compile`` writes for a kernel: its name cut to 150
    characters (3.6.0, 3.9.0)."""
    return str(name)[:150]


def binary_extension(backend: Any) -> str:
    """The backend's binary file extension (``cubin``, ``hsaco``; 3.6.0, 3.9.0)."""
    return str(backend.binary_ext)


def triton_cache_dir() -> str | None:
    """Triton's cache directory: ``TRITON_CACHE_DIR``, else ``~/.triton/cache`` under
    ``TRITON_HOME`` or the home directory (``knobs.cache.dir``; 3.6.0, 3.9.0). None without
    Triton: nothing is compiled there then (a lock of tunedsl's cache taken without it)."""
    try:
        from triton import knobs
    except ImportError:
        return None

    directory = knobs.cache.dir
    return str(directory) if directory else None


def check_triton_cache() -> None:
    """A ``UsageError`` naming Triton's cache directory, why and the fix, when another user
    could put files there (the chain rule of tunedsl's cache; a directory not made yet is
    judged by the one it will be made in). Triton loads the binaries it finds there and, on
    a GPU, builds and loads shared libraries there: its driver's C utilities when the
    driver starts (``active_driver``), each kernel's launcher at its first load."""
    from pathlib import Path

    from tunedsl.errors import UsageError
    from tunedsl.store.paths import untrusted_place

    directory = triton_cache_dir()
    why = untrusted_place(Path(directory)) if directory else None
    if why is not None:
        raise UsageError(
            f"not compiling into Triton's cache directory {directory}: {why}, so another user "
            "could put binaries and launcher libraries there that Triton loads and runs as "
            "you; set TRITON_CACHE_DIR to a directory of your own, closed to writes by others"
        )


def triton_cache_has(key: str, name: str) -> bool:
    """True if Triton's cache dir holds the compiled kernel for cache key ``key``: the
    group file ``<stem>.json`` under the directory of ``sha256(key)``, as ``triton.compile``
    looks it up (3.6.0, 3.9.0)."""
    from triton.runtime.cache import get_cache_manager

    stem = cache_file_stem(name)
    try:
        group = get_cache_manager(kernel_hash(key)).get_group(f"{stem}.json")
    except Exception:  # a corrupt cache entry is a miss; triton.compile rewrites it
        return False
    return bool(group) and f"{stem}.json" in group


def compiled_kernel(src: Any, group: Mapping[str, str], kernel_hash_: str) -> Any:
    """A ``CompiledKernel`` from a metadata group (file name -> path), not yet loaded
    (``CompiledKernel(src, metadata_group, hash)``; 3.6.0, 3.9.0)."""
    from triton.compiler import CompiledKernel

    return CompiledKernel(src, dict(group), kernel_hash_)


def compiled_files(compiled: Any, stem: str) -> tuple[Any, str | None]:
    """``(binary, metadata JSON path)`` of a ``CompiledKernel``: ``.kernel`` and
    ``.metadata_group[f"{stem}.json"]`` (3.6.0, 3.9.0)."""
    group = getattr(compiled, "metadata_group", None) or {}
    return compiled.kernel, group.get(f"{stem}.json")


def compiled_binary(compiled: Any) -> bytes:
    """The device binary of a ``CompiledKernel`` (``.asm["cubin"]``/``["hsaco"]``)."""
    binary = compiled.asm.get("cubin") or compiled.asm.get("hsaco") or b""
    return binary.encode() if isinstance(binary, str) else bytes(binary)


def is_compiler_library(record_path: str) -> bool:
    """Whether a path of Triton's ``dist-info/RECORD`` is its compiler library
    (``triton/_C/libtriton.*.so``; 3.6.0, 3.9.0 wheels)."""
    name = record_path.rsplit("/", 1)[-1]
    return "/_C/" in record_path and name.startswith("libtriton.") and ".so" in name


def compile_disabled() -> str | None:
    """Why Triton's knobs forbid bypassing ``triton.compile`` (None: they do not): a JIT
    cache or post-compile hook, a stages-inspection hook, ``always_compile`` or a kernel
    ``override`` (``knobs.runtime``/``knobs.compilation``; 3.6.0, 3.9.0)."""
    from triton import knobs as tknobs

    runtime, compilation = tknobs.runtime, tknobs.compilation
    for owner, name in (
        (runtime, "jit_cache_hook"),
        (runtime, "jit_post_compile_hook"),
        (runtime, "add_stages_inspection_hook"),
        (compilation, "always_compile"),
        (compilation, "override"),
    ):
        if getattr(owner, name, None):
            return name
    return None
