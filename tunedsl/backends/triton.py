"""The one place the runtime touches triton and torch: kernels, device facts, timing.

Compiling belongs to ``triton_compile.py``, launching to ``triton_launch.py``. Everything
here is imported lazily, the first time a site tunes or launches; ``import tunedsl`` never
loads torch or triton.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.backends import compat
from tunedsl.backends.compat import interpreting
from tunedsl.backends.kernel_source import interpreted_source_hash, kernel_source_hash, python_fn
from tunedsl.engine.twins import options_reach_kernel
from tunedsl.model.hints import INTERPRETER, TargetFacts
from tunedsl.model.keys import is_tensor

# re-exported: the one reading of Triton's interpreter knob, and the interpreter's hash
__all__ = ["interpreted_source_hash", "interpreting"]


# -- kernels ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelInfo:
    """What the runtime needs to know about one ``@triton.jit`` kernel."""

    arg_names: tuple[str, ...]
    constexpr_names: frozenset[str]
    # What a key holds by value: the constexprs, and the launch options (num_warps,
    # enable_fp_fusion, debug, ...) a launch may pass, each of which compiles another kernel.
    value_keyed: frozenset[str]
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


def _is_constexpr_annotation(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return getattr(annotation, "__name__", "") == "constexpr"


@functools.lru_cache(maxsize=256)
def _kernel_info_cached(kernel: Any) -> KernelInfo:
    fn = python_fn(kernel)
    signature = inspect.signature(fn)
    names = tuple(signature.parameters)
    constexprs = compat.constexpr_params(kernel)
    if constexprs is None:
        constexprs = frozenset(
            n for n, p in signature.parameters.items() if _is_constexpr_annotation(p.annotation)
        )
    defaults = {
        n: p.default
        for n, p in signature.parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    source_hash = kernel_source_hash(kernel, fn, constexprs, defaults)
    return KernelInfo(
        arg_names=names,
        constexpr_names=constexprs,
        value_keyed=constexprs | (compat.launch_option_names() - set(names)),
        defaults=defaults,
        module=getattr(fn, "__module__", "?") or "?",
        qualname=getattr(fn, "__qualname__", repr(fn)),
        file=inspect.getsourcefile(fn) or "?",
        source_hash=source_hash,
        jit=compat.is_jit_function(kernel),
    )


def launch_option_names() -> frozenset[str]:
    """The keywords a launch may pass besides the kernel's parameters (``num_warps``, ...)."""
    return compat.launch_option_names()


@functools.lru_cache(maxsize=1)
def config_launch_defaults() -> dict[str, int]:
    """The launch options a ``triton.Config`` naming none of them carries (``num_warps``,
    ``num_stages``, ``num_ctas``), read from the Triton in use. ``maxnreg`` defaults to
    ``None``, which ``Config.all_kwargs()`` leaves out: it is none of these."""
    import triton

    try:
        params = inspect.signature(triton.Config.__init__).parameters
    except (TypeError, ValueError):  # no readable signature: Triton 3's values
        return {"num_warps": 4, "num_stages": 3, "num_ctas": 1}
    return {
        name: params[name].default
        for name in ("num_warps", "num_stages", "num_ctas")
        if name in params and type(params[name].default) is int
    }


def heuristic_launch_options(
    kernel: Any, options: Mapping[str, Any], passed: Mapping[str, Any]
) -> dict[str, Any]:
    """``options`` as a launch of ``kernel`` passing the keywords ``passed`` gives them. A
    ``@triton.heuristics`` function sees the launch options (``args["num_warps"]``), and
    under ``triton.autotune`` every configuration carries ``num_warps``, ``num_stages`` and
    ``num_ctas`` (``maxnreg`` when set): a kernel in heuristics gets ``triton.Config``'s
    defaults for those neither the configuration nor the launch sets, on a GPU and under
    the interpreter alike."""
    if not options_reach_kernel(kernel):
        return dict(options)
    defaults = config_launch_defaults()
    return {**{k: v for k, v in defaults.items() if k not in passed}, **options}


def kernel_info(kernel: Any) -> KernelInfo:
    try:
        return _kernel_info_cached(kernel)
    except TypeError:  # an unhashable kernel object: no caching
        return _kernel_info_cached.__wrapped__(kernel)


def kernel_info_changed(kernel: Any) -> bool:
    """Whether ``kernel``'s source hash, worked out now, differs from the one kept for it
    (a Triton function it calls, or a global it reads, was redefined since)."""
    try:
        kept = _kernel_info_cached(kernel)
        return _kernel_info_cached.__wrapped__(kernel).source_hash != kept.source_hash
    except Exception:  # unhashable (never kept), or its source is gone: nothing to tell
        return False


