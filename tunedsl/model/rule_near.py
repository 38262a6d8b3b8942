"""The swept keys of a rule's family as points in log2 space (``model/rule.py``): the one
nearest a key, and whether a key lies among them at all.

Pure Python, no torch or triton: the model layer.
"""

from __future__ import annotations

import bisect
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

    __slots__ = ("alignment", "all", "by_alignment", "rows", "sizes")

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
        self.all = _searchable(self.rows)
        gaps = [_widest_gap({r[0][i] for r in self.rows}) for i in range(len(self.sizes))]
        # Per alignment: its keys, and per size the range they bracket (widened by the
        # sweep's widest gap on it: the sizes between two swept keys of either alignment).
        self.by_alignment: dict[
            tuple[Any, ...], tuple[list[Any], tuple[tuple[float, float], ...], list[Any]]
        ]
        self.by_alignment = {
            alike: (
                _searchable(rows),
                tuple(
                    (
                        min(r[0][i] for r in rows) - gap - 1e-9,
                        max(r[0][i] for r in rows) + gap + 1e-9,
                    )
                    for i, gap in enumerate(gaps)
                ),
                _searchable([r for r in self.rows if r[3] != alike]),
            )
            for alike, rows in groups.items()
        }

    def nearest(self, x: Mapping[str, float]) -> int:
        get = x.__getitem__  # map(get, ...): no Python call a feature
        at = tuple(map(get, self.sizes))
        if not self.alignment:
            return _scan(self.all, at, math.inf, self.rows[0][2])[1]
        group = self.by_alignment.get(tuple(map(get, self.alignment)))
        if group is None:
            return _scan(self.all, at, math.inf, self.rows[0][2])[1]
        rows, ranges, others = group
        best_d, best = _scan(rows, at, math.inf, self.rows[0][2])
        for v, (lo, hi) in zip(at, ranges, strict=True):
            if not lo <= v <= hi:
                break
        else:
            return best  # bracketed: the nearest of its alignment
        # The others after: one of x's alignment wins a tie (the others must be nearer).
        return _scan(others, at, best_d, best)[1]


class _Line:
    """Rows of one size and no size of their own (a batch size swept alone), sorted: the
    nearest by bisection, not a scan of every swept key."""

    __slots__ = ("firsts", "order", "picks", "values")

    def __init__(self, rows: Sequence[tuple[tuple[float, ...], float, int, tuple[Any, ...]]]):
        ranked = sorted(range(len(rows)), key=lambda i: (rows[i][0][0], i))
        self.values = [rows[i][0][0] for i in ranked]
        self.picks = [rows[i][2] for i in ranked]
        self.order = ranked  # each sorted row's place in ``rows``: the first of ties wins
        # per sorted place, the first place of its value (equal values: the first row)
        self.firsts = [0] * len(ranked)
        for j in range(1, len(ranked)):
            same = self.values[j] == self.values[j - 1]
            self.firsts[j] = self.firsts[j - 1] if same else j

    def nearest(self, a: float, best_d: float, best: int) -> tuple[float, int]:
        values = self.values
        j = bisect.bisect_left(values, a)  # values[j - 1] < a <= values[j]: j is a first
        if j == len(values):
            k = self.firsts[j - 1]
        elif j == 0:
            k = 0
        else:
            low = self.firsts[j - 1]
            below, above = a - values[low], values[j] - a
            tie = below == above and self.order[low] < self.order[j]
            k = low if below < above or tie else j
        d = (values[k] - a) * (values[k] - a)
        return (d, self.picks[k]) if d < best_d else (best_d, best)


def _scan(rows: Any, at: tuple[float, ...], best_d: float, best: int) -> tuple[float, int]:
    """The nearest of ``rows`` (a row list, or its ``_Line``) to ``at`` if nearer than
    ``best_d`` (the first of ties)."""
    if type(rows) is _Line:
        return rows.nearest(at[0], best_d, best)
    dist = math.dist
    for vector, extra, pick, _ in rows:
        d = dist(vector, at) ** 2 + extra
        if d < best_d:
            best, best_d = pick, d
    return best_d, best


def _searchable(rows: list[Any]) -> Any:
    """``rows`` as ``_scan`` searches them fastest: a ``_Line`` where they vary one size and
    hold none of their own."""
    if rows and len(rows[0][0]) == 1 and all(r[1] == 0 for r in rows):
        return _Line(rows)
    return rows


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
