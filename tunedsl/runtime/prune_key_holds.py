"""Which arguments ``prune=`` reads the ``key=`` value holds, judged over the calls a site
tunes (runtime layer; docs/runtime.md, "The prune rule"): the warning that prune= splits
the ``key=`` buckets names every other one.

An argument is held when its value is the ``key=`` value or an item of it (also of a tuple
in it) at the same place on every call seen: ``key=(m, n)`` holds ``n``. One value equal to
a key item on one call proves nothing (``limit == tag == 64``): a later call whose value is
at no place it was before shows the key does not hold it. Where the key's text names that
item (``key=(M, N, K)``) and another argument prune reads has that name, the item holds
that argument, not one that only equals it (``stride_am == K`` for a contiguous ``a``).
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Mapping
from typing import Any

Path = tuple[int, ...]


class KeyHolds:
    """A site's record of the places in its ``key=`` value each argument prune reads was
    found at, on every call so far, and of the arguments it said the key does not hold."""

    def __init__(self, key_text: str) -> None:
        self._names = _item_names(key_text)  # place in key= -> the name written there
        self._places: dict[str, frozenset[Path]] = {}
        self.told: set[str] = set()
        self._lock = threading.Lock()  # threads that tune other keys of the site at once

    def not_held(self, values: Mapping[str, Any], key: Any) -> list[str]:
        """The arguments of ``values`` (those prune read, by name) that this call shows
        the key does not hold and that were not named before (each is named once)."""
        with self._lock:
            return self._not_held(values, key)

    def _not_held(self, values: Mapping[str, Any], key: Any) -> list[str]:
        parts = dict(_parts(key, ())) if key is not None else {}
        for name, value in values.items():
            found = frozenset(
                p for p, part in parts.items() if _equal(part, value)
            )  # where the key holds this value now
            before = self._places.get(name)
            self._places[name] = found if before is None else before & found
        out = []
        for name in values:
            if not any(self._holds(p, name, values) for p in self._places[name]):
                if name not in self.told:
                    out.append(name)
        self.told.update(out)
        return sorted(out)

    def _holds(self, place: Path, name: str, values: Mapping[str, Any]) -> bool:
        """Whether the key item at ``place`` holds ``name``: not where the key's text names
        another argument prune reads that is found there too."""
        other = self._names.get(place)
        if other is None or other == name or other not in values:
            return True
        return place not in self._places[other]


def _parts(key: Any, path: Path) -> list[tuple[Path, Any]]:
    out = [(path, _number(key))]
    if isinstance(key, (tuple, list)):
        for i, part in enumerate(key):
            out.extend(_parts(part, (*path, i)))
    return out


def _equal(part: Any, value: Any) -> bool:
    value = _number(value)
    if not isinstance(value, (int, float, str, tuple)) or type(part) is not type(value):
        return False
    try:
        return bool(part == value)
    except Exception:  # an == that gives no truth value
        return False


def _number(value: Any) -> Any:
    """A numpy number as the Python number it holds (as ``key=`` keys it); else ``value``."""
    if type(value).__module__.split(".")[0] == "numpy" and getattr(value, "shape", None) == ():
        return value.item()
    return value


def _item_names(text: str) -> dict[Path, str]:
    """The plain names ``key=`` is written with, by place: ``(M, N, K)`` -> ``{(0,): "M",
    ...}``, ``n`` -> ``{(): "n"}``; none where the text is not Python or not given."""
    try:
        node = ast.parse(text.strip(), mode="eval").body if text.strip() else None
    except SyntaxError:
        return {}
    out: dict[Path, str] = {}

    def walk(n: ast.expr | None, path: Path) -> None:
        if isinstance(n, ast.Name):
            out[path] = n.id
        elif isinstance(n, (ast.Tuple, ast.List)):
            for i, elt in enumerate(n.elts):
                walk(elt, (*path, i))

    walk(node, ())
    return out


def key_text(launch_text: str) -> str:
    """The ``key=`` expression of a DSL site's launch text (``...; key=(n, tag)``), else ''."""
    _, found, text = launch_text.rpartition("; key=")
    return text if found else ""
