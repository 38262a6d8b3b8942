"""Compile a stream's variants in forked worker processes, then load each one in-process.

:func:`variant_compiler` returns the function a compile stream's jobs call for each variant.
Where forked workers pay (``backends/compile_processes.py``: several jobs, enough compile
workers, ``TUNEDSL_COMPILE_PROCESSES``), each call:

1. derives what a launch would compile (Triton's own binder and ``_pack_args`` for the
   target of the arguments' GPU, as a cross-compile does: ``triton_compile.pack_for_target``);
2. has a worker compile exactly that ``ASTSource`` for that target, which writes the result
   into Triton's on-disk cache under the launch's key;
3. runs :func:`~tunedsl.backends.triton_compile.compile_variant` here as before, which now
   finds the cache entry: it loads the module and fills the JIT's table (that part must
   happen in this process, where the launch looks), holding the GIL for milliseconds
   instead of the whole compile's Python share.

A kernel that needs more shared memory than the launching GPU has stops in the worker after
its LLVM-IR stage (``compat.stop_over_shared_memory``), and step 3 becomes raising Triton's
``OutOfResources`` with the numbers loading it would give: such kernels are often a space's
slowest compiles, and no load accepts them. Such a compile is remembered, in the process
and in the cache (``stopped_compiles.py``), so another key of the same kernel and
specialization, or a later process, fails it at once (``run_job``).

Step 3 checks that it was a cache hit with the worker's hash; a miss (the keys differ in a
Triton version this was not built against) turns processes off for this process, with the
count in ``stats["mismatch"]``. A job that fails in the worker is compiled again here, so
the error the tuner records is Triton's own; a worker that dies is reported as the
configuration's failure (a compiler crash no longer takes the tuning process with it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tunedsl.backends import compat, compile_processes, stopped_compiles, triton_key_cache
from tunedsl.backends.arg_device import cuda_device_of
from tunedsl.backends.compile_pool import (
    CompileCancelled,
    default_workers,
    job_timeout_s,
    start_drained_thread,
)
from tunedsl.backends.triton_compile import (
    as_built,
    compile_source,
    compile_variant,
    interpreting,
    is_cache_hit,
    pack_for_target,
    parse_target,
    unwrap_jit,
)

__all__ = [
    "Built",
    "OverSharedMemory",
    "WorkerCompile",
    "prebuild_launcher",
    "run_job",
    "stats",
    "variant_compiler",
]


class VariantCompile(Protocol):
    """``compile(args, kwargs, options, grid)``: ``grid`` is the launch's, which a
    ``@triton.heuristics`` function may read."""

    def __call__(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        grid: Any = None,
        /,
    ) -> Any: ...


#: ``built``: variants a worker compiled and this process then loaded from the cache;
#: ``fallback``: compiled here after the worker failed; ``mismatch``: the load was no hit;
#: ``over_shared``: stopped in the worker before code generation (too much shared memory);
#: ``over_shared_known``: failed at once, a worker having stopped the same compile before.
stats = {"built": 0, "fallback": 0, "mismatch": 0, "over_shared": 0, "over_shared_known": 0}
_disabled: list[str] = []  # why processes were turned off for this process, if they were
_launchers: set[tuple[str, str]] = set()  # (kernel source, signature) prebuilt or building
_launchers_lock = threading.Lock()


@dataclass(frozen=True)
class WorkerCompile:
    """What a worker compiles: a registered kernel and a launch's packed ASTSource fields."""

    kernel: int  # compile_processes.register(jit_fn)
    source_key: str  # jit_fn.cache_key: the worker's copy must be the same source
    signature: dict[str, Any]
    constexprs: dict[Any, Any]
    attrs: dict[Any, Any]
    options: dict[str, Any]
    target: Any
    # The launching GPU's shared memory: a kernel over it stops before code generation
    # (None where the target is not a GPU of this process: no check).
    shared_limit: int | None = None
    # This process's triton_key(): workers are forked before it is hashed (None: the
    # worker hashes Triton itself).
    triton_key: str | None = None


@dataclass(frozen=True)
class Built:
    """A worker's compile that Triton's cache now holds under ``hash``."""

    hash: str
    cached: bool  # Triton's cache had it already: nothing was built


@dataclass(frozen=True)
class OverSharedMemory:
    """A worker's compile stopped after LLVM IR: the kernel needs ``required`` bytes of
    shared memory, the GPU has ``limit``; loading it would raise the same error."""

    required: int
    limit: int


