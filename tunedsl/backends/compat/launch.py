"""Launching below Triton's dispatcher, the target, binding and packing a call
(see ``compat/__init__.py``)."""

from __future__ import annotations

import functools
import inspect
import os
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tunedsl.backends.compat.driver_gate as driver_gate
from tunedsl import knobs

# -- launching --------------------------------------------------------------------------------


_NONE: Mapping[str, Any] = {}


def jit_run(
    kernel: Any,
    grid: tuple[int, ...],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    dyn_kwargs: Mapping[str, Any] = _NONE,
    options: Mapping[str, Any] = _NONE,
) -> Any:
    """``kernel[grid](*args, **kwargs, **dyn_kwargs, **options)`` without the
    ``__getitem__`` lambda: ``JITFunction.run(*args, grid=, warmup=False, **...)``, which
    returns the ``CompiledKernel`` (3.6.0, 3.9.0; the interpreter's ``run`` takes the same
    call). A name given twice raises ``TypeError``, as in ``kernel[grid](...)``. The first
    launch of a compiled kernel may start Triton's driver: its check first (``driver_gate``)."""
    if not driver_gate.started:
        driver_gate.check_before_driver(kernel)
    return kernel.run(*args, grid=grid, warmup=False, **kwargs, **dyn_kwargs, **options)


def jit_warmup(
    jit_fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]
) -> Any:
    """Compile (never launch) through ``JITFunction.warmup(*args, grid=(1,), **...)``: the
    ``CompiledKernel``, a future of one under an async-compile mode, or None when a
    ``jit_cache_hook`` took over (3.6.0, 3.9.0). It starts Triton's driver where no target is
    given: its check first (``driver_gate``)."""
    if not driver_gate.started:
        driver_gate.check_before_driver(jit_fn)
    return jit_fn.warmup(*args, grid=(1,), **dict(kwargs), **dict(options))


def resolve(compiled: Any) -> Any:
    """Triton 3.6's async compile may hand back a future: the ``CompiledKernel`` itself."""
    if hasattr(compiled, "result"):
        return compiled.result()
    return compiled


def wait_compiled(handle: Any) -> None:
    """Wait for an async compile's ``FutureKernel`` (``.future``; 3.6.0, 3.9.0) to finish,
    without raising its error; a plain ``CompiledKernel`` returns at once."""
    future = getattr(handle, "future", None)
    if future is not None:
        future.exception()


@dataclass(frozen=True)
class LaunchParts:
    """How to call a ``CompiledKernel``'s launch with nothing between: for kernel arguments
    ``args``, ``run(g0, g1, g2, stream, *middle, *args)``, or with ``packs_args``
    ``run(g0, g1, g2, stream, *middle, tuple(args))``."""

    run: Callable[..., Any]
    middle: tuple[Any, ...]
    packs_args: bool


def direct_launch_parts(compiled: Any) -> LaunchParts | None:
    """The direct launch of a ``CompiledKernel`` (None: this Triton has none to offer).

    Where the launcher's Python ``__call__`` is one this module knows
    (:func:`_launcher_form`) and the kernel needs no scratch memory, ``run`` is the C
    ``launch`` that ``__call__`` ends in, with the launcher's constant arguments in
    ``middle``: that skips a Python frame, two closures and two allocator tests per launch
    (the ``__call__`` adds nothing else for such a kernel). Otherwise ``run`` is the
    launcher itself, with the convention (3.6.0, 3.9.0)::

        run(grid0, grid1, grid2, stream, function, packed_metadata,
            launch_metadata, launch_enter_hook, launch_exit_hook, *kernel_args)

    Either way the launch metadata and both hooks are None (only built for launch hooks:
    callers check :func:`launch_hooked` first). Reading ``.run`` loads the module
    (``_init_handles``), which sets ``.function``.
    """
    compiled = resolve(compiled)
    if not driver_gate.started:  # reading ``.run`` may start Triton's driver: its check first
        driver_gate.check_before_driver(compiled)
    launcher = compiled.run
    function = compiled.function
    if function is None or not hasattr(compiled, "packed_metadata"):
        return None
    packed = compiled.packed_metadata
    form = _launcher_form(launcher.__class__)
    if form is None or _needs_scratch(launcher):
        return LaunchParts(launcher, (function, packed, None, None, None), False)
    coop, pdl = launcher.launch_cooperative_grid, launcher.launch_pdl
    if form == "star":  # 3.6.0: a C launcher compiled per signature
        return LaunchParts(
            launcher.launch, (function, coop, pdl, None, None, packed, None, None, None), False
        )
    # 3.7.1 to 3.9.0: one generic C launcher, told the signature, kernel arguments as one tuple
    signature = (launcher.arg_annotations, launcher.kernel_signature)
    middle = (function, coop, pdl, packed, None, None, None, None, None, *signature)
    return LaunchParts(launcher.launch, middle, True)


