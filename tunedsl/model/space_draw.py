"""Drawing a space's valid points at random without listing it: rejection sampling over the
product's indices, each point drawn built and tested once, and a space small enough to scan
whole scanned where the draws find too few (what ``Space.sample`` does for a large space)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any


def draw_valid(
    rng: random.Random,
    size: int,
    count: int,
    point: Callable[[int], Any],
    valid: Callable[[Any], bool],
    tries: int,
    scan_up_to: int,
) -> tuple[list[Any], int]:
    """Up to ``count`` distinct valid points (``point(index)`` for an index below ``size``,
    kept when ``valid``), drawn uniformly in at most ``tries`` draws, and how many draws
    were made. A point drawn again is decided already (kept or rejected), so only new ones
    are built and tested: where the valid points are rare and the space not much larger
    than ``tries``, the draws repeat points many times over. A space of up to ``scan_up_to``
    points whose draws found fewer than ``count`` is scanned whole: the indices not drawn
    yet, in random order."""
    found: dict[Any, None] = {}
    drawn: set[int] = set()
    made = 0
    while len(found) < count and made < tries and len(drawn) < size:
        made += 1
        index = rng.randrange(size)
        if index not in drawn:
            drawn.add(index)
            _keep(found, point(index), valid)
    if len(found) < count and size <= scan_up_to:
        rest = [i for i in range(size) if i not in drawn]
        rng.shuffle(rest)
        for index in rest:
            if len(found) >= count:
                break
            _keep(found, point(index), valid)
    return list(found), made


def _keep(found: dict[Any, None], cfg: Any, valid: Callable[[Any], bool]) -> None:
    if valid(cfg):
        found[cfg] = None