def build_in_worker(job: WorkerCompile) -> Built | OverSharedMemory:
    """In a worker: compile into Triton's cache, or stop early for a kernel no load accepts."""
    jit_fn = compile_processes.lookup(job.kernel)
    if str(jit_fn.cache_key) != job.source_key:
        raise RuntimeError("the kernel's source changed since the compile processes started")
    if job.triton_key is not None:
        compat.use_triton_key(job.triton_key)
    compat.stop_over_shared_memory(job.shared_limit)
    try:
        compiled = compile_source(
            jit_fn, job.signature, job.constexprs, job.attrs, job.options, job.target
        )
    except Exception as err:
        overrun = compat.shared_memory_overrun(err) if job.shared_limit is not None else None
        if overrun is None:
            raise
        return OverSharedMemory(*overrun)
    return Built(compiled.hash, compiled.cached)


def variant_compiler(
    kernel: Any,
    jobs: int,
    *,
    target: str | Any | None = None,
    workers: int | None = None,
    shared_by: int = 0,
    priority: float = 0.0,
    cancelled: threading.Event | None = None,
) -> VariantCompile:
    """``compile(args, kwargs, options, grid)`` for the ``jobs`` variants of one stream on
    ``workers`` compile workers (default: the pool's; see the module docstring).
    ``shared_by``: the compiles the streams running beside this one may need at once (a
    search's batches announced ahead), so the pool forked now serves them too; of the
    streams waiting for a process, the lowest ``priority`` is served first. A compile still
    waiting for a process when ``cancelled`` is set raises ``CompileCancelled`` and runs
    nothing. Call it before the stream starts: it may fork the workers, which is safe only
    while no other thread compiles."""

    def here(
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        grid: Any = None,
    ) -> Any:
        return compile_variant(kernel, args, kwargs, options, target=target, grid=grid)

    if jobs < 2 or interpreting() or _disabled:
        return here
    workers = default_workers() if workers is None else max(1, int(workers))
    if not compile_processes.enabled(min(workers, jobs)):
        return here
    try:
        jit_fn = unwrap_jit(kernel)
        source_key = str(jit_fn.cache_key)
    except Exception:  # not a kernel this path knows: the in-process path reports it
        return here
    fixed_target = None if target is None else parse_target(target)
    try:
        if fixed_target is None:  # a GPU to compile for (without starting Triton's driver)
            compat.target_before_driver()
    except Exception:  # no usable target: the in-process path reports it
        return here
    # Fork first: the workers start while this process hashes Triton and starts its driver
    # (0.4-0.6 s on a cold H100 machine), and jobs carry the key.
    # No idle processes (a pool is forked again for each new kernel), but a pool that
    # several streams share must have a process for each of their compiles: one sized by a
    # search's first batch of 16 kept a 32-core host at 16 compiles.
    pool = compile_processes.pool_for([jit_fn], min(workers, max(jobs, shared_by)))
    if pool is None:
        return here
    try:
        triton_key_cache.use_stored()  # hashing Triton, 0.4 s, only where it changed
        compat.warm_compile_caches(fixed_target)
        triton_key_cache.store()
    except Exception:  # the in-process path reports it
        return here
    kernel_key = compile_processes.register(jit_fn)

    def pooled(
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        grid: Any = None,
    ) -> Any:
        if _disabled:
            return here(args, kwargs, options, grid)
        try:
            computed = compat.with_heuristics(kernel, args, kwargs, options, grid)
            job = _worker_job(jit_fn, kernel_key, source_key, args, computed, options, fixed_target)
            result = run_job(pool, job, priority=priority, cancelled=cancelled)
        except compile_processes.Cancelled as err:
            raise CompileCancelled("the search ended before this configuration compiled") from err
        except compile_processes.WorkerCrashed as err:  # this configuration crashed it
            raise RuntimeError(f"{err} while compiling this configuration") from err
        except compile_processes.NoWorkerLeft:  # all killed or crashed: compile here
            return _fallback(here, args, kwargs, options, grid)
        except compile_processes.WorkerFailed:
            return _fallback(here, args, kwargs, options, grid)
        except TimeoutError:
            raise
        except Exception:  # the job could not be described or sent: compile here
            return _fallback(here, args, kwargs, options, grid)
        if isinstance(result, OverSharedMemory):  # what loading it here would raise
            raise compat.out_of_resources(result.required, result.limit)
        handle = here(args, kwargs, options, grid)  # the load: milliseconds of Python
        if is_cache_hit(handle) and str(getattr(handle, "hash", "")) == result.hash:
            stats["built"] += 1
            return handle if result.cached else as_built(handle)
        else:  # the worker's key was not the launch's: stop paying for both
            stats["mismatch"] += 1
            _disabled.append(f"cache key mismatch for {jit_fn.__name__}")
        return handle

    return pooled


