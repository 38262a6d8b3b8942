"""How a rule says that a key's family was never swept (model layer, pure).

A family is the JSON of a key's parts that are not sizes (dtypes, flags, strides); sizes
are the features the rule maps. The text names up to four parts in which the key differs
from the closest swept family, each as the key has it and as the sweep had it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_NONE = object()


def never_swept(
    family: str, sizes: Mapping[str, Any], closest: str, ranges: Mapping[str, Any]
) -> str:
    """Why a key of ``family`` (its sizes in log2, ``sizes``) is outside a rule whose
    closest swept family is ``closest`` (its sizes' log2 ranges, ``ranges``)."""
    want, near = json.loads(family), json.loads(closest)
    differ = sorted(k for k in {*want, *near} if _differs(k, want, near))
    return "its family was never swept: " + ", ".join(
        f"{k} is {_part(k, want, sizes, False)} (swept: {_part(k, near, ranges, True)})"
        for k in differ[:4]
    )


def _part(k: str, parts: Mapping[str, Any], sizes: Mapping[str, Any], swept: bool) -> str:
    # A part one side lacks is a size there (an int of 2 or more), or not in its key.
    if k in parts:
        return "None" if parts[k] is None else json.dumps(parts[k])
    if any(p.startswith(k + ".") for p in parts):
        return "a tensor"
    if k not in sizes:
        return "absent"
    low, high = sizes[k] if swept else (sizes[k], sizes[k])
    low, high = round(2**low), round(2**high)
    return f"sizes {low} to {high}" if low != high else f"a size, {low}"


def _differs(k: str, want: Mapping[str, Any], near: Mapping[str, Any]) -> bool:
    """Whether families differ in ``k``; not a part of an argument one side has as None."""
    nil = (p.get(k[:i], _NONE) is None for p in (want, near) for i, c in enumerate(k) if c == ".")
    return want.get(k, _NONE) != near.get(k, _NONE) and not any(nil)
