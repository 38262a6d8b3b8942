"""Values no Triton kernel takes, named with what to pass instead (runtime layer).

Triton's own error for each comes once per configuration from deep in its code generator
or interpreter ("'torch.dtype' object has no attribute ...", "cannot convert 3 of type
<class 'numpy.int64'> to tensor"), naming no parameter; ``mistakes.check_launch`` reports
them on the first call, before any configuration runs.
"""

from __future__ import annotations

from typing import Any

from tunedsl.model.keys import dtype_name

# PyTorch dtypes whose Triton counterpart has another name.
_TL_DTYPE_NAMES = {
    "bool": "int1",
    "float8_e4m3fn": "float8e4nv",
    "float8_e5m2": "float8e5",
    "float8_e4m3fnuz": "float8e4b8",
    "float8_e5m2fnuz": "float8e5b16",
}


def foreign_value(value: Any, param: str, constexpr: bool) -> str | None:
    """Why ``value`` cannot be given to parameter ``param``, with the fix; None if it can."""
    cls = value.__class__
    if cls.__module__ == "torch" and cls.__qualname__ == "dtype":
        torch_name = dtype_name(value)
        tl_name = _TL_DTYPE_NAMES.get(torch_name, torch_name)
        return (
            f"{value}, a PyTorch dtype; a Triton kernel takes Triton's dtypes: pass "
            f"tl.{tl_name} (triton.language.{tl_name})"
        )
    if cls is list and not constexpr:
        # Triton takes tuples (each element specialized); a list fails in every configuration.
        return f"a list; a Triton kernel takes a tuple there: pass tuple({param})"
    if cls.__module__ != "numpy":
        return None
    if cls.__qualname__ == "ndarray":
        return (
            "a numpy.ndarray; a Triton kernel takes tensors on the launch's device: pass "
            "torch.from_numpy(x) (then .cuda() for a GPU)"
        )
    item = getattr(value, "item", None)
    if constexpr or item is None:  # a constexpr is compiled in by value, whatever its type
        return None
    if isinstance(value, float):  # numpy.float64 is a Python float: Triton takes it (fp32)
        return None
    # A numpy scalar (np.prod(x.shape) is a numpy.int64): Triton takes Python numbers.
    number = type(item()).__name__
    return f"a numpy.{cls.__qualname__} ({value}); pass {number}({param}), a Python {number}"
