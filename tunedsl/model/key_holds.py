"""Whether a ``key=`` value holds a value a ``prune=`` reads, and which kernel parameter
the prune should read it from instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["argument_named_alike", "held_by_key"]


def held_by_key(value: Any, key: Any) -> bool:
    """Whether the ``key=`` value holds ``value`` (itself or as an item, also of a tuple or
    list in it: ``key=(x.shape, str(x.dtype))`` holds the row length): calls of one key=
    value then agree on it."""
    value = _number(value)
    if key is None or not isinstance(value, (int, float, str, tuple)):
        return False
    return any(type(_number(p)) is type(value) and _number(p) == value for p in _parts(key))


def _parts(key: Any) -> list[Any]:
    """``key`` and, where it is a tuple or list, its items and theirs."""
    out = [key]
    if isinstance(key, (tuple, list)):
        for part in key:
            out.extend(_parts(part))
    return out


def argument_named_alike(name: str, value: Any, arg_names: Sequence[str], args: Any) -> str:
    """The kernel parameter prune should read instead: the one of that name, else one the
    launch gives the same value (empty when none)."""
    if name in arg_names:
        return name
    for param, arg in zip(arg_names, args, strict=False):
        if type(arg) is type(value) and isinstance(value, (int, float, str)) and arg == value:
            return str(param)
    return ""


def _number(value: Any) -> Any:
    """A numpy number as the Python number it holds (as ``key=`` keys it); else ``value``."""
    if type(value).__module__.split(".")[0] == "numpy" and getattr(value, "shape", None) == ():
        return value.item()
    return value
