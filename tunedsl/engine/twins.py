"""Interpreter twins: configurations that differ only in launch hints the interpreter ignores.

Under ``TRITON_INTERPRET=1`` Triton runs the kernel's Python source on the CPU and ignores
``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg`` and every other launch option, so
two configurations with the same kernel arguments and grid run exactly the same code:
measuring both would only time the same work twice and crown noise. The tuner measures one
representative per group (the first in space order) and gives its twins the same result.
A kernel in ``@triton.heuristics`` has none: its functions see the launch options.
"""

from __future__ import annotations

from typing import Any

from tunedsl.model.config import Config
from tunedsl.model.keys import is_tensor
from tunedsl.model.variant import Variant


def _identity(value: Any) -> Any:
    # Tensors are the caller's own objects (the same in every variant); other values compare
    # by their repr, which is exact for the ints, floats and strings a configuration sets.
    return ("tensor", id(value)) if is_tensor(value) else ("value", type(value), repr(value))


def _launch_key(variant: Variant) -> tuple[Any, ...]:
    return (
        variant.grid,
        tuple(_identity(a) for a in variant.args),
        tuple(sorted((name, _identity(v)) for name, v in variant.kwargs.items())),
    )


def options_reach_kernel(kernel: Any) -> bool:
    """Whether a ``@triton.heuristics`` wraps ``kernel``: its functions see the launch
    options (``args["num_warps"]``) and may compute another kernel from them, so
    configurations that differ in options alone are no twins."""
    for _ in range(8):
        if type(kernel).__name__ == "Heuristics":
            return True
        kernel = getattr(kernel, "fn", None)
        if kernel is None:
            break
    return False


def interpreter_twins(variants: list[Variant]) -> tuple[list[Variant], dict[Config, Config]]:
    """The variants to measure, and each dropped twin's representative."""
    first_by_key: dict[tuple[Any, ...], Variant] = {}
    keep: list[Variant] = []
    twins: dict[Config, Config] = {}
    for v in variants:
        key = _launch_key(v)
        representative = first_by_key.get(key)
        if representative is None:
            first_by_key[key] = v
            keep.append(v)
        else:
            twins[v.config] = representative.config
    return keep, twins
