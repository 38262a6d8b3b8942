"""The one place the runtime touches triton and torch: launching, timing, device facts, keys.

Compiling belongs to ``triton_compile.py``. Everything here is imported lazily, the first
time a site tunes or launches; ``import tunedsl`` never loads torch or triton.

Two ways to launch a chosen variant:

- **JIT**: ``kernel.run(*args, grid=grid, warmup=False, **kwargs, **options)``, exactly
  what ``kernel[grid](...)`` does (``__getitem__`` only wraps this call in a lambda).
- **direct** (GPU only, ``TUNEDSL_DIRECT_LAUNCH=0`` turns it off): after the first JIT
  launch returned the ``CompiledKernel``, later calls run Triton's own binder to get the
  exact specialization tuple (dtypes, 16-byte alignment, ints equal to 1 or divisible by
  16, constexpr values), look the ``CompiledKernel`` up by it, and call its launcher. This
  skips the JIT's per-call option parsing, cache-key string building and launch-hook
  metadata, and is exact because the lookup key *is* Triton's specialization. Launch hooks
  (profilers) or any surprise send the call back through the JIT path. Triton's check that
  the kernel's global variables did not change since compilation runs on the JIT launches only.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.runtime.hints import INTERPRETER, TargetFacts
from tunedsl.runtime.keys import is_tensor


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def direct_launch_enabled() -> bool:
    return os.environ.get("TUNEDSL_DIRECT_LAUNCH", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


# -- kernels ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelInfo:
    """What the runtime needs to know about one ``@triton.jit`` kernel."""

    arg_names: tuple[str, ...]
    constexpr_names: frozenset[str]
    defaults: dict[str, Any]
    module: str
    qualname: str
    file: str
    source_hash: str
    jit: bool  # a real JITFunction (direct launch possible), not the interpreter's

    @property
    def constexpr_positions(self) -> frozenset[int]:
        return frozenset(i for i, n in enumerate(self.arg_names) if n in self.constexpr_names)

    def describe(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "qualname": self.qualname,
            "file": self.file,
            "source_hash": self.source_hash,
            "arg_names": list(self.arg_names),
        }


def _python_fn(kernel: Any) -> Any:
    fn = kernel
    for _ in range(8):  # unwrap Autotuner/Heuristics-style wrappers down to the function
        inner = getattr(fn, "fn", None)
        if inner is None:
            break
        fn = inner
    return fn


def _is_constexpr_annotation(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return getattr(annotation, "__name__", "") == "constexpr"


@functools.lru_cache(maxsize=256)
def _kernel_info_cached(kernel: Any) -> KernelInfo:
    fn = _python_fn(kernel)
    params = getattr(kernel, "params", None)
    signature = inspect.signature(fn)
    names = tuple(signature.parameters)
    if params is not None:
        constexprs = frozenset(p.name for p in params if getattr(p, "is_constexpr", False))
    else:
        constexprs = frozenset(
            n for n, p in signature.parameters.items() if _is_constexpr_annotation(p.annotation)
        )
    defaults = {
        n: p.default
        for n, p in signature.parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    cache_key = getattr(kernel, "cache_key", None) if hasattr(kernel, "device_caches") else None
    if isinstance(cache_key, str):
        source_hash = cache_key  # Triton's hash covers the source and every called @jit function
    else:
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = repr(fn)
        source_hash = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return KernelInfo(
        arg_names=names,
        constexpr_names=constexprs,
        defaults=defaults,
        module=getattr(fn, "__module__", "?") or "?",
        qualname=getattr(fn, "__qualname__", repr(fn)),
        file=inspect.getsourcefile(fn) or "?",
        source_hash=source_hash,
        jit=hasattr(kernel, "device_caches"),
    )


def kernel_info(kernel: Any) -> KernelInfo:
    try:
        return _kernel_info_cached(kernel)
    except TypeError:  # an unhashable kernel object: no caching
        return _kernel_info_cached.__wrapped__(kernel)


_TRITON_DTYPES = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "i1",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


def triton_type(value: Any, constexpr: bool) -> Any:
    """Triton's signature string for one argument, for ``precompile --replay``."""
    from tunedsl.runtime.keys import json_safe

    if constexpr:
        return {"constexpr": json_safe(value)}
    if is_tensor(value):
        name = str(value.dtype).removeprefix("torch.")
        return "*" + _TRITON_DTYPES.get(name, name)
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "i32"
        return "i64" if value < 2**63 else "u64"
    if isinstance(value, float):
        return "fp32"
    if value is None:
        return {"constexpr": None}
    return type(value).__name__


