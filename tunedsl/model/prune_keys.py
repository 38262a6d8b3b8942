"""The key part of a site whose ``prune`` reads arguments: their values (docs/runtime.md,
"The prune rule"), in the per-call tuple and in the record's readable key."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.model.keys import dtype_name, is_tensor, is_tensor_descriptor, json_safe


def prune_value(x: Any) -> Any:
    """The key part of an argument that ``prune`` reads: its type and value (a tensor's
    dtype and shape, which is all prune can see of it without reading its data; a tuple's
    and a tensor descriptor's tensors alike)."""
    if is_tensor(x):
        return ("t", x.dtype, tuple(x.shape))
    if isinstance(x, tuple):
        return ("tuple", x.__class__, *(prune_value(v) for v in x))
    if is_tensor_descriptor(x):
        return ("desc", prune_value(x.base), tuple(x.shape), tuple(x.block_shape))
    try:
        hash(x)
    except TypeError:
        return ("unhashable", x.__class__, repr(x))
    return (x.__class__, x)


def make_prune_part(
    arg_names: Sequence[str], read: frozenset[str]
) -> Callable[[Sequence[Any], Mapping[str, Any]], tuple[Any, ...]]:
    """The call-key part of a site whose ``prune`` reads ``read``: those arguments' values."""
    wanted = tuple(
        (name, arg_names.index(name) if name in arg_names else -1) for name in sorted(read)
    )

    def part(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for name, i in wanted:
            if 0 <= i < len(args):
                out.append(prune_value(args[i]))
            elif name in kwargs:
                out.append(prune_value(kwargs[name]))
            else:
                out.append(None)
        return tuple(out)

    return part


def readable_prune(
    arg_names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any], read: frozenset[str]
) -> dict[str, Any]:
    """The record-key part for the arguments prune reads (by name, JSON)."""
    out: dict[str, Any] = {}
    for name in sorted(read):
        i = arg_names.index(name) if name in arg_names else -1
        if 0 <= i < len(args):
            x = args[i]
        elif name in kwargs:
            x = kwargs[name]
        else:
            continue
        if is_tensor(x):
            out[name] = _readable(x)
        else:
            out[name] = {"type": x.__class__.__name__, "value": _readable(x)}
    return out


def _readable(x: Any) -> Any:
    # A tensor by dtype and shape wherever it is (never by its printed values).
    if is_tensor(x):
        return {"dtype": dtype_name(x.dtype), "shape": list(x.shape)}
    if isinstance(x, list | tuple):
        return [_readable(v) for v in x]
    if is_tensor_descriptor(x):
        block = list(x.block_shape)
        return {"descriptor": {"tensor": _readable(x.base), "shape": list(x.shape), "block": block}}
    return json_safe(x)
