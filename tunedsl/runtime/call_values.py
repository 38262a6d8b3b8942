"""Launch hints and spaces computed at the call (runtime layer).

A site's settings are read when a key is decided (docs/runtime.md, "Modes"), and the key's
decision then launches every later call of the key. Two settings are part of the decision
itself, so a call giving another value must not launch the key's first call's decision:

- a macro's static launch hint that is not a literal (``num_warps=self.nw``): the launcher is
  built with it and the record's digest holds it, so a record made with ``num_warps=4``
  never decides a call giving 8;
- a ``space=`` that may give another space on each call (``space=self.space`` of a module
  with one space per instance; ``space=spaces[kind]``; an ``autotune_launch`` call place
  given two spaces): a configuration chosen in one space may not be in the other's, or be
  its best.

A site that reads such values per call joins them to the call key: another value is another
decision, tuned or found in its own record, as in a new process. Such a site takes no repeat
check or fused launch, which do not read the call's settings.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from tunedsl.model.config import Config
from tunedsl.model.space import Space

#: Spaces remembered with their key part, by object: a space a call gives again (a module
#: constant, an instance's own) is not walked again.
MAX_SPACES = 256
#: How deep a space is walked for its value; deeper parts count by their identity.
MAX_DEPTH = 16

_spaces: dict[int, tuple[Any, Hashable]] = {}  # id -> (the space, kept so no id is reused; part)


def once(lazy: Callable[[], Any]) -> Callable[[], Any]:
    """``lazy`` (a call's options thunk) evaluated at most once: the user's option
    expressions run once per call however many per-call reads (key, check, zeroing) ask."""
    values: list[Any] = []

    def evaluated() -> Any:
        if not values:
            values.append(lazy())
        return values[0]

    return evaluated


def joined(call_key: tuple[Any, ...], lazy: Callable[[], Any] | None, site: Any) -> tuple[Any, ...]:
    """``call_key`` with the values ``site`` reads per call from this call's thunk: its
    launch hints (``site.hints_computed``) and its space (``site.space_computed``)."""
    if not (site.hints_computed or site.space_computed):
        return call_key
    space, hints, _ = lazy() if lazy is not None else (None, None, None)
    if site.hints_computed:
        hints = tuple((k, _hashable(v)) for k, v in sorted((hints or {}).items()))
        call_key = (*call_key, ("hints", hints))
    if site.space_computed:
        call_key = (*call_key, ("space", space_part(space)))
    return call_key


def rekeyed(table: dict[Any, Any], what: str, first_space: Any) -> bool:
    """Key a table's entries, decided before the site read its space per call, by the space
    they were decided in (``first_space``: an ``autotune_launch`` call place given a second
    space keeps its first space's decisions); False where that space is not known. A
    ``reset_to_zero=`` or ``verify=`` read per call keys nothing: the entries stand (True)."""
    if what in ("reset", "verify"):
        return True
    if what != "space" or first_space is None:
        return False
    part = ("space", space_part(first_space))
    moved = {(*key, part): entry for key, entry in table.items()}
    table.clear()
    table.update(moved)
    return True


def space_part(space: Any) -> Hashable:
    """The key part of a space: equal for spaces of equal value (a literal space is a new
    dict on every call), and for one object read again; a function in it (a ``Space``'s
    constraint) counts by identity, as two functions of one code may allow different
    configurations (what they read elsewhere). A space changed in place keeps the part it
    had when first read: give the site a new object instead."""
    known = _spaces.get(id(space))
    if known is not None and known[0] is space:
        return known[1]
    part = _Part(_value(space, 0))
    if len(_spaces) >= MAX_SPACES:
        _spaces.clear()
    _spaces[id(space)] = (space, part)
    return part


def _value(value: Any, depth: int) -> Hashable:
    """``value`` as a hashable of its value; what has no value form here (an object of the
    user's), by its identity: another object is another decision, never a wrong one."""
    if depth > MAX_DEPTH:
        return _Identity(value)
    kind = type(value)
    if value is None or kind in (str, int, float, bool, bytes, range, Config):
        return (kind, value)
    if isinstance(value, Mapping):
        return (kind, tuple((_value(k, depth + 1), _value(v, depth + 1)) for k, v in value.items()))
    if kind in (list, tuple):
        return (kind, tuple(_value(v, depth + 1) for v in value))
    if kind in (set, frozenset):
        return (kind, frozenset(_value(v, depth + 1) for v in value))
    if kind is Space:  # its constraint by identity: what a function allows is not its code
        return (kind, _value(value.axes, depth + 1), _Identity(value.constraint))
    return _Identity(value)


class _Part:
    """A space's key part, its hash computed once: a space of a million values is hashed
    when first read, not on every call's table lookup (which compares the same object)."""

    __slots__ = ("hash", "value")

    def __init__(self, value: Hashable) -> None:
        self.value, self.hash = value, hash(value)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return other is self or (
            isinstance(other, _Part) and other.hash == self.hash and other.value == self.value
        )


class _Identity:
    """A part equal only for the same object (which it keeps, so its id is not reused)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value


def _hashable(value: Any) -> Hashable:
    """``value`` as a key part: a value the settings refuse (a list) by its text; the
    call that misses on it is told why (``model/settings.py``)."""
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return value  # type: ignore[no-any-return]