def _needs_scratch(launcher: Any) -> bool:
    return bool(
        getattr(launcher, "global_scratch_size", 1)
        or getattr(launcher, "profile_scratch_size", 1)
        or getattr(launcher, "gsan_enabled", False)
    )


# The launcher's ``__call__`` forms whose C call :func:`direct_launch_parts` makes itself:
# (positional parameters, every global and attribute name the code reads). 3.6.0's
# ``CudaLauncher.__call__(self, gridX, gridY, gridZ, stream, function, *args)``; 3.7.1's
# (the launch metadata and hooks named, the signature passed to one generic C launcher);
# 3.8.0's (a default profile allocator, gsan added) and 3.9.0's (capture checks added): the
# last three make the same C call. A launcher whose ``__call__`` reads any other name (a
# newer Triton that computes something more per launch) is called as is.
_LAUNCHER_FORMS: dict[tuple[int, frozenset[str]], str] = {
    (
        6,
        frozenset(
            "_allocation _allocator _profile_allocator get global_scratch_align "
            "global_scratch_size launch launch_cooperative_grid launch_pdl num_ctas "
            "profile_scratch_align profile_scratch_size".split()
        ),
    ): "star",
    (
        10,
        frozenset(
            "_allocation _allocator _profile_allocator arg_annotations get "
            "global_scratch_align global_scratch_size kernel_signature launch "
            "launch_cooperative_grid launch_pdl num_ctas profile_scratch_align "
            "profile_scratch_size".split()
        ),
    ): "tuple",
    (
        10,
        frozenset(
            "GSAN_PER_DEVICE_STATE_STRIDE _allocation _allocator _profile_allocator "
            "_stream_sync active allocate_default_profile_scratch arg_annotations driver "
            "experimental get get_current_device get_device_rank get_global_state_pointer "
            "global_scratch_align global_scratch_size gsan gsan_enabled has_profile_allocator "
            "kernel_signature launch launch_cooperative_grid launch_pdl num_ctas "
            "profile_scratch_align profile_scratch_size runtime synchronize_launch_stream "
            "triton triton.experimental.gsan._allocator "
            "triton.experimental.gsan._stream_sync".split()
        ),
    ): "tuple",
    (
        10,
        frozenset(
            "GSAN_PER_DEVICE_STATE_STRIDE RuntimeError _allocation _allocator "
            "_profile_allocator _stream_sync active allocate_default_profile_scratch "
            "arg_annotations driver experimental get get_current_device get_device_rank "
            "get_global_state_pointer get_launch_state global_scratch_align "
            "global_scratch_size gsan gsan_enabled has_profile_allocator "
            "is_stream_capturing kernel_signature launch launch_cooperative_grid launch_pdl "
            "num_ctas profile_scratch_align profile_scratch_size runtime triton "
            "triton.experimental.gsan._allocator triton.experimental.gsan._stream_sync "
            "utils".split()
        ),
    ): "tuple",
}


@functools.lru_cache(maxsize=8)
def _launcher_form(launcher_cls: Any) -> str | None:
    """``"star"`` or ``"tuple"`` for a launcher class of a known form, else None."""
    code = getattr(vars(launcher_cls).get("__call__"), "__code__", None)
    if code is None or not code.co_flags & inspect.CO_VARARGS:
        return None
    return _LAUNCHER_FORMS.get((code.co_argcount, frozenset(_code_names(code))))


