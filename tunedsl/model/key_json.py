"""How a value is written into a record key's JSON (``json_safe``): a ``key=`` value, a hint,
a constexpr. A record is found again only by what is written here, so a ``key=`` value's
written form is its equality: two values written alike share one record, in every process.
The common values keep their plain JSON form (ints, strs, finite floats, lists, str-keyed
dicts); what would collide with one of them is written under a tag: a non-finite float
(``{"float": "nan"}``), bytes, a dict with a key that is no str (typed ``[key, value]``
pairs), an enum member and a dataclass (by module, qualified name and compared fields).
``runtime/key_mistakes`` refuses, for ``key=``, any value written otherwise (by its repr)."""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import sys
from typing import Any

from tunedsl.model.canonical import canonical_json

__all__ = ["DictItems", "json_safe"]

# A str-keyed dict written as an object with one of these key sets would read as a tag.
_TAGS = (("float",), ("bytes",), ("set",), ("dict",), ("enum", "name"), ("dataclass", "fields"))
_TAG_KEYS = frozenset(frozenset(k) for k in _TAGS)


class DictItems(tuple):  # type: ignore[type-arg]
    """A ``key=`` dict with a key that is no str, as looked up and stored: its ``(key, value)``
    pairs, equal only to another such dict's (``{1: 'x'}`` is not ``[(1, 'x')]``), written
    under the ``dict`` tag with each key as its own type (``1`` is not ``'1'``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is DictItems and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


def json_safe(value: Any) -> Any:
    """A JSON-able stand-in for ``value`` (tuples become lists, tagged forms as above,
    unknown objects their repr)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(float(value))}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, enum.Enum):
        return {"enum": _class_name(type(value)), "name": value.name}
    if isinstance(value, DictItems):
        return _typed_pairs(value)
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and frozenset(value) not in _TAG_KEYS:
            return {k: json_safe(v) for k, v in sorted(value.items())}
        return _typed_pairs(value.items())
    if isinstance(value, set | frozenset):
        # Its order (and repr) follows the process's hash seed: sorted, the record key is
        # the same in every process.
        return {"set": sorted((json_safe(v) for v in value), key=canonical_json)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Every field its equality compares, printed or not: unequal values, unequal records.
        # (A compare=False field, a cache say, would split equal values.)
        kind = type(value)
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.compare}
        return {"dataclass": _class_name(kind), "fields": json_safe(fields)}
    return repr(value)


def _class_name(kind: type) -> str:
    """``module.Qualname``. A script's module is named by its file: run as ``__main__`` it is
    the module a sweep or precompile imports (under a private ``__name__``), and their
    records must decide its keys."""
    module = kind.__module__
    if module.startswith("__") and module.endswith("__"):
        file = getattr(sys.modules.get(module), "__file__", None)
        if isinstance(file, str):
            module = os.path.splitext(os.path.basename(file))[0]
    return f"{module}.{kind.__qualname__}"


def _typed_pairs(items: Any) -> dict[str, Any]:
    return {"dict": sorted(([json_safe(k), json_safe(v)] for k, v in items), key=canonical_json)}