def run_job(
    pool: Any,
    job: WorkerCompile,
    *,
    priority: float = 0.0,
    cancelled: threading.Event | None = None,
) -> Built | OverSharedMemory:
    """``job`` compiled by a worker of ``pool``, or the answer a worker gave to the same
    compile over shared memory before, in this process or an earlier one
    (``stopped_compiles.py``)."""
    key = None
    if job.shared_limit is not None and job.triton_key is not None:
        key = stopped_compiles.digest(
            (job.source_key, job.signature, job.constexprs, job.attrs, job.options,
             job.target, job.shared_limit, job.triton_key,
             sorted(compat.cache_invalidating_env().items()))
        )  # fmt: skip
        known = stopped_compiles.known(key)
        if known is not None:
            stats["over_shared_known"] += 1
            return OverSharedMemory(*known)
    result = pool.run(build_in_worker, job, job_timeout_s(), priority=priority, cancelled=cancelled)
    if isinstance(result, OverSharedMemory):
        stats["over_shared"] += 1
        if key is not None:
            stopped_compiles.remember(key, result.required, result.limit)
    return result


def _fallback(
    here: VariantCompile,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    grid: Any,
) -> Any:
    stats["fallback"] += 1
    return here(args, kwargs, options, grid)


def _worker_job(
    jit_fn: Any,
    kernel_key: int,
    source_key: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    target: Any,
) -> WorkerCompile:
    shared_limit = None
    if target is None:  # the GPU of the arguments, as the in-process compile uses
        device = cuda_device_of(args, kwargs)
        target = _target_of_device(device)
        shared_limit = _shared_limit(device, target)
    opts, signature, constexprs, attrs = pack_for_target(jit_fn, args, kwargs, options, target)
    return WorkerCompile(
        kernel=kernel_key,
        source_key=source_key,
        signature=dict(signature),
        constexprs=dict(constexprs),
        attrs=dict(attrs),
        options=compat.options_dict(opts),
        target=target,
        shared_limit=shared_limit,
        triton_key=compat.triton_key(),
    )


def _target_of_device(device: int | None) -> Any:
    """The target of CUDA device ``device`` (None: the current device)."""
    if device is None:
        return compat.current_target()
    import torch

    with torch.cuda.device(device):
        return compat.current_target()


def _shared_limit(device: int | None, target: Any) -> int | None:
    """The launching GPU's shared-memory limit (None: the current device); None off CUDA."""
    if getattr(target, "backend", None) != "cuda":
        return None
    try:
        return compat.max_shared_memory(device)
    except Exception:  # no limit to ask for: the worker compiles in full
        return None


def prebuild_launcher(
    kernel: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    grid: Any = None,
) -> None:
    """Build the kernel's C launcher for this signature on a background thread, once per
    process, while its configurations compile (``compat.prebuild_launcher``: Triton 3.6
    builds it on the first module load otherwise, after the first compile). The target is
    found here (it may start Triton's driver, which must not start on two threads at once),
    the signature on the thread (packing the first call takes tens of milliseconds, which
    would hold back the first compile job). Errors are ignored: the load builds it then,
    as without this."""
    if interpreting():
        return
    try:
        jit_fn = unwrap_jit(kernel)
        target = _target_of_device(cuda_device_of(args, kwargs))
    except Exception:
        return

    def build() -> None:
        try:
            computed = compat.with_heuristics(kernel, args, kwargs, options, grid)
            _, signature, constexprs, _ = pack_for_target(jit_fn, args, computed, options, target)
            key = (str(jit_fn.cache_key), repr(sorted(signature.items())))
            with _launchers_lock:
                if key in _launchers:
                    return
                _launchers.add(key)
            compat.prebuild_launcher(jit_fn, signature, constexprs)
        except Exception:  # the first load builds it, as without this
            pass

    start_drained_thread(build, name="tunedsl-launcher-build")
