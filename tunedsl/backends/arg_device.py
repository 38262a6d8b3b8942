"""The CUDA device a call's arguments live on (backends layer).

A compile runs on a pool thread, whose current device is GPU 0 whatever the caller's is, so
the compile (the JIT table it fills, the context it loads the module into, the target and
its shared-memory limit) must find the device from the arguments themselves: a tensor's
device, and a host-side tensor descriptor's by its base tensor (a launch whose every tensor
is inside a ``TensorDescriptor`` passes no tensor of its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tunedsl.model.keys import is_tensor_descriptor

__all__ = ["cuda_device_of", "cuda_index"]


def cuda_index(value: Any) -> int | None:
    """The CUDA device index of a tensor, or of a tensor descriptor's base tensor; None for
    anything else (a CPU tensor, an int)."""
    if is_tensor_descriptor(value):
        value = value.base
    device: Any = getattr(value, "device", None)
    index = getattr(device, "index", None)
    if getattr(device, "type", None) == "cuda" and index is not None:
        return int(index)
    return None


def cuda_device_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    """The device of the first CUDA tensor among a call's arguments (:func:`cuda_index`;
    inside tuples too, as Triton passes a tuple's tensors), or None."""
    return _first_index((*args, *kwargs.values()), depth=0)


def _first_index(values: Iterable[Any], depth: int) -> int | None:
    for value in values:
        if value.__class__ is tuple and depth < 8:
            index = _first_index(value, depth + 1)
        else:
            index = cuda_index(value)
        if index is not None:
            return index
    return None
