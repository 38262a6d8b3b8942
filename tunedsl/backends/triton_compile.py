"""Compile one kernel variant without launching it: on the GPU, or for a named target.

``compile_variant(kernel, args, kwargs, options)`` is what the compile pool runs for each
configuration. Three cases:

* ``TRITON_INTERPRET=1``: the interpreter runs Python, there is nothing to compile; the
  result is an :class:`InterpretedHandle` (a no-op).
* ``target=None`` on a GPU: fill Triton's in-process JIT table, so the runtime's later
  ``kernel[grid](...)`` finds the kernel. Triton's own async-compile protocol
  (``triton.runtime._async_compile``, same idea in 3.6 through 3.9) splits
  ``JITFunction.warmup`` into three steps. Under the global compile lock: bind the
  arguments, look the key up, and (on a miss) *submit* the compile to a deferred
  executor instead of running it. Outside the lock: run the compile (AST → TTIR → LLVM →
  PTX → ``ptxas``; the GIL is released in the C++ passes and the subprocess). Under the
  lock again: finalize (insert into the kernel table) and load the module, which also
  reports ``OutOfResources`` (too much shared memory) as a failed configuration.
* ``target="cuda:90"`` (no GPU needed): cross-compile with ``triton.compile(ASTSource(...),
  target=GPUTarget(...))``. The signature, constexprs and specialisation attributes come
  from Triton's own binder built for the target's backend, so they are exactly what a
  launch on such a GPU computes, and the cubin lands in Triton's cache under the same key.

Only this package imports triton, and only when these functions run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from tunedsl.backends import compat
from tunedsl.backends.arg_device import cuda_device_of
from tunedsl.backends.backend_options import check_backend_options
from tunedsl.backends.compat import interpreting
from tunedsl.backends.compile_temporaries import keep_temporaries_private
from tunedsl.backends.triton_cache import triton_cache_has, triton_cache_lock
from tunedsl.errors import UsageError
from tunedsl.model.keys import readable_constexpr
from tunedsl.store.locks import compile_lock

__all__ = [
    "CrossCompiled",
    "InterpretedHandle",
    "as_built",
    "compile_signature",
    "compile_source",
    "compile_variant",
    "cross_target_facts",
    "interpreting",
    "is_cache_hit",
    "pack_for_target",
    "pack_launch",
    "parse_target",
    "triton_specialization",
    "unwrap_jit",
]


@dataclass(frozen=True)
class InterpretedHandle:
    """Under ``TRITON_INTERPRET=1`` nothing is compiled: this stands for the variant."""

    name: str

    @property
    def compiled(self) -> bool:
        return False


@dataclass(frozen=True)
class CrossCompiled:
    """A variant compiled for a named target: the binary and Triton's cache hash."""

    name: str
    target: str
    hash: str
    binary: bytes
    kernel: Any  # triton's CompiledKernel (not loaded: there may be no GPU)
    cached: bool = False  # found in Triton's cache dir: nothing was compiled

    @property
    def compiled(self) -> bool:
        return True


_INTERPRET_FIX = (
    "cannot compile for a target while TRITON_INTERPRET=1: Triton was imported in "
    "interpreter mode (its own library kernels are interpreted functions then). Unset "
    "TRITON_INTERPRET in the process that cross-compiles; `tunedsl precompile --target` "
    "does this for you"
)


def parse_target(text: str | Any) -> Any:
    """``"cuda:90"`` → ``GPUTarget("cuda", 90, 32)``; ``"hip:gfx942"`` → warp size 64.

    A ``GPUTarget`` passes through. Bad text raises ``UsageError`` saying the form.
    """
    from triton.backends.compiler import GPUTarget

    if isinstance(text, GPUTarget):
        return text
    backend, sep, arch = str(text).strip().partition(":")
    backend = backend.lower()
    if not sep or not arch or backend not in {"cuda", "hip"}:
        raise UsageError(
            f"bad compile target {text!r}: write BACKEND:ARCH, e.g. cuda:90 (H100), "
            "cuda:80 (A100) or hip:gfx942"
        )
    if backend == "cuda":
        if not arch.isdigit():
            raise UsageError(
                f"bad compile target {text!r}: the CUDA arch is a number, e.g. cuda:90"
            )
        return GPUTarget("cuda", int(arch), 32)
    return GPUTarget("hip", arch, 64)


def checked_target(text: str | Any) -> Any:
    """:func:`parse_target`, and for CUDA, that the ``ptxas`` Triton runs knows the arch:
    ``cuda:999`` fails here, named, not once per variant in the compile pool."""
    target = parse_target(text)
    if target.backend != "cuda":
        return target
    known = compat.ptxas_gpu_names(int(target.arch))
    if known is not None and f"sm_{target.arch}" not in known:
        archs = sorted({int(n[3:].rstrip("abcdefghijklmnopqrstuvwxyz")) for n in known})
        raise UsageError(
            f"compile target {target_name(target)!r}: this Triton's ptxas knows no sm_"
            f"{target.arch}. Fix: name one it knows: " + ", ".join(f"cuda:{a}" for a in archs)
        )
    return target


