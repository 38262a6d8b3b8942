"""Whether the ``key=`` value of a call holds what its ``prune=`` reads from the code around
it (``tunedsl.model.prune_closure``): calls of one key value then agree on that read, so a
decision made for one of them is right for the others. A number or string the key holds,
itself or as an item (``key=(m, n)`` holds ``n``), and an attribute or item read from a
value the key holds that cannot change (``dt.itemsize`` of ``key=(n, dt)``, a loop's dtype)
or from a dict or list of settings the key holds by its items (``hp["n"]`` of ``key=hp``)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

__all__ = ["argument_named_alike", "key_parts", "number", "root_held_by_key"]

#: Classes of values whose attributes and items never change, by qualified name, so that
#: this module needs neither torch nor triton.
_FROZEN_CLASSES = frozenset({"torch.dtype", "triton.language.core.dtype"})


Path = tuple[int, ...]


def key_parts(key: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    """``key`` and, where it is a tuple or list, its items and theirs, each with its place
    in ``key`` (``(1, 0)``: the first item of the second), numpy numbers as Python's."""
    out = [(path, number(key))]
    if isinstance(key, (tuple, list)):
        for i, part in enumerate(key):
            out.extend(key_parts(part, (*path, i)))
    return out


def root_held_by_key(label: str, prune: Any, key: Any) -> bool:
    """Whether ``label`` (``dt.itemsize``, ``hp["n"]``) reads an attribute or item of a
    variable of ``prune`` (a global or a closure's) whose value the key holds itself: a
    value that cannot change (a dtype, a number, a string, a tuple, an enum member), or a
    dict or list, which the key holds by its items. The key then fixes what is read."""
    root = label.split(".")[0].split("[")[0]
    if root == label or key is None:
        return False
    values = dict(getattr(prune, "__globals__", None) or {})
    code = getattr(prune, "__code__", None)
    for name, cell in zip(
        getattr(code, "co_freevars", ()), getattr(prune, "__closure__", None) or (), strict=False
    ):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell: assigned later in the caller
            continue
    if root not in values:
        return False
    obj = values[root]
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    # A dict or list the key holds is keyed by its items, read at the call as prune reads
    # them: calls of one key have equal ones.
    plain = (int, float, str, bytes, tuple, frozenset, enum.Enum, dict, list)
    if not (isinstance(obj, plain) or kind in _FROZEN_CLASSES):
        return False
    for _, part in key_parts(key):
        try:
            if part is obj or (type(part) is type(obj) and bool(part == obj)):
                return True
        except Exception:  # an == that gives no truth value
            continue
    return False


def argument_named_alike(name: str, value: Any, arg_names: Sequence[str], args: Any) -> str:
    """The kernel parameter prune should read instead: the one of that name, else one the
    launch gives the same value (empty when none)."""
    if name in arg_names:
        return name
    for param, arg in zip(arg_names, args, strict=False):
        if type(arg) is type(value) and isinstance(value, (int, float, str)) and arg == value:
            return str(param)
    return ""


def number(value: Any) -> Any:
    """A numpy number as the Python number it holds (as ``key=`` keys it); else ``value``."""
    if type(value).__module__.split(".")[0] == "numpy" and getattr(value, "shape", None) == ():
        return value.item()
    return value
