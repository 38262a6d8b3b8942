"""``HOLE``: a positional launch argument that depends on the configuration (model layer).

The expander passes ``HOLE`` in place of a ``$``-using positional argument; ``bind(cfg)``
returns the values that fill the holes, in order (or ``ReplaceArgs``, for the plain API).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class _Hole:
    """Marks a positional launch argument whose value depends on the configuration."""

    _instance: _Hole | None = None

    def __new__(cls) -> _Hole:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "HOLE"

    def __reduce__(self) -> str:
        return "HOLE"


HOLE = _Hole()


class ReplaceArgs(tuple):  # type: ignore[type-arg]
    """Returned by ``bind`` (plain API) to replace *all* positional arguments."""

    __slots__ = ()


def fill_holes(args: Sequence[Any], holes: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(holes, ReplaceArgs):
        return tuple(holes)
    values = iter(holes)
    return tuple(next(values) if a is HOLE else a for a in args)