def target_name(target: Any) -> str:
    """The inverse of :func:`parse_target`: ``GPUTarget("cuda", 90, 32)`` → ``"cuda:90"``."""
    return f"{target.backend}:{target.arch}"


# Per-SM limits of NVIDIA architectures that differ from the common 64K registers and
# 2048 threads (CUDA programming guide, "compute capabilities" table).
_CUDA_MAX_THREADS_PER_SM = {75: 1024, 86: 1536, 87: 1536, 89: 1536, 120: 1536}


def cross_target_facts(target: str | Any) -> Any:
    """``TargetFacts`` (hint translation) for a named target, without a device."""
    from tunedsl.model.hints import TargetFacts

    gpu = parse_target(target)
    if gpu.backend == "hip":
        return TargetFacts("hip", regs_per_sm=65536 * 8, max_threads_per_sm=2048, warp_size=64)
    threads = _CUDA_MAX_THREADS_PER_SM.get(int(gpu.arch), 2048)
    return TargetFacts("cuda", regs_per_sm=65536, max_threads_per_sm=threads, warp_size=32)


def unwrap_jit(kernel: Any) -> Any:
    """The ``JITFunction`` inside ``kernel`` (through ``triton.autotune``/``heuristics`` wrappers).

    Under ``TRITON_INTERPRET=1`` ``@triton.jit`` returns an ``InterpretedFunction``, which
    cannot be compiled: that is reported with the fix.
    """
    from triton.runtime.jit import JITFunction

    for _ in range(8):
        if isinstance(kernel, JITFunction):
            return kernel
        if compat.is_interpreted_function(kernel):
            raise UsageError(_INTERPRET_FIX)
        inner = getattr(kernel, "fn", None)
        if inner is None:
            break
        kernel = inner
    raise UsageError(f"{kernel!r} is not a Triton kernel: decorate it with @triton.jit")


def compile_variant(
    kernel: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    *,
    target: str | Any | None = None,
    grid: Any = None,
) -> Any:
    """Compile ``kernel(*args, **kwargs)`` with launch ``options`` (num_warps, ...); never launch.
    ``grid``: the launch's, which a ``@triton.heuristics`` function may read.

    Returns the handle: Triton's ``CompiledKernel`` on a GPU, :class:`CrossCompiled` for a
    target, :class:`InterpretedHandle` under the interpreter. Compile errors propagate.
    """
    if target is not None:
        if interpreting():
            raise UsageError(_INTERPRET_FIX)
        kwargs = compat.with_heuristics(kernel, args, kwargs, options, grid)
        return _cross_compile(unwrap_jit(kernel), args, kwargs, options, parse_target(target))
    if interpreting():
        return InterpretedHandle(str(getattr(kernel, "__name__", None) or repr(kernel)))
    kwargs = compat.with_heuristics(kernel, args, kwargs, options, grid)
    check_backend_options(unwrap_jit(kernel), kwargs, options)
    device = cuda_device_of(args, kwargs)
    if device is None:
        return _compile_on_device(unwrap_jit(kernel), args, kwargs, options)
    import torch

    # Pool threads start on device 0; compile (and fill the table) for the arguments' GPU.
    with torch.cuda.device(device):
        return _compile_on_device(unwrap_jit(kernel), args, kwargs, options)


