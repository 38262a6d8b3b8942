"""Triton/PyTorch boundary layer: every access to a private or unstable Triton internal.

tunedsl reaches below Triton's public API in a few places (the direct launcher, stored
binaries, the compile pool's async split, cross-compiling). Each such access is one small
function here, with a comment naming the Triton versions it was checked on; no other module
of tunedsl names a private Triton or PyTorch attribute (``tests/unit/test_compat.py`` greps
the source tree). A Triton upgrade is then checked here, function by function.

**Version gate.** The internals are used only on the tested Triton versions
(:data:`TESTED_TRITON`, inclusive, by major.minor). On any other version
:func:`internals_usable` is False, with one :class:`UntestedTritonWarning`: the direct
launcher, stored binaries and the compile pool's async split turn themselves off, and
launches and compiles go through Triton's public JIT path (``kernel[grid](...)``,
``JITFunction.warmup``). Cross-compiling (``precompile --target``) has no public path; it
is still attempted and reports a failure as a failed configuration.

Everything imports triton lazily, inside the functions: ``import tunedsl`` never loads it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tunedsl.errors import UntestedTritonWarning
from tunedsl.warn import warn_once

# Triton versions (major, minor) whose internals every function below was checked on: 3.6.0
# on the H100 of the benchmarks, 3.9.0 on the CPU development machine (interpreter and
# cross-compiling to a cubin). Widen only after running the launch and binary tests.
TESTED_TRITON: tuple[tuple[int, int], tuple[int, int]] = ((3, 6), (3, 9))


# -- the version gate -------------------------------------------------------------------------


def version_tested(version: str) -> bool:
    """Whether a Triton version string (``"3.6.0"``, ``"3.9.0+git1a2b"``, ``"3.10.0rc1"``)
    is inside :data:`TESTED_TRITON`. Unparseable text is untested."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    if match is None:
        return False
    found = (int(match.group(1)), int(match.group(2)))
    low, high = TESTED_TRITON
    return low <= found <= high


def untested_message(version: str) -> str:
    low, high = (".".join(map(str, v)) for v in TESTED_TRITON)
    return (
        f"tunedsl: Triton {version} is outside the versions tunedsl was tested with "
        f"({low} to {high}); the direct launcher, stored kernel binaries and the parallel "
        "compile split are off, and kernels launch through Triton's public JIT path "
        "(correct, with more per-call overhead). Install a tested Triton for full speed."
    )


def gate(version: str) -> bool:
    """:func:`version_tested`, warning once per process when it is False."""
    if version_tested(version):
        return True
    topic = f"triton-version:{version}"
    warn_once(topic, untested_message(version), UntestedTritonWarning, stacklevel=3)
    return False


@functools.lru_cache(maxsize=1)
def internals_usable() -> bool:
    """True when the installed Triton is a tested version (a process constant)."""
    import triton

    return gate(str(triton.__version__))


