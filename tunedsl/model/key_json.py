"""How a value is written into a record key's JSON (``json_safe``): a ``key=`` value, a hint,
a constexpr. A record is found again only by what is written here, so two values written
alike share one record: a dataclass is written by its fields (its printed form may leave
some out, ``field(repr=False)``), and what no other form fits by its printed form (``repr``),
which ``runtime/key_mistakes`` checks, for ``key=``, tells unequal values apart."""

from __future__ import annotations

import dataclasses
from typing import Any

from tunedsl.model.canonical import canonical_json

__all__ = ["json_safe"]


def json_safe(value: Any, printed: list[tuple[Any, str]] | None = None) -> Any:
    """A JSON-able stand-in for ``value`` (tuples become lists, a dataclass instance its class
    and fields, unknown objects their repr). ``printed`` collects each ``(object, repr)``
    written by its repr, at any depth."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
        )
    if isinstance(value, list | tuple):
        return [json_safe(v, printed) for v in value]
    if isinstance(value, dict):
        return {
            str(k): json_safe(v, printed)
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
        }
    if isinstance(value, set | frozenset):
        # Its order (and repr) follows the process's hash seed: sorted, the record key is
        # the same in every process. (A key= dict is pairs by now: no dict key collides.)
        return {"set": sorted((json_safe(v, printed) for v in value), key=canonical_json)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Every field its equality compares, printed or not: unequal values, unequal records.
        # (A compare=False field, a cache say, would split equal values.)
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.compare}
        return {"dataclass": value.__class__.__qualname__, "fields": json_safe(fields, printed)}
    text = repr(value)
    if printed is not None:
        printed.append((value, text))
    return text