class _DeferredExecutor:
    """An ``Executor`` for Triton's AsyncCompileMode that runs the submitted compile later.

    ``submit`` only records the function; :meth:`run` executes it (outside the compile
    lock) and completes the future that Triton's ``FutureKernel`` waits on.
    """

    def __init__(self) -> None:
        self.fn: Callable[[], Any] | None = None
        self.future: Future[Any] = Future()

    def submit(self, fn: Callable[[], Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.fn is not None:  # one compile per warmup; a second would be a Triton change
            raise RuntimeError("tunedsl: Triton submitted two compiles for one warmup")
        self.fn = lambda: fn(*args, **kwargs)
        return self.future

    def run(self) -> None:
        assert self.fn is not None
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            self.future.set_result(self.fn())
        except BaseException as err:
            self.future.set_exception(err)
            if not isinstance(err, Exception):
                raise


def _compile_on_device(
    jit_fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]
) -> Any:
    if not compat.internals_usable():
        return _compile_public(jit_fn, args, kwargs, options)
    deferred = _DeferredExecutor()
    mode = compat.keyed_async_mode(deferred)
    # Guarded prologue: binder creation (the JIT's table), key, table look-up, submit.
    with compile_lock, compat.async_compile_mode(mode):
        handle = compat.jit_warmup(jit_fn, args, kwargs, options)
    if handle is None:  # a jit_cache_hook took over the compile: nothing to finish here
        return None
    hit = deferred.fn is None  # already in the in-process table
    if deferred.fn is not None:
        key = mode.cache_key or ""
        # The heavy part, outside the compile lock; the file lock only makes another
        # process compiling the same entry wait and then hit Triton's cache.
        keep_temporaries_private()
        with triton_cache_lock(key):
            hit = bool(key) and triton_cache_has(key, jit_fn.__name__)
            deferred.run()
    # FutureKernel.result() blocks until the compile is done (ours, or another thread's
    # for the same key), so it must not hold the lock while it waits.
    compat.wait_compiled(handle)  # without raising, outside the lock
    with compile_lock:
        compiled = compat.resolve(handle)
        # Load the module now, under the lock: reports OutOfResources here, not at launch.
        compat.load_module(compiled)
    if hit:
        _cache_hits.add(compiled)
    return compiled


def _compile_public(
    jit_fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]
) -> Any:
    """An untested Triton version: Triton's public ``JITFunction.warmup``, whole, under the
    compile lock (compiles take turns; a failing configuration still raises here)."""
    keep_temporaries_private()
    with compile_lock:
        return compat.jit_warmup(jit_fn, args, kwargs, options)


# CompiledKernels that compile_variant found compiled already (in memory or on disk).
_cache_hits: weakref.WeakSet[Any] = weakref.WeakSet()


def is_cache_hit(handle: Any) -> bool:
    """True when ``compile_variant`` found ``handle`` compiled already (nothing was built)."""
    if isinstance(handle, CrossCompiled):
        return handle.cached
    try:
        return handle in _cache_hits
    except TypeError:  # not weak-referenceable: never recorded
        return False


def as_built(handle: Any) -> Any:
    """``handle`` counted as compiled now, not found compiled: a worker process built it
    into the cache moments ago for this very call (``process_compile.py``)."""
    if isinstance(handle, CrossCompiled):
        return dataclasses.replace(handle, cached=False)
    with contextlib.suppress(TypeError):
        _cache_hits.discard(handle)
    return handle


def pack_launch(
    jit_fn: Any,
    backend: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
) -> tuple[Any, Any, Any, Any]:
    """What ``JITFunction.run`` derives for this call on ``backend``: Triton's own binder and
    ``_pack_args`` give ``(options, signature, constexprs, attrs)``, so an ``ASTSource`` built
    from them (and its cache key) is exactly a launch's."""
    run_kwargs = compat.run_kwargs(jit_fn, kwargs, options)
    with compile_lock:  # binder creation execs generated code; cheap, so guard it
        binder = compat.make_binder(jit_fn, backend)
    bound_args, specialization, bound_options = binder(*args, **run_kwargs)
    return compat.pack_args(jit_fn, backend, run_kwargs, bound_args, specialization, bound_options)


def pack_for_target(
    jit_fn: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    target: Any,
) -> tuple[Any, Any, Any, Any]:
    """:func:`pack_launch` on ``target``'s backend: ``(options, signature, constexprs,
    attrs)`` of a launch on such a GPU (torch dtypes may stand for tensors in ``args``)."""
    from triton.compiler import make_backend

    check_backend_options(jit_fn, kwargs, options, target)
    wrapped = [compat.mock_tensor(a) for a in args]
    return pack_launch(jit_fn, make_backend(target), wrapped, kwargs, options)


def _cross_compile(
    jit_fn: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    target: Any,
) -> CrossCompiled:
    opts, signature, constexprs, attrs = pack_for_target(jit_fn, args, kwargs, options, target)
    return compile_source(jit_fn, signature, constexprs, attrs, compat.options_dict(opts), target)