# -- the interpreter --------------------------------------------------------------------------


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter: Triton's own knob
    ``triton.knobs.runtime.interpret`` (``TRITON_INTERPRET`` with Triton's truthiness:
    ``1``, ``true``, ``on``, ``yes``, ``y``, any case; or set in Python).
    Checked on 3.6.0 and 3.9.0 (``knobs.runtime.interpret``, an ``env_bool``)."""
    from tunedsl.knobs import triton_interpret_env

    try:
        from triton import knobs as tknobs
    except ImportError:  # no Triton installed (e.g. `tunedsl precompile` probing): its rule
        return triton_interpret_env()
    value = getattr(getattr(tknobs, "runtime", None), "interpret", None)
    if value is None:  # an untested Triton without the knob: its environment rule
        return triton_interpret_env()
    return bool(value)


def is_interpreted_function(kernel: Any) -> bool:
    """``@triton.jit`` under the interpreter returns an ``InterpretedFunction`` (3.6, 3.9)."""
    return type(kernel).__name__ == "InterpretedFunction"


# -- JITFunction facts ------------------------------------------------------------------------


def is_jit_function(kernel: Any) -> bool:
    """A real ``JITFunction`` (it has the per-device binder table ``device_caches``; the
    interpreter's functions and wrappers do not). Checked on 3.6.0 and 3.9.0."""
    return hasattr(kernel, "device_caches")


def jit_source_hash(kernel: Any) -> str | None:
    """``JITFunction.cache_key``: Triton's hash of the source and every called ``@jit``
    function (3.6.0, 3.9.0); None for anything else."""
    if not is_jit_function(kernel):
        return None
    key = getattr(kernel, "cache_key", None)
    return key if isinstance(key, str) else None


def constexpr_params(kernel: Any) -> frozenset[str] | None:
    """Names of the constexpr parameters from ``JITFunction.params`` (``KernelParam.name``,
    ``.is_constexpr``; 3.6.0, 3.9.0); None when the kernel has no ``params``."""
    params = getattr(kernel, "params", None)
    if params is None:
        return None
    return frozenset(p.name for p in params if getattr(p, "is_constexpr", False))


def param_specs(jit_fn: Any) -> list[tuple[str, bool]]:
    """``(name, is_constexpr)`` of every ``KernelParam`` in order (3.6.0, 3.9.0)."""
    return [(p.name, bool(p.is_constexpr)) for p in jit_fn.params]


def has_pre_run_hooks(kernel: Any) -> bool:
    """Whether ``JITFunction.add_pre_run_hook`` installed hooks (``pre_run_hooks``; 3.6, 3.9)."""
    return bool(getattr(kernel, "pre_run_hooks", None))


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
    call). A name given twice raises ``TypeError``, as in ``kernel[grid](...)``."""
    return kernel.run(*args, grid=grid, warmup=False, **kwargs, **dyn_kwargs, **options)


def jit_warmup(
    jit_fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]
) -> Any:
    """Compile (never launch) through ``JITFunction.warmup(*args, grid=(1,), **...)``: the
    ``CompiledKernel``, a future of one under an async-compile mode, or None when a
    ``jit_cache_hook`` took over (3.6.0, 3.9.0)."""
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
    # 3.9.0: one generic C launcher, told the signature, kernel arguments as one tuple
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
# ``CudaLauncher.__call__(self, gridX, gridY, gridZ, stream, function, *args)`` and 3.9.0's
# (the launch metadata and hooks named, gsan added). A launcher whose ``__call__`` reads
# any other name (a newer Triton that computes something more per launch) is called as is.
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
    3.9.0): reports ``OutOfResources`` (too much shared memory) here, not at launch."""
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
    from triton.runtime import driver

    active = driver.active
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
    from triton.runtime import driver

    return driver.active.get_current_target()


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
    (``triton._C.libtriton.get_cache_invalidating_env_vars``; 3.6.0, 3.9.0)."""
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


# -- the compile pool's async split -----------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _keyed_mode_class() -> Any:
    from triton.runtime import _async_compile

    class KeyedMode(_async_compile.AsyncCompileMode):  # type: ignore[misc]
        """Triton's AsyncCompileMode that remembers the cache key of the compile it gets."""

        cache_key: str | None = None

        def submit(self, key: Any, *rest: Any) -> Any:
            self.cache_key = str(key)
            return super().submit(key, *rest)

    return KeyedMode


def keyed_async_mode(executor: Any) -> Any:
    """An ``AsyncCompileMode`` over ``executor`` that records the submitted cache key
    (``mode.cache_key``). ``triton.runtime._async_compile``: 3.6.0 and 3.9.0 submit
    ``(key, compile_fn)`` once per compiling ``warmup``."""
    return _keyed_mode_class()(executor)


@contextmanager
def async_compile_mode(mode: Any) -> Iterator[None]:
    """Make ``mode`` Triton's active async-compile mode in this context (3.6.0, 3.9.0)."""
    from triton.runtime import _async_compile

    token = _async_compile.active_mode.set(mode)
    try:
        yield
    finally:
        _async_compile.active_mode.reset(token)


# -- Triton's cache: key format and file naming -----------------------------------------------


