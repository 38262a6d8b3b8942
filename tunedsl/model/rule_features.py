"""What a key looks like to a rule (``model/rule.py``): its family and its features.

The readable key's sizes (tensor shapes, ints of at least 2 and positive floats of ``key=``
or a constexpr, such as a block computed from a size, and of the values ``prune=`` reads,
which join the key) are its *features*, taken as log2;
everything else (dtypes, stride patterns, bools, strings, ints below 2 of ``key=`` or a
constexpr: a flag such as ``HAS_BIAS=0/1``, a mode, a sentinel) is its *family*. So is what
Triton compiles another kernel for in an int argument's class (``model.keys.int_class``):
equal to 1, else 32-bit, 64-bit or unsigned 64-bit (``==1``, ``i32``, ``i64``, ``u64``), so a
rule swept with a stride of 1 never decides a stride of 2. An int argument's alignment (a
multiple of 16 or not, which Triton specializes too) is instead a feature that the maps may
split on, 1 or 0, without a range (a sweep of aligned and odd row lengths gives one map for
both): a row stride that is not a multiple of 16 loses vector loads, and with them the
fastest configuration.

Read on every miss a rule decides: the walk makes no call per part it can avoid. Pure Python,
no torch or triton: the model layer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tunedsl.model.keys import canonical_json


def key_features(readable: Mapping[str, Any]) -> tuple[str, dict[str, float]]:
    """The family (canonical JSON of the categorical parts) and the features (path -> log2
    of the value) of a readable key (``model.keys.readable_key``)."""
    if len(readable) == 1 and (args := readable.get("args")).__class__ is dict:
        found = _args_features(args)  # the common key: int classes and tensors only
        if found is not None:
            return found
    family: dict[str, Any] = {}
    features: dict[str, float] = {}

    # Depth first, in the order of the sorted names and of the items (a stack, not recursion:
    # asked on every miss a rule decides, where each Python call counts).
    todo: list[tuple[str, Any]] = [("key", readable["user_key"])] if "user_key" in readable else []
    # The values prune= reads join the key (they split its decisions): a rule reads them as
    # it reads the arguments, so a size no sweep reached is out of its range.
    prune = readable.get("prune") or {}
    for name in sorted(prune, reverse=True):
        todo.append((f"prune.{name}", prune[name]))
    args = readable.get("args", {})
    for name in sorted(args, reverse=True):
        todo.append((f"args.{name}", args[name]))
    while todo:
        path, value = todo.pop()
        cls = value.__class__  # the readable key's own types first
        if cls is int:
            if value >= MIN_SIZE or (value >= 0 and _SHAPE in path):
                # A size: a shape's, or an int of key= or a constexpr (math.log2 takes any
                # int). A shape of 0 reads as 1: an empty launch runs no program.
                features[path] = math.log2(value) if value >= 1 else 0.0
            else:
                # 0, 1 or negative, not a shape: a flag, a mode or a sentinel (HAS_BIAS=0/1),
                # whose values compile or select other code: a family, never a size (in log2
                # 0 and 1 would be one point, and a pick would cross between them).
                family[path] = value
        elif cls is str:
            if (parts := _INT_PARTS.get(value)) is not None and path.startswith("args."):
                # Triton's int class: ==1 and the width compile other code (a family); a
                # multiple of 16 (a row stride that keeps rows aligned) can change the
                # fastest configuration, so the maps may split on it (a feature).
                family[path] = parts[0]
                if parts[1] is not None:
                    features[path + ALIGNED] = parts[1]
            else:
                family[path] = value
        elif cls is dict and _took_tensor(path, value, family, features):
            pass  # a tensor's readable form (the common case), taken whole
        elif cls is list:  # a shape: its sizes
            for i in range(len(value) - 1, -1, -1):  # (no comprehension: each is a call)
                todo.append((f"{path}[{i}]", value[i]))
        elif cls is dict and ("constexpr" not in value or len(value) != 1):
            for name in sorted(value, reverse=True):
                todo.append((f"{path}.{name}", value[name]))
        elif isinstance(value, bool) or value is None:
            family[path] = value
        elif isinstance(value, int):  # an int subclass: as an int (above)
            todo.append((path, int(value)))
        elif isinstance(value, float):
            if value > 0 and math.isfinite(value):
                features[path] = math.log2(value)  # one point per value, 0.5 apart from 0.25
            else:  # 0, negative, nan or inf: no size in log2
                family[path] = repr(value)
        elif isinstance(value, str):  # a str subclass: as a str (above)
            todo.append((path, str.__str__(value)))
        elif isinstance(value, Mapping):
            if "constexpr" in value and len(value) == 1:
                inner = value["constexpr"]
                if isinstance(inner, int | float) and not isinstance(inner, bool):
                    todo.append((path, inner))  # a size computed per call (a block)
                else:
                    family[path] = canonical_json(value)  # a flag or a mode changes the code
            else:
                for name in sorted(value, reverse=True):
                    todo.append((f"{path}.{name}", value[name]))
        elif isinstance(value, list | tuple):
            for i in range(len(value) - 1, -1, -1):
                todo.append((f"{path}[{i}]", value[i]))
        else:
            family[path] = repr(value)
    return _family_text(family), features


def _family_text(family: dict[str, Any]) -> str:
    # Keys of one family differ only in their features: its JSON is encoded once. (The class
    # joins each value: True and 1 are equal, and hash alike, but encode differently.)
    parts = (tuple(family.items()), tuple(map(type, family.values())))
    text = _FAMILY_TEXT.get(parts)
    if text is None:
        text = canonical_json(family)
        if len(_FAMILY_TEXT) >= _MAX_FAMILIES:
            _FAMILY_TEXT.clear()
        _FAMILY_TEXT[parts] = text
    return text


def _args_features(args: dict[str, Any]) -> tuple[str, dict[str, float]] | None:
    """``key_features`` of a key of positional arguments that are all int classes and plain
    tensors (the common key), with the paths made once per argument names; None for any
    other key (the walk above reads it). The same result, in the same order."""
    plan = _PLANS.get(names := tuple(args))
    if plan is None:
        if len(_PLANS) >= _MAX_FAMILIES:
            _PLANS.clear()
        plan = _PLANS[names] = tuple((n, f"args.{n}", f"args.{n}{ALIGNED}") for n in sorted(args))
    family: dict[str, Any] = {}
    features: dict[str, float] = {}
    for name, path, aligned_path in plan:
        value = args[name]
        cls = value.__class__
        if cls is str and (parts := _INT_PARTS.get(value)) is not None:
            family[path] = parts[0]
            if parts[1] is not None:
                features[aligned_path] = parts[1]
        elif not (cls is dict and _took_tensor(path, value, family, features)):
            return None
    return _family_text(family), features


def _took_tensor(
    path: str, value: dict[str, Any], family: dict[str, Any], features: dict[str, float]
) -> bool:
    """Add a tensor's readable form (dtype, shape, stride) at ``path`` as the walk reads its
    parts, in the same order, with its paths made once; False (nothing added) for any other
    dict."""
    if not (
        value.keys() == _TENSOR_FIELDS
        and (dtype := value["dtype"]).__class__ is str
        and (stride := value["stride"]).__class__ is str
        and dtype not in _INT_CLASSES
        and stride not in _INT_CLASSES
        and (shape := value["shape"]).__class__ is list
        and {*map(type, shape)} <= _INT_ONLY
    ):
        return False
    names = _TENSOR_PATHS.get(path)
    if names is None:
        if len(_TENSOR_PATHS) >= _MAX_FAMILIES:
            _TENSOR_PATHS.clear()
            _SHAPE_PATHS.clear()
        names = _TENSOR_PATHS[path] = (f"{path}.dtype", f"{path}.stride")
    family[names[0]] = dtype
    sizes = _SHAPE_PATHS.get((path, len(shape)))
    if sizes is None:
        sizes = _SHAPE_PATHS[path, len(shape)] = tuple(
            f"{path}.shape[{i}]" for i in range(len(shape))
        )
    for size_path, size in zip(sizes, shape, strict=True):
        features[size_path] = math.log2(size) if size >= 1 else 0.0
    family[names[1]] = stride
    return True


#: The least int of ``key=`` or a constexpr read as a size (log2): 0, 1 and negative ints
#: there are flags, modes and sentinels, and belong to the family.
MIN_SIZE = 2
_SHAPE = ".shape["

_TENSOR_FIELDS = frozenset(("dtype", "shape", "stride"))
_INT_ONLY = frozenset((int,))
# A tensor argument's paths, by its own path (and its shape's length): bounded.
_TENSOR_PATHS: dict[str, tuple[str, str]] = {}
_SHAPE_PATHS: dict[tuple[str, int], tuple[str, ...]] = {}

# The JSON of the families seen (bounded: a process meets a few per site).
_FAMILY_TEXT: dict[tuple[tuple[tuple[str, Any], ...], tuple[type, ...]], str] = {}
_MAX_FAMILIES = 1024
# Per tuple of argument names: each name, sorted, with its paths (bounded).
_PLANS: dict[tuple[str, ...], tuple[tuple[str, str, str], ...]] = {}


#: An int class's part of the family: what Triton compiles another kernel for (an int equal
#: to 1, else its width), and no feature (``ALIGNED``) is split on for an int equal to 1.
INT_ONE, INT32, INT64, UINT64 = "==1", "i32", "i64", "u64"
#: Per int class of a key (``model.keys.int_class``): its family part and its alignment
#: feature (None: an int equal to 1, never a multiple of 16).
_INT_PARTS: dict[str, tuple[str, float | None]] = {
    c + w: (INT_ONE if c == "i1" else width, None if c == "i1" else float(c == "i16"))
    for c in ("i1", "i16", "i")
    for w, width in (("", INT32), ("L", INT64), ("U", UINT64))
}
_INT_CLASSES = frozenset(_INT_PARTS)
#: An int class's family part as a person reads it (``args.n is a 64-bit int``).
INT_TEXT = {
    INT_ONE: "an int equal to 1",
    INT32: "a 32-bit int other than 1",
    INT64: "a 64-bit int",
    UINT64: "an unsigned 64-bit int",
}
#: The suffix of an int argument's alignment feature (1: a multiple of 16, else 0). Not a
#: range: a key of either alignment is in a rule's range, whichever the sweep had.
ALIGNED = "%16"


def ranged(feature: str) -> bool:
    """Whether ``feature`` has a range (a size), or is an int's alignment (``ALIGNED``)."""
    return not feature.endswith(ALIGNED)


def show_value(log2_value: float) -> str:
    try:
        value = 2.0**log2_value
    except OverflowError:  # finite in the file, beyond any float as a size
        return f"2^{log2_value:g}"
    return f"{value:.0f}" if value >= 10 else f"{value:.3g}"


def show_feature(feature: str, value: float) -> str:
    """``M=64`` for a size (stored as log2), ``M % 16 == 0`` for an int's alignment (0 or 1)."""
    if ranged(feature):
        return f"{feature}={show_value(value)}"
    return f"{feature.removesuffix(ALIGNED)} % 16 {'==' if value else '!='} 0"


def int_class_part(path: str, value: Any) -> str | None:
    """The text of a family part that is an int argument's class (``INT_TEXT``), or None for
    any other part."""
    return INT_TEXT.get(value) if path.startswith("args.") and value.__class__ is str else None
