"""How a rule says that a key's family was never swept, and which int classes its sweep
had (model layer, pure).

A family is the JSON of a key's parts that are not sizes (dtypes, flags, strides); sizes
are the features the rule maps. The text names up to four parts in which the key differs
from the closest swept family, each as the key has it and as the sweep had it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tunedsl.model.rule_features import INT32, INT_TEXT, int_class_part

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
        if (text := int_class_part(k, parts[k])) is not None:
            return text  # an int argument's class: "an int equal to 1"
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


def int_classes_swept(families: Iterable[str]) -> str | None:
    """The int arguments that a rule's sweep (its families, JSON) passed only in a class other
    than a 32-bit int other than 1 (only equal to 1, or only 64-bit), each with those classes:
    a call with another class of one is outside the rule's range. None when there are none."""
    classes: dict[str, set[str]] = {}
    for family in families:
        for k, v in json.loads(family).items():
            if int_class_part(k, v) is not None:
                classes.setdefault(k, set()).add(v)
    only = [(k, sorted(c)) for k, c in sorted(classes.items()) if INT32 not in c]
    if not only:
        return None
    return (
        "the sweep passed "
        + ", ".join(f"{k} only as {' or '.join(INT_TEXT[v] for v in c)}" for k, c in only)
        + ": Triton compiles another kernel for an int of another class, so a call passing "
        "one there is outside the rule's range (tuned where tuning may run); sweep those too"
    )