def triton_cache_key(src: Any, backend: Any, options: Any, env: Mapping[str, str]) -> str:
    """Triton's cache key of a compile (``triton.runtime.cache.get_cache_key``; 3.6, 3.9)."""
    from triton.runtime.cache import get_cache_key

    return str(get_cache_key(src, backend, options, dict(env)))


def triton_key() -> str:
    """Triton's hash of its own sources and shared library, computed once per process
    (``triton.runtime.cache.triton_key``, an ``lru_cache``; 3.6.0, 3.9.0)."""
    from triton.runtime import cache

    return str(cache.triton_key())


def use_triton_key(key: str) -> None:
    """In a compile worker: answer ``triton_key()`` with ``key``, the tuning process's,
    instead of hashing Triton again. A forked worker runs the same Triton files, and the
    parent checks each load against the worker's hash. Triton's own warm-up pool does the
    same (``triton._compile_warmup_pool._initialize_preload_worker``, 3.9.0); 3.6.0 and
    3.9.0 look the function up in ``triton.runtime.cache`` at each ``get_cache_key``."""
    from triton.runtime import cache

    if getattr(cache.triton_key, "tunedsl_key", None) == key:
        return

    def known() -> str:
        return key

    known.tunedsl_key = key  # type: ignore[attr-defined]
    cache.triton_key = known


_warming_lock = threading.Lock()
_warming: dict[str, threading.Thread] = {}  # "key", "utils": started by start_warming


def start_warming() -> None:
    """Start, on background threads and once per process, what a first compile waits for:
    :func:`triton_key` (a hash of Triton's sources and shared library, 0.43 s on the H100
    machine) and, where Triton's CUDA driver has not started, its C utilities (built by
    the host compiler into Triton's cache on an empty cache, 0.37-0.42 s:
    ``triton.backends.nvidia.driver.CudaUtils``, a singleton whose construction touches no
    driver state; 3.6.0, 3.9.0). A tune calls this as soon as it knows it will compile,
    and :func:`warm_compile_caches` waits for both. Errors are left for the caller that
    needs the result: it runs the same step again and meets them there."""
    with _warming_lock:
        if _warming:
            return
        _warming["key"] = _in_background(triton_key, "tunedsl-triton-key")
        if _driver_unstarted_on_cuda():
            _warming["utils"] = _in_background(_build_cuda_utils, "tunedsl-cuda-utils")


def _in_background(step: Callable[[], Any], name: str) -> threading.Thread:
    def run() -> None:
        try:
            step()
        except BaseException:  # the caller that needs it meets it again
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def _driver_unstarted_on_cuda() -> bool:
    """Whether Triton's driver has not started and would be CUDA's (no other backend
    chosen, PyTorch sees an NVIDIA GPU)."""
    from triton.runtime import driver

    started = getattr(driver, "_active", None) or getattr(driver, "_default", None)
    if started is not None or os.environ.get("TRITON_DEFAULT_BACKEND"):
        return False
    import torch

    return bool(torch.cuda.is_available()) and torch.version.hip is None


def _build_cuda_utils() -> None:
    from triton.backends.nvidia.driver import CudaUtils

    CudaUtils()


def warm_compile_caches(target: Any | None) -> None:
    """Compute what every compile in a process computes once (:func:`triton_key`, Triton's
    driver and the backend's hash with the ptxas version, for ``target`` or the current
    device's), before this process's compiles start; compile workers get the key with each
    job (:func:`use_triton_key`). What :func:`start_warming` began is waited for, not
    started again: the driver starts once its C utilities are built, beside the hash."""
    from triton.compiler.compiler import make_backend

    start_warming()
    utils = _warming.get("utils")
    if target is None and utils is not None:  # the driver starts here: its utilities first
        utils.join()
    make_backend(current_target() if target is None else target).hash()
    _warming["key"].join()
    triton_key()  # the thread's result, or the error it met, raised here


def max_shared_memory(device: int | None) -> int:
    """The shared memory a kernel may use on CUDA device ``device`` (None: the current one),
    as Triton's loader checks it (``max_shared_mem``:
    ``driver.active.utils.get_device_properties``; 3.6, 3.9)."""
    from triton.runtime import driver

    if device is None:
        device = driver.active.get_current_device()
    return int(driver.active.utils.get_device_properties(device)["max_shared_mem"])


