"""The swept keys of a rule's family as points in log2 space (``model/rule.py``): the one
nearest a key, and whether a key lies among them at all.

Pure Python, no torch or triton: the model layer.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.model.rule_features import ranged, show_feature


def nearest(points: Sequence[tuple[Mapping[str, float], int]], x: Mapping[str, float]) -> int:
    """The pick of the swept key nearest ``x`` (Euclidean in log2 space over the sizes; the
    first of ties). A row length off a multiple of 16 loads without vectors, and its fastest
    configuration can differ from the nearest aligned length's: so where the swept keys of
    ``x``'s alignment bracket its sizes (each within their range, give or take the sweep's
    widest gap on that size), the nearest among those decides; elsewhere (a batch size of
    17 where the sweep's only sizes off a multiple of 16 are 2, 4 and 8) the nearest of all,
    one of ``x``'s alignment on a tie."""
    return NearTable(points, tuple(x)).nearest(x)


class NearTable:
    """Swept keys as vectors over one key's feature names: its sizes, in its order, and the
    squares of sizes only the swept key has (a run-time map asks per miss: no set per key);
    per alignment, its keys and the range of sizes they bracket."""

    __slots__ = ("alignment", "by_alignment", "rows", "sizes")

    def __init__(self, points: Sequence[tuple[Mapping[str, float], int]], names: Sequence[str]):
        self.sizes = tuple(f for f in names if ranged(f))
        self.alignment = tuple(f for f in names if not ranged(f))
        own = set(self.sizes)
        self.rows: list[tuple[tuple[float, ...], float, int, tuple[Any, ...]]] = []
        groups: dict[tuple[Any, ...], list[tuple[tuple[float, ...], float, int, tuple[Any, ...]]]]
        groups = {}
        for px, pick in points:
            vector = tuple(px.get(f, 0.0) for f in self.sizes)
            extra = sum(v * v for f, v in px.items() if ranged(f) and f not in own)
            alike = tuple(px.get(f) for f in self.alignment)
            row = (vector, extra, pick, alike)
            self.rows.append(row)
            groups.setdefault(alike, []).append(row)
        gaps = [_widest_gap({r[0][i] for r in self.rows}) for i in range(len(self.sizes))]
        # Per alignment: its keys, and per size the range they bracket (widened by the
        # sweep's widest gap on it: the sizes between two swept keys of either alignment).
        self.by_alignment: dict[tuple[Any, ...], tuple[list[Any], tuple[tuple[float, float], ...]]]
        self.by_alignment = {
            alike: (
                rows,
                tuple(
                    (
                        min(r[0][i] for r in rows) - gap - 1e-9,
                        max(r[0][i] for r in rows) + gap + 1e-9,
                    )
                    for i, gap in enumerate(gaps)
                ),
            )
            for alike, rows in groups.items()
        }

    def nearest(self, x: Mapping[str, float]) -> int:
        rows = self.rows
        get = x.__getitem__  # map(get, ...): no Python call a feature
        at = tuple(map(get, self.sizes))
        alike: tuple[Any, ...] = ()
        if self.alignment:
            alike = tuple(map(get, self.alignment))
            group = self.by_alignment.get(alike)
            if group is not None and all(
                lo <= v <= hi for v, (lo, hi) in zip(at, group[1], strict=True)
            ):
                rows = group[0]
        dist = math.dist
        best, best_d, best_alike = rows[0][2], math.inf, False
        for vector, extra, pick, theirs in rows:
            d = dist(vector, at) ** 2 + extra
            if d < best_d - 1e-12 or (d <= best_d + 1e-12 and theirs == alike and not best_alike):
                best, best_d, best_alike = pick, d, theirs == alike
        return best


def _widest_gap(values: set[float]) -> float:
    """The widest gap between consecutive ``values`` (0 for one value)."""
    return max((b - a for a, b in itertools.pairwise(sorted(values))), default=0.0)


def splits_alignment(
    xs: Sequence[Mapping[str, float]],
    low: Sequence[int],
    high: Sequence[int],
    feature: str,
    held: Mapping[str, float] | None,
    least: int,
) -> bool:
    """Whether a regret tree's node of keys ``xs`` may split on an int's alignment
    (``feature``) into ``low`` (off a multiple of 16) and ``high``: ``least`` keys a side,
    each side's reaching both ends of every size of ``xs`` within the widest gap between its
    swept values (the sizes they bracket, as ``nearest`` asks of a key's alignment), with
    ``held`` (a key leave-one-out holds out) counted on its side. A side's subtree decides
    every key of its alignment that reaches the node, and one fitted on batch sizes 2, 4 and
    8 says nothing of 40: an odd size or two swept by chance, or odd sizes only at one end of
    the sweep, are no evidence."""
    if held is not None:
        xs = [*xs, held]
        at = len(xs) - 1
        low, high = ([*low, at], high) if held.get(feature, 0.0) <= 0.5 else (low, [*high, at])
    if min(len(low), len(high)) < least:
        return False
    for f in {f for x in xs for f in x if ranged(f)}:
        values = [x.get(f, 0.0) for x in xs]
        gap, ends = _widest_gap(set(values)), (min(values), max(values))
        for side in (low, high):
            mine = [values[i] for i in side]
            if min(mine) - ends[0] > gap + 1e-9 or ends[1] - max(mine) > gap + 1e-9:
                return False
    return True


class Grid:
    """A family's swept keys over the sizes the sweep varied, with each size's widest gap
    between swept values. A key on several such sizes is in range only when its nearest
    swept key is within that gap on each: the inside of a product grid (M by K) is, the
    corner of a diagonal (M and K swept together, M=16 with K=4096 never) is not. Sizes
    equal on every swept key (a tensor's M and its output's M, or M and K on a diagonal) are
    one size here, and a key's must lie within that size's gap of each other."""

    __slots__ = ("gaps", "names", "rows", "ties")

    def __init__(
        self,
        names: tuple[str, ...],
        rows: list[tuple[float, ...]],
        ties: tuple[tuple[str, int], ...],
    ) -> None:
        self.names, self.rows, self.ties = names, rows, ties
        self.gaps = tuple(
            max(b - a for a, b in itertools.pairwise(sorted({r[i] for r in rows})))
            for i in range(len(names))
        )

    @classmethod
    def of(
        cls, points: Sequence[tuple[Mapping[str, float], int]], ranges: Mapping[str, Any]
    ) -> Grid | None:
        """None where one size varied alone: its range is then the whole story."""
        columns: dict[tuple[float, ...], int] = {}
        names: list[str] = []
        ties: list[tuple[str, int]] = []
        for f in sorted(ranges):
            lo, hi = ranges[f]
            if lo == hi:
                continue
            column = tuple(p.get(f, lo) for p, _ in points)
            if column in columns:
                ties.append((f, columns[column]))
            else:
                columns[column] = len(names)
                names.append(f)
        if not ties and len(names) < 2:
            return None
        return cls(tuple(names), list(zip(*columns, strict=True)), tuple(ties))

    def outside(self, x: Mapping[str, float]) -> tuple[str, str] | None:
        """The size off the swept shapes and why, or None."""
        for f, i in self.ties:
            if abs(x[f] - x[self.names[i]]) > self.gaps[i] + 1e-9:
                return f, (
                    f"{show_feature(f, x[f])} is off the swept shapes: the sweep moved it "
                    f"with {self.names[i]}, and {show_feature(self.names[i], x[self.names[i]])}"
                )
        if len(self.names) < 2:
            return None
        at = tuple(map(x.__getitem__, self.names))
        near = min(self.rows, key=functools.partial(math.dist, at))  # no Python call a row
        for f, v, w, gap in zip(self.names, at, near, self.gaps, strict=True):
            if abs(v - w) > gap + 1e-9:
                where = ", ".join(show_feature(n, u) for n, u in zip(self.names, near, strict=True))
                return f, (
                    f"{show_feature(f, v)} is off the swept shapes: the nearest swept key "
                    f"({where}) is farther on it than the sweep's widest gap"
                )
        return None


def judge_of(
    ranges: Mapping[str, tuple[float, float]],
    grid: Grid | None,
    pick: Callable[[Mapping[str, float]], int],
) -> Callable[[Mapping[str, float]], int | None]:
    """``pick(x)`` for a key ``x`` in range, else None: each ranged feature within its
    swept range, then the key on the swept shapes (``grid``, where there is one). For keys
    of one feature layout, the one a family's ``in_range`` accepts (``Family.judge``)."""
    bounds = tuple((f, lo, hi) for f, (lo, hi) in ranges.items())
    off = grid.outside if grid is not None else None

    def judged(x: Mapping[str, float]) -> int | None:
        for f, lo, hi in bounds:
            if not lo <= x[f] <= hi:
                return None
        if off is not None and off(x) is not None:
            return None
        return pick(x)

    return judged