def forget_kernel_infos() -> None:
    """Work every kernel's identity out again on its next use."""
    _kernel_info_cached.cache_clear()


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
    from tunedsl.model.keys import readable_constexpr

    if constexpr:  # a Triton function by name and digest, which replay looks up again
        return {"constexpr": readable_constexpr(value)}
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


def device_facts() -> dict[str, Any]:
    """Type, name and compute capability of the current device (per device: a host with two
    GPU models has two sets of facts, and two sets of decisions)."""
    global _cuda_seen
    if interpreting():
        return {"type": "interpreter", "name": "cpu"}
    import torch

    # A GPU once seen stays (asked on every miss: is_available asks the driver each time).
    if not _cuda_seen:
        if not torch.cuda.is_available():
            return {"type": "cpu", "name": "cpu"}
        _cuda_seen = True
    return device_facts_at(torch.cuda.current_device())


_cuda_seen = False


def warm_up_tuning() -> None:
    """Set up, ahead of a process's first tune, what it would wait for: the current GPU's
    context and facts, and Triton's hash and C utilities (on threads). Nothing under the
    interpreter or without a GPU."""
    if interpreting():
        return
    import torch

    if not torch.cuda.is_available():
        return
    compat.start_warming()
    torch.zeros(1, device="cuda")  # the context (the first allocation makes it)
    device_facts()


def current_device_index() -> int:
    """The current CUDA/HIP device (the key part of a host with mixed GPU models)."""
    import torch

    return int(torch.cuda.current_device())


@functools.lru_cache(maxsize=1)
def mixed_device_models() -> bool:
    """Whether this host's visible GPUs are of more than one model (then call keys name the
    current device; otherwise decisions of one model serve every device)."""
    if interpreting():
        return False
    import torch

    if not torch.cuda.is_available():
        return False
    count = torch.cuda.device_count()
    names = {
        (p.name, p.major, p.minor)
        for p in (torch.cuda.get_device_properties(i) for i in range(count))
    }
    return len(names) > 1


@functools.lru_cache(maxsize=64)
def device_facts_at(index: int) -> dict[str, Any]:
    import torch

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
    """The current device's facts for launch options (asked on every miss)."""
    return target_of(device_facts())


def target_of(facts: Mapping[str, Any]) -> TargetFacts:
    """The launch-option facts of a device's ``device_facts()``: one object per device's
    facts (callers may memoize by its identity)."""
    global _target
    if facts["type"] not in ("cuda", "hip"):
        return INTERPRETER
    memo = _target
    if memo is not None and memo[0] is facts:  # device_facts_at keeps one dict a device
        return memo[1]
    target = TargetFacts(
        backend=facts["type"],
        regs_per_sm=facts["regs_per_sm"],
        max_threads_per_sm=facts["max_threads_per_sm"],
        warp_size=facts["warp_size"],
    )
    _target = (facts, target)
    return target


_target: tuple[Mapping[str, Any], TargetFacts] | None = None


@functools.lru_cache(maxsize=1)
def toolchain() -> dict[str, Any]:
    """tunedsl, Triton and PyTorch versions and Triton's backend hash (ptxas version, arch)."""
    import torch
    import triton

    from tunedsl import __version__

    backend_hash = "interpreter"
    if not interpreting():
        try:
            backend_hash = compat.backend_hash()
        except Exception as err:
            backend_hash = f"unavailable: {type(err).__name__}"
    return {
        "tunedsl": __version__,
        "triton": triton.__version__,
        "torch": torch.__version__,
        "triton_backend": backend_hash,
    }


def triton_env() -> dict[str, str]:
    """The set variables that change the code Triton compiles (``compat.codegen_env``)."""
    try:
        return compat.codegen_env()
    except Exception:
        return {}


# -- tensors ---------------------------------------------------------------------------------


# Tuning's copies and writes are bookkeeping, not computation: they go through detach(),
# so a tensor that requires grad (an nn.Parameter a kernel updates in place) is copied and
# restored as the kernel writes it, without autograd's leaf check or a recorded graph.


def clone(x: Any) -> Any:
    """A copy of ``x``: of the memory it covers where its elements share memory (a
    broadcast ``torch.zeros(1).expand(1 << 20)`` is one element, not a million), viewed
    with its strides, so it restores and compares as ``x`` does."""
    x = x.detach()
    span = _storage_span(x)
    if span is None:
        return x.clone()
    return x.as_strided((span,), (1,)).clone().as_strided(x.shape, x.stride())


def clone_to_host(x: Any) -> Any:
    """A copy of ``x`` in host memory (where the device has no room for one); of the memory
    it covers where its elements share memory, as :func:`clone`."""
    x = x.detach()
    span = _storage_span(x)
    if span is None:
        return x.to("cpu", copy=True)
    flat = x.as_strided((span,), (1,)).to("cpu", copy=True)
    return flat.as_strided(x.shape, x.stride())