def shared_memory_overrun(err: BaseException) -> tuple[int, int] | None:
    """(required, limit) where ``err`` is Triton's ``OutOfResources`` for shared memory."""
    from triton.runtime.errors import OutOfResources

    if isinstance(err, OutOfResources) and getattr(err, "name", None) == "shared memory":
        return int(err.required), int(err.limit)
    return None


_shared_limit: list[int] = []  # the compiling process's limit: stop_over_shared_memory
_shared_check_installed: list[bool] = []


def stop_over_shared_memory(limit: int | None) -> None:
    """From now on in this process, an NVIDIA compile whose kernel needs more than ``limit``
    bytes of shared memory raises ``OutOfResources`` after its LLVM-IR stage (None: no
    check), instead of running LLVM's code generation and ptxas for a kernel that no load
    would accept: the loader raises the same error on the same condition, ``metadata.shared
    > max_shared_mem`` (``CompiledKernel._init_handles``).

    For forked compile workers alone: it wraps the ``ptx`` stage that
    ``CUDABackend.add_stages`` adds (3.6, 3.9), process-wide. The cache key does not change
    (Triton's stage-inspection hook would add to it); a kernel stopped here writes no
    metadata, so Triton's cache has no entry for it."""
    _shared_limit[:] = [] if limit is None else [int(limit)]
    if limit is None or _shared_check_installed:
        return
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime.errors import OutOfResources

    add_stages = CUDABackend.add_stages

    def add_stages_checked(self: Any, stages: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        result = add_stages(self, stages, *args, **kwargs)
        make_ptx = stages.get("ptx")
        if make_ptx is None:
            return result

        def checked(src: Any, metadata: dict[str, Any]) -> Any:
            shared = metadata.get("shared")
            if _shared_limit and isinstance(shared, int) and shared > _shared_limit[0]:
                raise OutOfResources(shared, _shared_limit[0], "shared memory")
            return make_ptx(src, metadata)

        stages["ptx"] = checked
        return result

    CUDABackend.add_stages = add_stages_checked
    _shared_check_installed.append(True)


def out_of_resources(required: int, limit: int) -> Exception:
    """Triton's own error for a kernel over the shared-memory limit (as its loader raises)."""
    from triton.runtime.errors import OutOfResources

    return OutOfResources(required, limit, "shared memory")


def prebuild_launcher(
    jit_fn: Any, signature: Mapping[str, Any], constexprs: Mapping[Any, Any]
) -> bool:
    """Build a kernel's per-signature C launcher now, into Triton's cache, where the first
    module load of any of its configurations finds it; False where there is none to build.

    Triton 3.6 generates C for each kernel signature and compiles it with the host compiler
    on the kernel's first load (``CudaLauncher.__init__``: ``make_launcher(constants,
    signature, tensordesc_meta)`` then ``compile_module_from_src(name="__triton_launcher")``,
    about 0.7 s on the H100 machine), after the first configuration's compile; built here
    beside the compiles, it is off that path. 3.9.0's launcher is generic: nothing to build.
    The source does not depend on the constexprs' values, only on which arguments are
    constant; a kernel with tensor descriptors gets its own at load (``tensordesc_meta``)."""
    from triton.backends.nvidia import driver as nv

    make = getattr(nv, "make_launcher", None)
    build = getattr(nv, "compile_module_from_src", None)
    if make is None or build is None:
        return False
    if list(inspect.signature(make).parameters) != ["constants", "signature", "tensordesc_meta"]:
        return False
    names = list(jit_fn.arg_names)
    constants = {(names.index(k),) if isinstance(k, str) else k: v for k, v in constexprs.items()}
    source = make(constants, dict(signature), None)
    build(
        src=source,
        name="__triton_launcher",
        library_dirs=nv.library_dirs(),
        include_dirs=nv.include_dirs,
        libraries=nv.libraries,
    )
    return True


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
