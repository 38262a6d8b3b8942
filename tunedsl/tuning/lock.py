"""The global compile lock, and a cross-process file lock for on-disk state.

What ``compile_lock`` guards, and why (Triton 3.6 through 3.9):

* ``JITFunction.device_caches`` is a ``defaultdict(create_binder)``: two threads missing
  the same device at once each build a binder and one of them wins, so kernels the loser
  put in *its* ``kernel_cache`` vanish. Binder creation therefore happens under the lock.
* The per-device kernel tables (``kernel_cache``, ``kernel_key_cache``) are read and
  written in ``JITFunction.run``/``_do_compile`` without any lock; tunedsl fills them only
  while holding this lock.
* ``CompiledKernel._init_handles`` loads the binary into the CUDA context once, checking
  ``self.module is None`` without a lock; tunedsl calls it under the lock so a kernel is
  never loaded twice.
* Triton's compile hooks and ``knobs`` are process-global.

The heavy part of a compile (AST → TTIR → LLVM → PTX → ``ptxas``) runs *outside* the
lock: ``tunedsl.backends.triton_compile`` uses Triton's own async-compile protocol
(``triton.runtime._async_compile``) to split ``JITFunction`` compilation into a cheap
guarded prologue (bind, key, table look-up), the unguarded compile, and a cheap guarded
epilogue (insert into the table, load the module).

The lock is re-entrant (a ``threading.RLock``): a compile epilogue that triggers another
guarded step in the same thread does not deadlock. Hold it only for short, non-blocking
work; never hold it while waiting on another thread.

``file_lock(name)`` is a cross-process lock (``filelock``) under the tunedsl cache's
``locks/`` directory, for state several processes share on disk: the Triton cache
directory and tunedsl's own record of what was cross-compiled for which target.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tunedsl.store import paths

#: The one process-wide compile lock (re-entrant). See the module docstring.
compile_lock = threading.RLock()


@contextmanager
def guarded() -> Iterator[None]:
    """``with guarded():`` holds the global compile lock (re-entrant)."""
    with compile_lock:
        yield


def _lock_path(name: str) -> str:
    # A readable prefix plus a hash keeps any name (a path, a key) a safe file name.
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    directory = paths.ensure_private_dir(paths.locks_dir())
    return str(directory / f"{safe}-{digest}.lock")


@contextmanager
def file_lock(name: str, *, timeout_s: float = -1) -> Iterator[Any]:
    """Hold the cross-process lock called ``name`` (a file under the cache's ``locks/``).

    ``timeout_s`` < 0 waits forever; otherwise ``filelock.Timeout`` is raised when the lock
    is not free in time. Re-entrant within one process (filelock counts acquisitions).
    """
    from filelock import FileLock

    lock = FileLock(_lock_path(name), timeout=timeout_s)
    with lock:
        yield lock
