"""Which values ``prune=`` reads the ``key=`` value holds, judged over the calls a site
tunes (docs/runtime.md, "The prune rule"): the warning that prune= splits the ``key=``
buckets names every argument it reads that the key does not hold, and
``prune_closure.check`` refuses a prune reading a caller's local the key does not hold.
Model layer (no runtime dependencies); ``runtime/miss.py`` keeps one record per site for
each of the two.

A value read is held when it is the ``key=`` value or an item of it (also of a tuple
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

from tunedsl.model.prune_held import Path, key_parts, number


class KeyHolds:
    """A site's record of the places in its ``key=`` value each argument prune reads was
    found at, on every call so far, and of the arguments it said the key does not hold."""

    def __init__(self, key_text: str) -> None:
        self._names = _item_names(key_text)  # place in key= -> the name written there
        self._places: dict[str, frozenset[Path]] = {}
        self.told: set[str] = set()
        self._lock = threading.Lock()  # threads that tune other keys of the site at once

    def not_held(self, values: Mapping[str, Any], key: Any) -> list[str]:
        """The names of ``values`` (what prune read, by name) that this call shows the key
        does not hold and that were not named before (each is named once)."""
        with self._lock:
            out = [n for n in self._unheld(values, key) if n not in self.told]
            self.told.update(out)
            return out

    def unheld(self, values: Mapping[str, Any], key: Any) -> list[str]:
        """The names of ``values`` the key has not held on every call so far, this one
        included (named again on each call)."""
        with self._lock:
            return self._unheld(values, key)

    def _unheld(self, values: Mapping[str, Any], key: Any) -> list[str]:
        parts = dict(key_parts(key)) if key is not None else {}
        for name, value in values.items():
            found = frozenset(
                p for p, part in parts.items() if _equal(part, value)
            )  # where the key holds this value now
            before = self._places.get(name)
            self._places[name] = found if before is None else before & found
        out = [
            name
            for name in values
            if not any(self._holds(p, name, values) for p in self._places[name])
        ]
        return sorted(out)

    def _holds(self, place: Path, name: str, values: Mapping[str, Any]) -> bool:
        """Whether the key item at ``place`` holds ``name``: not where the key's text names
        another argument prune reads that is found there too."""
        other = self._names.get(place)
        if other is None or other == name or other not in values:
            return True
        return place not in self._places[other]


def _equal(part: Any, value: Any) -> bool:
    value = number(value)
    if not isinstance(value, (int, float, str, tuple)) or type(part) is not type(value):
        return False
    try:
        return bool(part == value)
    except Exception:  # an == that gives no truth value
        return False


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