def _code_names(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` and the functions nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


#: The launcher (:func:`direct_launch_parts`'s ``run``) takes a pointer argument as a Python
#: int holding the device address as well as a tensor (3.6.0 ``getPointer``, 3.9.0
#: ``extractPointer``: ``PyLong_Check`` first). For a tensor it calls ``data_ptr()`` and
#: asks the driver whether the address is device memory (``cuPointerGetAttribute``, which
#: takes the driver's lock); for an int it does neither.
LAUNCHER_TAKES_INT_POINTERS = True


def load_module(compiled: Any) -> None:
    """Load a ``CompiledKernel`` into the device context now (``_init_handles``; 3.6.0,
    3.9.0): reports ``OutOfResources`` (too much shared memory) here, not at launch. The
    load may start Triton's driver (a stored binary, the first of a process): its check
    first."""
    if not driver_gate.started:
        driver_gate.check_before_driver(compiled)
    compiled._init_handles()


@functools.lru_cache(maxsize=1)
def runtime_knobs() -> Any:
    """``triton.knobs.runtime`` (3.6.0, 3.9.0), the holder of the launch hook chains."""
    from triton import knobs as tknobs

    return tknobs.runtime


#: :func:`launch_hooked`'s common case as an expression over a name bound to
#: :func:`runtime_knobs` (for generated launch code; AttributeError: ask launch_hooked).
LAUNCH_HOOKED_CODE = "({rt}.launch_enter_hook.calls or {rt}.launch_exit_hook.calls)"


def launch_hooked(runtime: Any) -> bool:
    """Whether a launch hook (a profiler) is installed on ``runtime`` (:func:`runtime_knobs`);
    then Triton must build its launch metadata, so the call goes through the JIT.

    3.6.0 and 3.9.0: ``launch_enter_hook``/``launch_exit_hook`` are ``HookChain`` objects,
    never None, empty when no hook is set (``.calls``); a plain callable is a hook. Called
    on every direct launch: the common case is two attribute reads.
    """
    try:
        return bool(runtime.launch_enter_hook.calls or runtime.launch_exit_hook.calls)
    except AttributeError:  # a hook assigned in place of the chain
        enter, exit_ = runtime.launch_enter_hook, runtime.launch_exit_hook
        return bool(getattr(enter, "calls", enter)) or bool(getattr(exit_, "calls", exit_))


@functools.lru_cache(maxsize=1)
def device_and_stream() -> tuple[Callable[[], int], Callable[[int], int]]:
    """The active driver's ``get_current_device`` and ``get_current_stream(device)``
    (``triton.runtime.driver.active``; 3.6.0, 3.9.0)."""
    active = driver_gate.active_driver()
    get_device = active.get_current_device
    try:
        import torch

        # Triton's GPU driver binds torch.cuda.current_device, which runs torch's Python
        # lazy-init check on every call (about 0.4 us); once CUDA is initialised (a launch
        # has happened) the C getter it ends in returns the same device.
        if get_device is torch.cuda.current_device and torch.cuda.is_initialized():
            get_device = torch._C._cuda_getDevice
    except (ImportError, AttributeError):
        pass
    return get_device, active.get_current_stream


@functools.lru_cache(maxsize=1)
def _tensor_guards() -> Callable[..., Any] | None:
    """PyTorch's C++ tensor guard (``torch._C._dynamo.guards.TensorGuards``; PyTorch 2.11,
    2.13), or None when missing or when it does not behave as :func:`layout_check` needs:
    checked once on sample tensors (it must reject another dtype, shape, stride and
    device)."""
    try:
        import torch
        from torch._C._dynamo.guards import TensorGuards

        x = torch.zeros(2, 3)
        guard = _make_guard(TensorGuards, (x,))
        others = (
            torch.zeros(2, 3, dtype=torch.float64),
            torch.zeros(3, 2),
            x.t(),
            torch.zeros(2, 3, device="meta"),  # another device (the fused launch relies on it)
        )
        if guard.check(x) and not any(guard.check(o) for o in others):
            return TensorGuards  # type: ignore[no-any-return]
    except Exception:  # any surprise: the hot path keeps building full call keys
        pass
    return None


def _make_guard(guards_cls: Any, tensors: Sequence[Any]) -> Any:
    # Static sizes and strides: None for the dynamic-dimension lists (2.11, 2.13).
    return guards_cls(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)


def layout_check(tensors: Sequence[Any]) -> Callable[..., bool] | None:
    """A C-level check that tensors have the class, dtype, device, sizes and strides of
    ``tensors`` (Dynamo's guard for compiled graphs: one call for all, about 0.1 us per
    tensor against about 0.5 us for reading ``dtype``, ``shape`` and ``stride()``). It
    may reject more than a call key would (``requires_grad``, dispatch keys), never
    less. None where PyTorch has no such guard: callers build the full key instead."""
    guards_cls = _tensor_guards()
    if guards_cls is None:
        return None
    try:
        guard = _make_guard(guards_cls, tensors)
        check: Callable[..., bool] = guard.check
        return check if check(*tensors) else None
    except Exception:
        return None


def current_target() -> Any:
    """The current device's ``GPUTarget`` (``driver.active.get_current_target``; 3.6, 3.9)."""
    return driver_gate.active_driver().get_current_target()


def _driver_unstarted_on_cuda() -> bool:
    """Whether Triton's driver has not started and would be CUDA's (no other backend
    chosen, PyTorch sees an NVIDIA GPU)."""
    from triton.runtime import driver

    started = getattr(driver, "_active", None) or getattr(driver, "_default", None)
    if started is not None or os.environ.get("TRITON_DEFAULT_BACKEND"):
        return False
    import torch

    return bool(torch.cuda.is_available()) and torch.version.hip is None


def target_before_driver() -> Any:
    """:func:`current_target` without starting Triton's driver where it has not started
    and would be CUDA's: then PyTorch answers as that driver does (``CudaDriver.
    get_current_target``: capability major * 10 + minor, warp size 32; 3.6.0, 3.9.0).

    The driver's first use builds Triton's C utilities with the host compiler on an empty
    Triton cache (0.41 s on the H100 machine); a first call that tunes starts it in
    :func:`warm_compile_caches`, beside hashing Triton, instead of alone before it."""
    if not _driver_unstarted_on_cuda():
        return current_target()
    import torch
    from triton.backends.compiler import GPUTarget

    major, minor = torch.cuda.get_device_capability(torch.cuda.current_device())
    return GPUTarget("cuda", major * 10 + minor, 32)


def backend_hash() -> str:
    """Triton's backend hash of the current device (ptxas version, arch; 3.6.0, 3.9.0)."""
    from triton.compiler.compiler import make_backend

    return str(make_backend(target_before_driver()).hash())


def cache_invalidating_env() -> dict[str, str]:
    """Triton's environment variables that change compiled code
    (``triton._C.libtriton.get_cache_invalidating_env_vars``; 3.6.0, 3.9.0). Read again
    only when the environment changed (each read asks for every variable Triton knows)."""
    return dict(_cache_invalidating_env())


@knobs.per_environ
def cache_invalidating_items() -> tuple[tuple[str, str], ...]:
    """:func:`cache_invalidating_env` as sorted items, hashable (a memo's key part), made
    again only when the environment changed."""
    return tuple(sorted(_cache_invalidating_env().items()))


#: Variables Triton reads into a kernel's compile options (``CUDAOptions.ptx_options``,
#: ``debug``, ``instrumentation_mode``; ``knobs.nvidia``, ``knobs.runtime``,
#: ``knobs.compilation``: 3.6.0, 3.8.0, 3.9.0) or that replace what it compiles, and that
#: ``get_cache_invalidating_env_vars`` leaves out: Triton's cache key has them through the
#: options, and another value compiles other code.
OPTION_VARIABLES = (
    "PTXAS_OPTIONS",
    "TRITON_DEBUG",
    "TRITON_INSTRUMENTATION_MODE",
    "TRITON_KERNEL_OVERRIDE",
    "TRITON_LIBDEVICE_PATH",
    "TRITON_MOCK_PTX_VERSION",
)


def codegen_env() -> dict[str, str]:
    """Every set variable that changes the code Triton compiles, sorted: its
    cache-invalidating ones (:func:`cache_invalidating_env`) and :data:`OPTION_VARIABLES`.
    A decision is keyed by them (a record tuned under ``PTXAS_OPTIONS`` is another kernel's);
    a compile's cache key uses Triton's own list, as Triton does."""
    env = dict(_cache_invalidating_env())
    env.update({name: value for name in OPTION_VARIABLES if (value := os.environ.get(name))})
    return dict(sorted(env.items()))


@knobs.per_environ
def _cache_invalidating_env() -> dict[str, str]:
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return dict(get_cache_invalidating_env_vars())


# -- binding and packing a call (what JITFunction.run derives) --------------------------------


def run_kwargs(
    jit_fn: Any, kwargs: Mapping[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The keyword arguments ``JITFunction.run`` hands its binder: ``debug`` from the kernel
    or ``knobs.runtime.debug``, and the compilation knobs ``instrumentation_mode`` and
    ``fpsan_homomorphic_casts`` where Triton has them (3.6.0, 3.9.0)."""
    from triton import knobs as tknobs

    merged: dict[str, Any] = {**dict(kwargs), **dict(options)}
    merged["debug"] = merged.get("debug", jit_fn.debug) or tknobs.runtime.debug
    for name in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(tknobs.compilation, name):
            merged[name] = getattr(tknobs.compilation, name)
    return merged


def make_binder(jit_fn: Any, backend: Any) -> Callable[..., Any]:
    """Triton's generated binder for ``backend``: ``binder(*args, **kwargs)`` returns
    ``(bound_args, specialization, options)`` (``triton.runtime.jit.
    create_function_from_signature``; 3.6.0, 3.9.0). It execs generated code: callers
    hold the compile lock."""
    from triton.runtime.jit import create_function_from_signature

    return create_function_from_signature(jit_fn.signature, jit_fn.params, backend)


def binding_jit(interpreted: Any) -> Any:
    """A ``JITFunction`` of an ``InterpretedFunction``'s function and ``@triton.jit`` options
    (its ``fn`` and ``kwargs``; 3.6.0, 3.9.0), for its parameters and Triton's binder: how a
    launch on a GPU would specialise a call made under the interpreter. Never compiled."""
    from triton.runtime.jit import JITFunction

    return JITFunction(interpreted.fn, **getattr(interpreted, "kwargs", {}))


def launch_key(specialization: Any, options: Any, memo: dict[Any, str] | None = None) -> str:
    """``JITFunction.run``'s key of its per-device kernel table for a binder's output
    (``triton.runtime.jit.compute_cache_key``; 3.6.0, 3.9.0): one compiled kernel per key.
    ``memo``: the caller's ``kernel_key_cache`` for one kernel and device, as ``run`` keeps
    its own (the string form is built once per specialization and options)."""
    from triton.runtime.jit import compute_cache_key

    return compute_cache_key({} if memo is None else memo, specialization, options)  # type: ignore[no-any-return]


def pack_args(
    jit_fn: Any,
    backend: Any,
    kwargs: Mapping[str, Any],
    bound_args: Any,
    specialization: Any,
    options: Any,
) -> tuple[Any, Any, Any, Any]:
    """``JITFunction._pack_args``: ``(options, signature, constexprs, attrs)`` for an
    ``ASTSource`` (3.6.0, 3.9.0)."""
    return jit_fn._pack_args(backend, kwargs, bound_args, specialization, options)  # type: ignore[no-any-return]


def mock_tensor(value: Any) -> Any:
    """``MockTensor.wrap_dtype``: a torch dtype stands for a tensor of that dtype when
    binding for a target without a device (``triton.runtime.jit``; 3.6.0, 3.9.0)."""
    from triton.runtime.jit import MockTensor

    return MockTensor.wrap_dtype(value)


def options_dict(options: Any) -> dict[str, Any]:
    """A backend's parsed options dataclass as the dict ``triton.compile`` takes."""
    return dict(options.__dict__)
