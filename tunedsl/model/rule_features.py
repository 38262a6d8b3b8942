"""What a key looks like to a rule (``model/rule.py``): its family and its features.

The readable key's numeric parts (tensor shapes, numeric constexprs such as a block computed
from a size, ints of ``key=``) are its *features*, taken as log2; everything else (dtypes,
stride patterns, other constexprs, strings of ``key=``) is its *family*. Triton's int classes
(``i1``, ``i16``, ``i``) are no family (the kernel is compiled for the class anyway) but give
each int argument an alignment feature (1 for a multiple of 16, else 0) that the maps may
split on: a row stride that is not a multiple of 16 loses vector loads, and with them the
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
    family: dict[str, Any] = {}
    features: dict[str, float] = {}

    # Depth first, in the order of the sorted names and of the items (a stack, not recursion:
    # asked on every miss a rule decides, where each Python call counts).
    todo: list[tuple[str, Any]] = [("key", readable["user_key"])] if "user_key" in readable else []
    args = readable.get("args", {})
    for name in sorted(args, reverse=True):
        todo.append((f"args.{name}", args[name]))
    while todo:
        path, value = todo.pop()
        cls = value.__class__  # the readable key's own types first
        if cls is int:  # a size (a shape's, or an int of key=; math.log2 takes any int)
            features[path] = math.log2(value) if value >= 1 else (0.0 if value >= 0 else -1.0)
        elif cls is str:
            if value in _INT_CLASSES and path.startswith("args."):
                # Triton's int class: compiled for anyway, so neither a family nor a range;
                # but a multiple of 16 (a row stride that keeps rows aligned) can change the
                # fastest configuration, so the maps may split on it.
                features[path + ALIGNED] = 1.0 if value.startswith("i16") else 0.0
            else:
                family[path] = value
        elif (
            cls is dict
            and value.keys() == _TENSOR_FIELDS
            and (dtype := value["dtype"]).__class__ is str
            and (stride := value["stride"]).__class__ is str
            and dtype not in _INT_CLASSES
            and stride not in _INT_CLASSES
            and (shape := value["shape"]).__class__ is list
            and {*map(type, shape)} <= _INT_ONLY
        ):
            # A tensor's readable form (the common case, taken whole, no call per part):
            # what the generic branches below make of it, in the same order, its paths made
            # once.
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
                features[size_path] = math.log2(size) if size >= 1 else (0.0 if size >= 0 else -1.0)
            family[names[1]] = stride
        elif cls is list:  # a shape: its sizes
            for i in range(len(value) - 1, -1, -1):  # (no comprehension: each is a call)
                todo.append((f"{path}[{i}]", value[i]))
        elif cls is dict and ("constexpr" not in value or len(value) != 1):
            for name in sorted(value, reverse=True):
                todo.append((f"{path}.{name}", value[name]))
        elif isinstance(value, bool) or value is None:
            family[path] = value
        elif isinstance(value, int | float):
            if value != value or value in (math.inf, -math.inf):
                family[path] = repr(value)
            else:
                features[path] = math.log2(max(value, 1)) if value >= 0 else -1.0
        elif isinstance(value, str):  # a str subclass (above: str itself)
            if path.startswith("args.") and value in _INT_CLASSES:
                features[path + ALIGNED] = 1.0 if value.startswith("i16") else 0.0
            else:
                family[path] = value
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
    # Keys of one family differ only in their features: its JSON is encoded once. (The class
    # joins each value: True and 1 are equal, and hash alike, but encode differently.)
    parts = (tuple(family.items()), tuple(map(type, family.values())))
    text = _FAMILY_TEXT.get(parts)
    if text is None:
        text = canonical_json(family)
        if len(_FAMILY_TEXT) >= _MAX_FAMILIES:
            _FAMILY_TEXT.clear()
        _FAMILY_TEXT[parts] = text
    return text, features


_TENSOR_FIELDS = frozenset(("dtype", "shape", "stride"))
_INT_ONLY = frozenset((int,))
# A tensor argument's paths, by its own path (and its shape's length): bounded.
_TENSOR_PATHS: dict[str, tuple[str, str]] = {}
_SHAPE_PATHS: dict[tuple[str, int], tuple[str, ...]] = {}

# The JSON of the families seen (bounded: a process meets a few per site).
_FAMILY_TEXT: dict[tuple[tuple[tuple[str, Any], ...], tuple[type, ...]], str] = {}
_MAX_FAMILIES = 1024


_INT_CLASSES = frozenset(c + w for c in ("i1", "i16", "i") for w in ("", "L", "U"))
#: The suffix of an int argument's alignment feature (1: a multiple of 16, else 0). Not a
#: range: a key of either alignment is in a rule's range, whichever the sweep had.
ALIGNED = "%16"


def ranged(feature: str) -> bool:
    """Whether ``feature`` has a range (a size), or is an int's alignment (``ALIGNED``)."""
    return not feature.endswith(ALIGNED)