def compile_signature(
    kernel: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any],
    options: Mapping[str, Any],
    *,
    target: str | Any,
    attrs: Mapping[Any, Any] | None = None,
) -> CrossCompiled:
    """Cross-compile from a recorded signature, no tensors needed (``precompile --replay``).

    ``signature`` maps parameters to Triton types with Triton's specialisation after a
    colon, as :func:`triton_specialization` writes them: ``"*fp16:D"`` (divisible by 16),
    ``"i32:"`` (specialised, no hint), ``"fp32"`` (not specialised). ``constexprs`` maps parameter names to
    values, including arguments Triton specialised to constants (an int equal to 1).
    Without suffixes the variant is a correct, general one, which a launch with aligned
    arguments does not reuse (Triton keys its cache on the specialisation too).
    """
    if interpreting():
        raise UsageError(_INTERPRET_FIX)
    from triton.compiler import make_backend

    jit_fn = unwrap_jit(kernel)
    gpu_target = parse_target(target)
    check_backend_options(jit_fn, {}, options, gpu_target)
    backend = make_backend(gpu_target)
    # Rebuild the binder's output and let Triton's own _pack_args derive the signature,
    # constexprs and attributes, so the ASTSource (and its cache key) is a launch's.
    specialization: list[tuple[str, Any]] = []
    bound: dict[str, Any] = {}
    for name, is_constexpr in compat.param_specs(jit_fn):
        if is_constexpr or name in constexprs:
            if name not in constexprs:
                raise UsageError(f"no value recorded for constexpr argument {name!r}")
            specialization.append(("constexpr", constexprs[name]))
            bound[name] = constexprs[name]
            continue
        if name not in signature:
            raise UsageError(f"the recorded signature has no type for argument {name!r}")
        kind, colon, attr = str(signature[name]).partition(":")
        specialization.append((kind, attr if colon else None))
        bound[name] = None
    run_kwargs = compat.run_kwargs(jit_fn, {}, options)
    opts, sig, packed_constexprs, packed_attrs = compat.pack_args(
        jit_fn, backend, run_kwargs, bound, specialization, None
    )
    packed_attrs.update(attrs or {})
    return compile_source(
        jit_fn, sig, packed_constexprs, packed_attrs, compat.options_dict(opts), gpu_target
    )


def triton_specialization(
    kernel: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    target: str | Any | None = None,
    options: Mapping[str, Any] | None = None,
    grid: Any = None,
) -> dict[str, Any]:
    """How Triton specialises this call, per parameter, in the form replay reads back.

    ``{"a": "*fp16:D", "n": "i32:", "x": "fp32", "one": {"constexpr": 1}, "BLOCK":
    {"constexpr": 128}}``: the type, then after a colon Triton's specialisation (``D``:
    16-byte divisibility, empty: none), and constants (constexpr parameters and the
    arguments Triton specialises to constants). ``target`` defaults to
    the current GPU, else ``cuda:90`` (under the interpreter too). Store this in a record, and
    :func:`compile_signature` compiles exactly the variant a launch would use.
    """
    from triton.compiler import make_backend

    inner = kernel
    while getattr(inner, "fn", None) is not None and not compat.is_interpreted_function(inner):
        inner = inner.fn  # under the interpreter: the binder of the same parameters
    interpreted = compat.is_interpreted_function(inner)
    jit_fn = compat.binding_jit(inner) if interpreted else unwrap_jit(kernel)
    if target is None:
        target = _current_target_or("cuda:90")
    backend = make_backend(parse_target(target))
    with compile_lock:
        binder = compat.make_binder(jit_fn, backend)
    kwargs = compat.with_heuristics(kernel, args, kwargs, options or {}, grid)
    run_kwargs = compat.run_kwargs(jit_fn, kwargs, {})
    _, specialization, _ = binder(*[compat.mock_tensor(a) for a in args], **run_kwargs)
    out: dict[str, Any] = {}
    names = [name for name, _ in compat.param_specs(jit_fn)]
    for name, (kind, value) in zip(names, specialization, strict=False):
        if kind == "constexpr":  # a Triton function by name and digest, as replay finds it
            out[name] = {"constexpr": readable_constexpr(value)}
        else:  # "i32:D" divisible by 16, "i32:" specialised without a hint, "fp32" not at all
            out[name] = f"{kind}:{value}" if isinstance(value, str) else kind
    return out


def _current_target_or(default: str) -> Any:
    if not interpreting():
        try:
            import torch

            if torch.cuda.is_available():
                return compat.current_target()
        except Exception:  # no usable driver: fall back to the named target
            pass
    return parse_target(default)


def compile_source(
    jit_fn: Any,
    signature: Mapping[str, Any],
    constexprs: Mapping[Any, Any],
    attrs: Mapping[Any, Any],
    options: Mapping[str, Any],
    target: Any,
) -> CrossCompiled:
    import triton
    from triton.compiler import ASTSource, make_backend

    src = ASTSource(jit_fn, dict(signature), dict(constexprs), dict(attrs))
    backend = make_backend(target)
    parsed = backend.parse_options(dict(options))
    key = compat.triton_cache_key(src, backend, parsed, compat.cache_invalidating_env())
    # Another process compiling the same variant into the same cache dir waits, then hits.
    keep_temporaries_private()
    with triton_cache_lock(key):
        cached = triton_cache_has(key, src.name)
        compiled = triton.compile(src, target=target, options=dict(options))
    return CrossCompiled(
        name=getattr(jit_fn, "__name__", "kernel"),
        target=target_name(target),
        hash=str(compiled.hash),
        binary=compat.compiled_binary(compiled),
        kernel=compiled,
        cached=cached,
    )