def _storage_span(x: Any) -> int | None:
    """How many elements of storage ``x`` covers from its first, where fewer than its elements
    (they share memory: a stride 0 along a dimension of two or more); None otherwise."""
    # No stride 0: None at once (asked for each tensor a rule's pick may write).
    dims = tuple(zip(strides, x.shape, strict=True)) if 0 in (strides := x.stride()) else ()
    if not dims or x.numel() < 2 or all(stride or size < 2 for stride, size in dims):
        return None
    span = 1 + sum((size - 1) * stride for stride, size in dims)
    return span if span < x.numel() else None


def copy_into(dst: Any, src: Any) -> None:
    """``dst = src``, its autograd version kept: a restore puts back what the caller had, and
    a kernel's own writes never bump it (a tensor saved for backward stays usable)."""
    index = _broadcast_index(dst)
    with compat.keeping_version(dst):
        if index is None:
            dst.detach().copy_(src)
        else:  # torch writes no tensor whose elements share memory: each element once
            dst.detach()[index].copy_(src[index])


def zero(x: Any) -> None:
    x.detach().zero_()


def _broadcast_index(x: Any) -> tuple[slice, ...] | None:
    """For a broadcast tensor (``bias.expand(n, m)``, stride 0 along a dimension of more
    than one element), the index of the view that holds each of its elements once."""
    dims = tuple(zip(x.stride(), x.shape, strict=True))
    if all(stride or size < 2 for stride, size in dims):
        return None
    return tuple(slice(0, 1) if stride == 0 else slice(None) for stride, _ in dims)


def storage_address(x: Any) -> int:
    """Where ``x``'s storage starts: one for all views of a tensor (a non-torch one's own)."""
    storage = getattr(x, "untyped_storage", None)
    return int(x.data_ptr() if storage is None else storage().data_ptr())


def reference_problem(expected: Any, actual: Any) -> str | None:
    """Why ``expected`` cannot be the reference of the output ``actual``; None when it can."""
    import torch

    if expected is None:
        return "is None"
    try:
        shape = tuple(torch.as_tensor(expected).shape)
    except (TypeError, ValueError, RuntimeError):
        return f"is a {type(expected).__name__}, not a tensor"
    if shape != tuple(actual.shape):
        return f"has shape {shape}, the output {tuple(actual.shape)}"
    return None


def precision(x: Any) -> float:  # the eps of x's float dtype (its relative resolution), or 0
    import torch

    return float(torch.finfo(x.dtype).eps) if x.is_floating_point() else 0.0


def allclose(
    actual: Any, expected: Any, rtol: float, atol: float, *, exact_ints: bool = False
) -> str | None:
    """None when close; otherwise a short description of the mismatch. With ``exact_ints``,
    ints and bools (neither side a float) must be equal, as ``torch.testing.assert_close``
    holds them: integer arithmetic is exact, so a tolerance only hides a wrong count."""
    import torch

    expected = torch.as_tensor(expected, device=actual.device)
    if actual.shape != expected.shape:
        return f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    # Floats in float32, or float64 where a side has 8 bytes: an int cast would truncate a
    # float reference, float32 would hide float64's differences under 1e-7 (no float8 promotion).
    if actual.is_floating_point() or expected.is_floating_point():
        wide = max(actual.dtype.itemsize, expected.dtype.itemsize) >= 8
        common = torch.float64 if wide else torch.float32
    else:
        common = torch.promote_types(actual.dtype, expected.dtype)  # ints and bools
        if exact_ints:
            rtol = atol = 0.0
    a, e = actual.to(common), expected.to(common)
    if torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
        return None
    if exact_ints and not common.is_floating_point:
        # In Python ints: a float64 difference is 0 past 2**53, and an int64 one may wrap.
        wrong = a != e
        pairs = zip(a[wrong].tolist(), e[wrong].tolist(), strict=True)
        most = max(abs(int(p) - int(q)) for p, q in pairs)
        return (
            f"max abs difference {most}; {int(wrong.sum())} of {a.numel()} elements differ "
            "(integers are compared exactly; give rtol=/atol= to allow a difference)"
        )
    diff = (a.double() - e.double()).abs()
    return f"max abs difference {diff.max().item():.3g} (rtol={rtol}, atol={atol})"


def synchronize() -> None:
    if interpreting():
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def equal(a: Any, b: Any) -> bool:
    """Same shape and exactly the same values, NaN equal to NaN (an untouched
    ``torch.empty`` buffer may hold NaNs, and must compare equal to its copy)."""
    import torch

    if torch.equal(a, b):
        return True
    if a.shape != b.shape or not (a.is_floating_point() or a.is_complex()):
        return False
    return bool(torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True))
