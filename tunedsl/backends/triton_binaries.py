"""Stored kernel binaries: a warm process loads the chosen variant without ``triton.compile``.

Triton's own cache needs ``triton.compile`` to find a kernel, and that computes
``triton_key()``: a sha256 of all of Triton's sources and of ``libtriton`` (about 0.5 s
per process). tunedsl keeps its own copy of each launched variant that came from a tuning
decision (Triton's metadata JSON and the cubin/hsaco) under ``binaries/<key>/`` in the
cache root, keyed by Triton's cache key with ``triton_key()`` replaced by
:func:`triton_fingerprint`:

    sha256(fingerprint - ASTSource.hash() - backend.hash() - options.hash() - env vars)

The ``ASTSource`` and options are rebuilt the way ``JITFunction.run`` builds them (Triton's
binder and ``_pack_args`` on the real arguments), so a different specialization (dtype,
alignment, constexpr, int class, launch option, Triton environment variable, ptxas) is a
different key. Before storing, the rebuilt key is checked against the ``CompiledKernel``
the JIT produced (``sha256(get_cache_key(...)) == compiled.hash``): nothing is stored
unless the reconstruction is exactly Triton's.

The fingerprint hashes Triton's version, its ``dist-info/RECORD`` (the sha256 of every
installed file, libtriton included) and the size and modification time of every listed
file, so reinstalling, upgrading or editing Triton in place changes it. Without a usable
RECORD (an editable or source install) there is no fingerprint and nothing is stored or
loaded. A stored binary is verified (sizes, sha256, metadata hash, name and target)
before use; anything wrong is a miss with one ``CacheWarning``: the entry is removed, the
JIT compiles, and the fresh binary is stored again.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import os
import shutil
import stat
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedsl.backends import compat
from tunedsl.store import atomic, paths
from tunedsl.warn import warn_once

FORMAT = 1
MANIFEST = "manifest.json"

# Binaries loaded from the store in this process (tests and benchmarks read it).
stats = {"loaded": 0, "stored": 0}


binaries_dir = paths.binaries_dir  # named in store/paths.py with every cache directory


# -- the fingerprint of the installed Triton ----------------------------------------------


@functools.lru_cache(maxsize=1)
def triton_fingerprint() -> str | None:
    """A cheap content-based stand-in for ``triton_key()``; None when it cannot be trusted."""
    import triton

    return fingerprint_of(Path(triton.__file__).parent, triton.__version__)


def _record_file(package_dir: Path, version: str) -> Path | None:
    site = package_dir.parent
    exact = site / f"{package_dir.name}-{version}.dist-info" / "RECORD"
    if exact.is_file():
        return exact
    found = sorted(site.glob(f"{package_dir.name}-*.dist-info/RECORD"))
    return found[0] if len(found) == 1 else None


def fingerprint_of(package_dir: Path, version: str) -> str | None:
    """Fingerprint of the package installed at ``package_dir`` (e.g. ``.../site-packages/
    triton``): None without a RECORD that lists the compiler library with its hash, or when
    a listed file is missing or has another size than at install time."""
    record = _record_file(package_dir, version)
    if record is None:
        return None
    try:
        data = record.read_bytes()
    except OSError:
        return None
    site = package_dir.parent
    prefix = package_dir.name + "/"
    digest = hashlib.sha256(f"{package_dir.name}=={version}\n".encode())
    digest.update(data)
    has_library = False
    for row in csv.reader(io.StringIO(data.decode("utf-8", "replace"))):
        if len(row) < 3 or not row[0].startswith(prefix) or not row[1].startswith("sha256="):
            continue
        try:
            st = os.stat(site / row[0])
        except OSError:
            return None  # a broken installation: trust nothing
        if row[2].isdigit() and int(row[2]) != st.st_size:
            return None  # changed since it was installed
        digest.update(f"{row[0]}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        has_library = has_library or compat.is_compiler_library(row[0])
    return digest.hexdigest() if has_library else None


# -- the key of one launch ----------------------------------------------------------------


@dataclass
class LaunchSource:
    """What ``JITFunction.run`` would compile for one launch, and its stored-binary key."""

    src: Any  # triton.compiler.ASTSource
    backend: Any
    options: Any  # the backend's parsed options
    env: dict[str, str]
    target: Any
    key: str
    fingerprint: str = ""  # the installed Triton's (``triton_fingerprint``) it was keyed with


def launch_source(
    kernel: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    *,
    target: str | Any | None = None,
) -> LaunchSource | None:
    """Rebuild the ``ASTSource`` and options of ``kernel[grid](*args, **kwargs, **options)``
    on the current device (or a named ``target`` such as ``"cuda:90"``, for tests); None
    when there is no fingerprint or Triton's knobs ask for a real compile (hooks,
    ``TRITON_ALWAYS_COMPILE``, kernel overrides).

    Per kernel and target the backend and Triton's binder are made once, and a launch that
    Triton's own kernel table would key alike (its specialization and options) with the same
    environment reuses the source built first: every new size of one specialization (each a
    new key to a site) costs a binder call, not a rebuilt ``ASTSource`` and its hash."""
    fingerprint = triton_fingerprint()
    if fingerprint is None or compat.compile_disabled() is not None:
        return None
    from triton.compiler import ASTSource, make_backend

    from tunedsl.backends.triton_compile import compile_lock, parse_target, unwrap_jit

    jit_fn = unwrap_jit(kernel)
    target = compat.current_target() if target is None else parse_target(target)
    with compile_lock:  # binder creation execs generated code
        per_target = _made.get(jit_fn)
        if per_target is None:
            per_target = _made.setdefault(jit_fn, {})
        made = per_target.get(target)
        if made is None:
            backend = make_backend(target)
            made = per_target[target] = (backend, compat.make_binder(jit_fn, backend), {}, {})
    backend, binder, sources, key_strings = made
    kwargs = compat.with_heuristics(kernel, args, kwargs, options)
    run_kwargs = compat.run_kwargs(jit_fn, kwargs, options)
    bound_args, specialization, bound_options = binder(*args, **run_kwargs)
    if len(key_strings) >= MAX_SOURCES:
        key_strings.clear()
    launch_key = compat.launch_key(specialization, bound_options, key_strings)
    memo = (launch_key, compat.cache_invalidating_items())
    found = sources.get(memo)
    if found is not None and found.fingerprint == fingerprint:
        return found
    env = compat.cache_invalidating_env()
    opts, signature, constexprs, attrs = compat.pack_args(
        jit_fn, backend, run_kwargs, bound_args, specialization, bound_options
    )
    src = ASTSource(jit_fn, signature, constexprs, attrs)
    key = compat.kernel_hash(compat.cache_key_with(fingerprint, src, backend, opts, env))
    out = LaunchSource(src, backend, opts, env, target, key, fingerprint)
    if len(sources) < MAX_SOURCES:
        sources[memo] = out
    return out


#: Launch sources kept per kernel and target (a bound on a process's distinct binaries).
MAX_SOURCES = 1024
# Per JITFunction (dropped with it), per target: the backend, the binder, the launch sources
# built (by Triton's kernel-table key and the environment), and the kernel-table keys by
# (specialization, options), Triton's ``kernel_key_cache`` of ``JITFunction.run``.
_made: weakref.WeakKeyDictionary[
    Any, dict[Any, tuple[Any, Any, dict[Any, LaunchSource], dict[Any, str]]]
] = weakref.WeakKeyDictionary()


# -- loading -------------------------------------------------------------------------------


class BadBinary(ValueError):
    """A stored binary that failed validation; the message says what."""


def _safe_name(name: Any) -> str:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name[0] == ".":
        raise BadBinary(f"bad file name {name!r}")
    return name


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load(launch: LaunchSource) -> Any:
    """The stored ``CompiledKernel`` for ``launch`` (not yet loaded on the device), or None.

    A missing entry is a plain miss; an entry that fails validation, or a binaries
    directory that is not private to this user, is a miss with one ``CacheWarning``.
    """
    root = binaries_dir()
    folder = root / launch.key
    try:
        # Through the checked directory's descriptor (the chain from the cache root checked
        # once): a directory swapped afterwards cannot redirect the reads.
        folder_fd = paths.open_private_dir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except paths.UntrustedDir as why:
        warn_once(
            f"binary-dir:{root}",
            f"not loading stored kernel binaries from {root}: the directory is not private "
            f"to this user ({why}); fix its ownership and mode (chmod 700), or point "
            "TUNEDSL_CACHE_DIR at a directory of your own",
        )
        return None
    except OSError as err:
        warn_once(f"binary:{folder}", f"ignoring stored kernel binary {folder}: {err}")
        return None
    try:
        try:
            manifest_text = _read_at(folder_fd, MANIFEST).decode("utf-8")
        except FileNotFoundError:
            return None
        return _validated_kernel(folder, folder_fd, manifest_text, launch)
    except Exception as err:  # anything unexpected in a stored entry: a miss, never a crash
        warn_once(
            f"binary:{folder}",
            f"ignoring stored kernel binary {folder}: {err}; compiling it again",
        )
        # Remove it, so the binary compiled now replaces it (entries are never edited).
        shutil.rmtree(folder, ignore_errors=True)
        return None
    finally:
        os.close(folder_fd)


def _read_at(dir_fd: int, name: str) -> bytes:
    fd = os.open(_safe_name(name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise BadBinary(f"{name} is not a regular file")
        return fh.read()


def _validated_kernel(
    folder: Path, folder_fd: int, manifest_text: str, launch: LaunchSource
) -> Any:
    manifest = json.loads(manifest_text)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BadBinary(f"manifest format is not {FORMAT}")
    if manifest.get("key") != launch.key:
        raise BadBinary("the manifest names another key")
    name, kernel_hash, files = manifest.get("name"), manifest.get("hash"), manifest.get("files")
    if not isinstance(name, str) or not isinstance(kernel_hash, str) or len(kernel_hash) != 64:
        raise BadBinary("manifest name or hash missing")
    stem = compat.cache_file_stem(launch.src.name)  # Triton's file names: the kernel's name
    meta_name, binary_name = f"{stem}.json", f"{stem}.{compat.binary_extension(launch.backend)}"
    if not isinstance(files, dict) or set(files) != {meta_name, binary_name}:
        raise BadBinary(f"manifest files are not {meta_name} and {binary_name}")
    contents: dict[str, bytes] = {}
    for file_name, entry in files.items():
        data = _read_at(folder_fd, file_name)
        if not isinstance(entry, dict) or entry.get("size") != len(data):
            raise BadBinary(f"{file_name} has the wrong size")
        if entry.get("sha256") != _sha256(data):
            raise BadBinary(f"{file_name} has the wrong sha256")
        contents[file_name] = data
    metadata = json.loads(contents[meta_name])
    target = launch.target
    expected_target = {
        "backend": target.backend,
        "arch": target.arch,
        "warp_size": target.warp_size,
    }
    if metadata.get("hash") != kernel_hash or metadata.get("name") != name:
        raise BadBinary("metadata does not match the manifest")
    if metadata.get("target") != expected_target:
        raise BadBinary(f"compiled for {metadata.get('target')}, not {expected_target}")
    group = {meta_name: str(folder / meta_name), binary_name: str(folder / binary_name)}
    compiled = compat.compiled_kernel(launch.src, group, kernel_hash)
    if (
        compat.compiled_files(compiled, stem)[0] != contents[binary_name]
    ):  # replaced between the checks and the read
        raise BadBinary("the binary changed while it was read")
    stats["loaded"] += 1
    return compiled


# -- storing -------------------------------------------------------------------------------


def store(launch: LaunchSource, compiled: Any) -> bool:
    """Keep ``compiled`` (the JIT's ``CompiledKernel`` for ``launch``) for later processes.

    Only when ``launch`` provably rebuilds Triton's own cache key of ``compiled``. Returns
    whether the binary is stored now (also when another process stored it first).
    """
    folder = binaries_dir() / launch.key
    if (folder / MANIFEST).is_file():
        return True
    try:
        triton_key = compat.triton_cache_key(launch.src, launch.backend, launch.options, launch.env)
    except Exception:
        return False
    if compat.kernel_hash(triton_key) != getattr(compiled, "hash", None):
        return False  # not the kernel this launch would compile: never store it
    name = str(compiled.name)
    stem = compat.cache_file_stem(launch.src.name)  # as triton.compile names its group's files
    binary, meta_path = compat.compiled_files(compiled, stem)
    if not isinstance(binary, bytes) or meta_path is None:
        return False
    try:
        metadata_bytes = Path(meta_path).read_bytes()
        if json.loads(metadata_bytes).get("hash") != compiled.hash:
            return False
    except (OSError, ValueError, AttributeError):
        return False
    files = {
        f"{stem}.json": metadata_bytes,
        f"{stem}.{compat.binary_extension(launch.backend)}": binary,
    }
    manifest = {
        "format": FORMAT,
        "key": launch.key,
        "name": name,
        "hash": compiled.hash,
        "files": {n: {"size": len(d), "sha256": _sha256(d)} for n, d in files.items()},
    }
    return write_entry(launch.key, files, manifest)


def write_entry(key: str, files: Mapping[str, bytes], manifest: Mapping[str, Any]) -> bool:
    """Write one entry atomically (``store/atomic.write_directory``)."""
    entry = {**files, MANIFEST: json.dumps(manifest, indent=1).encode()}
    root = binaries_dir()
    try:
        # The chain from the cache root is checked as it is made: in a directory others can
        # write, they could swap the temporary directory the files are written into.
        root = paths.ensure_private_dir(root)
        try:
            atomic.write_directory(root / key, entry)
        except OSError:  # another process stored it first (a non-empty directory)
            if not (root / key / MANIFEST).is_file():
                raise
    except paths.UntrustedDir as why:
        warn_once(
            f"binary-dir:{root}",
            f"not storing kernel binaries in {root}: the directory is not private to this "
            f"user ({why}); fix its ownership and mode (chmod 700), or point "
            "TUNEDSL_CACHE_DIR at a directory of your own",
        )
        return False
    except OSError as err:
        warn_once(
            "unwritable-binaries",
            f"cannot store kernel binaries in {root} ({err}); later processes compile the "
            "chosen variants again",
        )
        return False
    stats["stored"] += 1
    return True
