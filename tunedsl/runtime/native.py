"""The C form of the fused launch (``native_fused.c``): built once per user and Python, loaded
from the cache.

The fused launch of ``runtime/fused.py`` is generated Python: for a kernel of a dozen int
arguments its bytecodes cost more than Triton's launch does beyond the driver call. The same
steps in C cost a fraction of that. tunedsl ships the C source, not a binary (the wheel stays
pure Python), and compiles it with the C compiler Triton itself needs for its launchers, the
first time a process fuses a launch (0.34 s on the 2-core CI machine, 0.46 s on the H100's
host), once per user and Python version. The
module lands in ``<cache>/native/`` under a name that hashes its source, the Python version
and the ABI, written whole or not at all, and is loaded only from a private directory.

Without a compiler or Python's headers, or with ``TUNEDSL_NATIVE_LAUNCH=0``, the fused launch
stays Python: same decisions, slower. ``tunedsl env`` says which one runs and why.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from tunedsl.store import atomic, paths

MODULE_NAME = "tunedsl_native_fused"
SOURCE_NAME = "native_fused.c"

_lock = threading.Lock()
_loaded: Any = None  # the Fused type once loaded
_failure: str | None = None  # why it could not be built or loaded (once per process)


def source() -> bytes:
    return resources.files("tunedsl.runtime").joinpath(SOURCE_NAME).read_bytes()


def module_path(directory: Path) -> Path:
    """Where the module built from this source for this interpreter lives in ``directory``."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    digest = hashlib.sha256(source())
    digest.update(f"{sys.version}|{sys.implementation.cache_tag}|{suffix}".encode())
    return directory / f"{MODULE_NAME}_{digest.hexdigest()[:16]}{suffix}"


def compiler() -> str | None:
    """The C compiler: ``$CC``, Python's own, ``cc``, ``gcc`` or ``clang`` (None: none found)."""
    candidates = [os.environ.get("CC"), (sysconfig.get_config_var("CC") or "").split(" ")[0]]
    for name in [*candidates, "cc", "gcc", "clang"]:
        if name and shutil.which(name):
            return name
    return None


def build(directory: Path) -> Path:
    """Compile the module into ``directory`` (atomically) and return its path. Raises
    ``OSError`` with the compiler's message when it cannot."""
    cc = compiler()
    if cc is None:
        raise OSError("no C compiler found (set CC, or install gcc)")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        raise OSError(f"Python's headers are missing ({include}/Python.h): install python3-dev")
    target = module_path(directory)
    with tempfile.TemporaryDirectory(prefix=".native-build-", dir=directory) as work:
        src = Path(work) / SOURCE_NAME
        src.write_bytes(source())
        out = Path(work) / target.name
        cmd = [cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(src), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-2000:]}")
        atomic.write_bytes(target, out.read_bytes())
    return target


def load_from(path: Path) -> Any:
    """The ``Fused`` type of the module at ``path``."""
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.Fused


def fused_type() -> Any:
    """The C ``Fused`` type, built or loaded on first use; None where it cannot be (the
    reason is in :func:`status`)."""
    global _loaded, _failure
    if _loaded is not None or _failure is not None:
        return _loaded
    with _lock:
        if _loaded is None and _failure is None:
            try:
                _loaded = _build_or_load()
            except (OSError, ImportError, subprocess.SubprocessError) as err:
                _failure = str(err) or type(err).__name__
    return _loaded


def _build_or_load() -> Any:
    directory = paths.ensure_private_dir(paths.cache_root() / "native")
    if not paths.is_private_dir(directory):  # a module is code: never from a shared place
        raise OSError(f"{directory} is not private to this user: the C launch is not loaded")
    path = module_path(directory)
    if path.is_file():
        try:
            return load_from(path)
        except ImportError:  # damaged (a copied cache, another libc): build it again
            pass
    return load_from(build(directory))


def status() -> str:
    """For ``tunedsl env``: whether the C fused launch is in use, or why not."""
    from tunedsl import knobs

    if not knobs.native_launch():
        return "off (TUNEDSL_NATIVE_LAUNCH=0)"
    if _loaded is not None:
        return "loaded"
    if _failure is not None:
        return f"unavailable: {_failure}"
    if module_path(paths.cache_root() / "native").is_file():
        return "built (loaded at the first fused launch)"
    cc = compiler()
    if cc is None:
        return "unavailable: no C compiler found (the fused launch stays Python)"
    return f"not built yet (built with {cc} at the first fused launch)"