def triton_signature(info: KernelInfo, bound: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: triton_type(bound[name], name in info.constexpr_names)
        for name in info.arg_names
        if name in bound
    }


def bind_arguments(
    info: KernelInfo, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Parameter name -> value for a launch (defaults filled in)."""
    bound = dict(info.defaults)
    bound.update(zip(info.arg_names, args, strict=False))
    bound.update(kwargs)
    return bound


# -- process facts ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def device_facts() -> dict[str, Any]:
    """Type, name and compute capability of the current device (a process constant)."""
    if interpreting():
        return {"type": "interpreter", "name": "cpu"}
    import torch

    if not torch.cuda.is_available():
        return {"type": "cpu", "name": "cpu"}
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    kind = "hip" if getattr(torch.version, "hip", None) else "cuda"
    return {
        "type": kind,
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "arch": getattr(props, "gcnArchName", None) if kind == "hip" else None,
        "sm_count": props.multi_processor_count,
        "regs_per_sm": int(getattr(props, "regs_per_multiprocessor", 65536) or 65536),
        "max_threads_per_sm": int(getattr(props, "max_threads_per_multi_processor", 2048) or 2048),
        "warp_size": int(getattr(props, "warp_size", 32) or 32),
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
    }


def target_facts() -> TargetFacts:
    facts = device_facts()
    if facts["type"] not in ("cuda", "hip"):
        return INTERPRETER
    return TargetFacts(
        backend=facts["type"],
        regs_per_sm=facts["regs_per_sm"],
        max_threads_per_sm=facts["max_threads_per_sm"],
        warp_size=facts["warp_size"],
    )


@functools.lru_cache(maxsize=1)
def toolchain() -> dict[str, Any]:
    """tunedsl, Triton and PyTorch versions and Triton's backend hash (ptxas version, arch)."""
    import torch
    import triton

    from tunedsl import __version__

    backend_hash = "interpreter"
    if not interpreting():
        try:
            from triton.compiler.compiler import make_backend
            from triton.runtime import driver

            backend_hash = make_backend(driver.active.get_current_target()).hash()
        except Exception as err:
            backend_hash = f"unavailable: {type(err).__name__}"
    return {
        "tunedsl": __version__,
        "triton": triton.__version__,
        "torch": torch.__version__,
        "triton_backend": backend_hash,
    }


def triton_env() -> dict[str, str]:
    """Triton's cache-invalidating environment variables (they change the compiled code)."""
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars

        return dict(sorted(get_cache_invalidating_env_vars().items()))
    except Exception:
        return {}


# -- tensors ---------------------------------------------------------------------------------


def clone(x: Any) -> Any:
    return x.clone()


def copy_into(dst: Any, src: Any) -> None:
    dst.copy_(src)


def zero(x: Any) -> None:
    x.zero_()


def allclose(actual: Any, expected: Any, rtol: float, atol: float) -> str | None:
    """None when close; otherwise a short description of the mismatch."""
    import torch

    expected = torch.as_tensor(expected, device=actual.device)
    if actual.shape != expected.shape:
        return f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    a = actual.float() if actual.is_floating_point() else actual
    e = expected.to(a.dtype)
    if torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
        return None
    diff = (a.double() - e.double()).abs()
    return f"max abs difference {diff.max().item():.3g} (rtol={rtol}, atol={atol})"


def synchronize() -> None:
    if interpreting():
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# -- launching -------------------------------------------------------------------------------


# Triton's interpreter keeps the grid of the running launch in module globals, so two
# threads interpreting at once corrupt each other; interpreted launches take turns.
INTERPRETER_LOCK = threading.RLock()


def launch_jit(
    kernel: Any, grid: tuple[int, ...], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Any:
    """``kernel[grid](*args, **kwargs)`` without building the ``__getitem__`` lambda."""
    if interpreting():
        with INTERPRETER_LOCK:
            return kernel.run(*args, grid=grid, warmup=False, **kwargs)
    return kernel.run(*args, grid=grid, warmup=False, **kwargs)


def make_launcher(kernel: Any, options: Mapping[str, Any]) -> JitLauncher | DirectLauncher:
    info = kernel_info(kernel)
    if info.jit and direct_launch_enabled():
        return DirectLauncher(kernel, options, info)
    return JitLauncher(kernel, options)


class JitLauncher:
    """Launch through Triton's JIT dispatcher (the interpreter, or direct launch off)."""

    __slots__ = ("kernel", "lock", "options")

    def __init__(self, kernel: Any, options: Mapping[str, Any]) -> None:
        self.kernel = kernel
        self.options = dict(options)
        self.lock = INTERPRETER_LOCK if interpreting() else None

    def __call__(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
        holes: Any,
    ) -> None:
        if self.lock is None:
            self.kernel.run(
                *args, grid=grid, warmup=False, **static_kwargs, **dyn_kwargs, **self.options
            )
            return
        with self.lock:
            self.kernel.run(
                *args, grid=grid, warmup=False, **static_kwargs, **dyn_kwargs, **self.options
            )


class DirectLauncher:
    """Launch one call key's chosen variant straight through its ``CompiledKernel``.

    One per site entry (call key). The call key already refines Triton's specialization of
    the keyed arguments: dtypes, 16-byte alignment (the key is built ``with_align``), int
    classes (==1, %16, 32/64-bit), constexpr values. What the key does not cover is checked
    per call: the configuration-dependent keyword arguments must equal those of the first
    launch (a constexpr such as ``EVEN=n % $tile == 0`` may change), there must be no
    configuration-dependent positional argument, no launch hook, and the device must be one
    this launcher has a ``CompiledKernel`` for. Anything else goes through the JIT.
    """

    __slots__ = (
        "compiled",
        "disabled",
        "dyn0",
        "info",
        "kernel",
        "options",
        "tail_const",
        "tail_plan",
    )

    def __init__(self, kernel: Any, options: Mapping[str, Any], info: KernelInfo) -> None:
        self.kernel = kernel
        self.options = dict(options)
        self.info = info
        self.compiled: dict[int, tuple[Any, Any, Any]] = {}
        self.dyn0: Mapping[str, Any] | None = None
        self.tail_plan: tuple[tuple[bool, Any], ...] = ()
        self.tail_const: tuple[Any, ...] | None = None
        self.disabled = not (direct_launch_enabled() and info.jit)

    def jit(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> Any:
        return self.kernel.run(
            *args, grid=grid, warmup=False, **static_kwargs, **dyn_kwargs, **self.options
        )

    def __call__(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
        holes: Any,
    ) -> None:
        if self.disabled or holes or dyn_kwargs != self.dyn0 or _hooks_active():
            if self.dyn0 is None and not self.disabled and not holes:
                self._first_launch(grid, args, static_kwargs, dyn_kwargs)
            else:
                self.jit(grid, args, static_kwargs, dyn_kwargs)
            return
        device = _get_device()
        compiled = self.compiled.get(device)
        if compiled is None:
            self._first_launch(grid, args, static_kwargs, dyn_kwargs)
            return
        tail = self.tail_const
        if tail is None:
            tail = tuple(static_kwargs[v] if is_static else v for is_static, v in self.tail_plan)
        run, function, packed_metadata = compiled
        n = len(grid)
        run(
            grid[0],
            grid[1] if n > 1 else 1,
            grid[2] if n > 2 else 1,
            _get_stream(device),
            function,
            packed_metadata,
            None,  # launch metadata: only built for launch hooks, and there are none
            None,
            None,
            *args,
            *tail,
        )

    def _first_launch(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> None:
        compiled = self.jit(grid, args, static_kwargs, dyn_kwargs)
        try:
            self._capture(compiled, args, static_kwargs, dyn_kwargs)
        except Exception:  # an unexpected Triton version: keep the JIT path
            self.disabled = True

    def _capture(
        self,
        compiled: Any,
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> None:
        if hasattr(compiled, "result"):  # Triton 3.6's async compile may return a future
            compiled = compiled.result()
        run = compiled.run  # the property loads the module, which sets .function
        function = compiled.function
        if function is None or not hasattr(compiled, "packed_metadata"):
            self.disabled = True
            return
        plan: list[tuple[bool, Any]] = []
        for name in self.info.arg_names[len(args) :]:
            if name in static_kwargs:
                plan.append((True, name))
            elif name in dyn_kwargs:
                plan.append((False, dyn_kwargs[name]))
            elif name in self.info.defaults:
                plan.append((False, self.info.defaults[name]))
            else:
                self.disabled = True  # Triton would have raised; never guess
                return
        self.tail_plan = tuple(plan)
        self.tail_const = None if any(s for s, _ in plan) else tuple(v for _, v in plan)
        self.dyn0 = dict(dyn_kwargs)
        self.compiled[_get_device()] = (run, function, compiled.packed_metadata)


def _hooks_active() -> bool:
    """Whether a launch hook (a profiler) is installed: then Triton must build its metadata."""
    runtime = _runtime_knobs()
    enter = runtime.launch_enter_hook
    exit_ = runtime.launch_exit_hook
    # HookChain (3.6+) is never None: empty means no hook; a plain callable is a hook.
    return bool(getattr(enter, "calls", enter)) or bool(getattr(exit_, "calls", exit_))


@functools.lru_cache(maxsize=1)
def _runtime_knobs() -> Any:
    from triton import knobs

    return knobs.runtime


@functools.lru_cache(maxsize=1)
def _device_fns() -> tuple[Callable[[], int], Callable[[int], int]]:
    from triton.runtime import driver

    active = driver.active
    return active.get_current_device, active.get_current_stream


def _get_device() -> int:
    return _device_fns()[0]()


def _get_stream(device: int) -> int:
    return _device_fns()[1](device)


# -- timing ----------------------------------------------------------------------------------


class WallTimer:
    """Wall-clock timing of synchronous launches (the interpreter runs them on the CPU)."""

    kind = "wall"

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        times = []
        for _ in range(reps):
            setup()
            start = time.perf_counter()
            run()
            synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return times


class CudaEventTimer:
    """Device-event timing with the L2 cache flushed before every repetition.

    Before each repetition: ``setup()`` (restore/zero arguments, pre-hook), then a write of
    a buffer twice the L2 size (so no input is served from L2), then the start event; only
    the launch lies between the events.
    """

    kind = "cuda-events"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        l2 = device_facts().get("l2_bytes") or 50 * 2**20
        # At least 256 MiB (as triton.testing.do_bench): writing it keeps the GPU busy while
        # the CPU enqueues the start event and the launch, so no dispatch gap is timed.
        self.flush_buffer = torch.empty(max(2 * l2, 256 * 2**20), dtype=torch.int8, device="cuda")

    def flush_l2(self) -> None:
        self.flush_buffer.zero_()

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            setup()
            self.flush_l2()
            starts[i].record()
            run()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=False)]


def make_timer() -> WallTimer | CudaEventTimer:
    if device_facts()["type"] in ("cuda", "hip"):
        return CudaEventTimer()
    return WallTimer()
