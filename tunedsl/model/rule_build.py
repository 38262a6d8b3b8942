"""Building a rule (``model/rule.py``) from swept keys' timings, and validating it.

1. **Cover**: a few configurations such that every swept key has one within ``tolerance``
   (default 3%) of its own best, greedily (the configuration covering the most keys not yet
   covered, ties to the lower total regret), at most ``max_configs`` (default 8).
2. **Map**, per family: a regret tree (each leaf picks the configuration of least summed
   log-regret over its keys; splits at midpoints of a feature's log2 values, a size's first,
   or on an int's alignment where each side's keys span the sizes, at least three a side;
   depth at most 3), the nearest swept key's pick (``model.rule_near.nearest``: among the
   keys of the same alignment where they bracket the key's sizes), and the one configuration
   of least summed log-regret over the family (added to the configurations when the cover
   lacks it and there is room).
3. **Validate**: leave one key out, build everything from the others, and pick for the key
   left out; its regret is its time with that pick over its measured best. The family keeps
   the map with the lowest geomean regret (the single configuration on a tie, then the tree):
   where per-size bests are noise, one configuration beats any map fitted to them; the report has geomean, p95 and max, beside two
   baselines measured the same way: the nearest swept key's own best (vLLM-style lookup)
   and the single configuration best over all training keys.

A regret is only known where the key's records timed the pick; picks never timed on the
held-out key are counted in ``unmeasured`` (and charged as 4x slower when a family's maps are
compared), picks that failed on it in ``failed``. A
configuration that failed on a key is never a map's choice for it where another ran on every
key of the leaf, and a map whose held-out picks fail loses to one whose picks run.

A configuration that ``prune=`` dropped for a key (the key's record says so) is no candidate
there: never timed, never launched (the runtime refuses such a
pick), and no measuring fills the cell. It is no cell to measure, the cover's ranking leaves
it out, a map charges it as a failure (never the pick where another runs on every key of the
leaf), and a held-out pick of it is counted in ``dropped``, not ``unmeasured``. So is a
configuration outside the key's space as its record states it (an exhaustive search timed
every candidate of the key: a space computed per call, ``space=dict(block=[next_pow2(n)])``,
keeps other configurations at other sizes), counted in ``outside``; it is still a cell to
measure (the site's space may have grown since: measuring tells).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tunedsl.model.config import Config
from tunedsl.model.rule import MAX_CONFIGS, MAX_TREE_DEPTH, Family, Tree
from tunedsl.model.rule_features import key_features, ranged
from tunedsl.model.rule_near import nearest, splits_alignment

DEFAULT_TOLERANCE = 0.03
# Held-out keys below this many cannot tell a rule's maps apart: the map that follows what the
# sweep measured at the swept keys is chosen, and `rules build` says so.
FEWEST_HELD_OUT = 3
# The swept keys each side of a split on an int's alignment needs (a multiple of 16 or not).
MIN_ALIGNMENT_KEYS = 3
# The log-regret charged for a configuration never timed on a key (as if 4x slower): a map
# should not send a key where nothing is known.
UNKNOWN_LOG_REGRET = math.log(4.0)
# The log-regret charged for a configuration that failed on a key: more than any sum of
# regrets of configurations that run, so a leaf never picks one that fails on its keys where
# one runs on all of them.
FAILED_LOG_REGRET = math.log(1e12)


@dataclass(frozen=True)
class SweptKey:
    """One swept key: its readable form, each configuration's median time (None: failed),
    the configurations ``prune=`` dropped for it (its record's ``context["pruned"]``), and
    whether its record timed every candidate of the key (an exhaustive search)."""

    readable: Mapping[str, object]
    times: Mapping[Config, float | None]
    pruned: frozenset[Config] = frozenset()
    complete: bool = False

    @property
    def best(self) -> float:
        return min(t for t in self.times.values() if t is not None)

    def regret(self, config: Config) -> float | None:
        t = self.times.get(config)
        return None if t is None else t / self.best

    def failed(self, config: Config) -> bool:
        """``config`` was timed on this key and failed (not: never timed)."""
        return config in self.times and self.times[config] is None

    def dropped(self, config: Config) -> bool:
        """``config`` was no candidate of this key: ``prune=`` dropped it."""
        return config in self.pruned and config not in self.times

    def outside(self, config: Config) -> bool:
        """``config`` is outside the key's space as its record states it: the record timed
        every candidate of the key, not this one, and ``prune=`` did not drop it."""
        return self.complete and config not in self.times and config not in self.pruned

    def no_candidate(self, config: Config) -> bool:
        """The runtime never launches ``config`` for this key: dropped, or outside."""
        return self.dropped(config) or self.outside(config)

    def held_out_regret(self, config: Config) -> float | None:
        """The regret of a held-out pick: infinite where it failed, was dropped or is outside
        the key's space (it never launches there), None never timed."""
        return math.inf if self.failed(config) or self.no_candidate(config) else self.regret(config)


@dataclass(frozen=True)
class Built:
    configs: tuple[Config, ...]
    families: tuple[Family, ...]
    validation: dict[str, object]
    # Why swept keys were left out (a family's keys of other sizes than its most keys'): notes.
    left_out: tuple[str, ...] = ()


def usable(keys: Sequence[SweptKey]) -> list[SweptKey]:
    """The keys with at least one successful time."""
    return [k for k in keys if any(t is not None for t in k.times.values())]


def one_layout(keys: Sequence[SweptKey]) -> tuple[list[SweptKey], list[str]]:
    """Per family, the keys with the sizes most of its keys have, and a note for the others.

    A family's keys may name different sizes: a constexpr passed at its default value is left
    out of the key (``WIDTH=64`` for ``WIDTH: tl.constexpr = 64``, but ``WIDTH=32`` is in it).
    A family's map reads one set of sizes, and a key with others is outside its range at run
    time (tuned, never decided), so the rule is built from the keys of one set."""
    by_family: dict[str, dict[frozenset[str], list[int]]] = {}
    for i, k in enumerate(keys):
        family, x = key_features(k.readable)
        names = frozenset(f for f in x if ranged(f))
        by_family.setdefault(family, {}).setdefault(names, []).append(i)
    kept: list[int] = []
    notes: list[str] = []
    for layouts in by_family.values():
        main = max(layouts, key=lambda names: len(layouts[names]))  # the first of ties
        kept += layouts[main]
        for names, members in layouts.items():
            if names != main:
                theirs, ours = sorted(names - main), sorted(main - names)
                differ = [f"have {', '.join(theirs)}"] if theirs else []
                differ += [f"lack {', '.join(ours)}"] if ours else []
                notes.append(
                    f"{len(members)} swept key(s) left out: they {' and '.join(differ)}, "
                    f"unlike the {len(layouts[main])} other key(s) of their family, so the "
                    "rule does not decide keys like them "
                    "(a constexpr passed at its default value is left out of the key: give it "
                    "no default in the kernel's signature, so that every key holds it, and "
                    "sweep again)"
                )
    return [keys[i] for i in sorted(kept)], notes


def cover(
    keys: Sequence[SweptKey], tolerance: float = DEFAULT_TOLERANCE, max_configs: int = MAX_CONFIGS
) -> list[Config]:
    """Step 1: the covering configurations, most keys first."""
    covers: dict[Config, set[int]] = {}
    for i, k in enumerate(keys):
        limit = (1 + tolerance) * k.best
        for c, t in k.times.items():
            if t is not None and t <= limit:
                covers.setdefault(c, set()).add(i)
    left = set(range(len(keys)))
    chosen: list[Config] = []
    order = sorted(covers, key=lambda c: str(c))  # deterministic among equals
    # Ties go to the lower total regret over the keys a configuration is a candidate of.
    cost = {c: sum(_log_regret(k, c) for k in keys if not k.no_candidate(c)) for c in order}
    while left and len(chosen) < max_configs:
        best = max(order, key=lambda c: (len(covers[c] & left), -cost[c]))
        if not covers[best] & left:
            break
        chosen.append(best)
        left -= covers[best]
    return chosen


def missing_cells(keys: Sequence[SweptKey], configs: Sequence[Config]) -> list[tuple[int, Config]]:
    """The (key index, configuration) cells a rule over ``configs`` needs that the keys'
    records never timed: a configuration absent from a key's times (one that failed on the
    key was timed: it failed), unless ``prune=`` dropped it for the key (no measuring times
    it). The cross-measurement phase of ``tunedsl rules build`` measures them (one outside
    the key's recorded space too: the site's space may have grown since)."""
    return [
        (i, c) for i, k in enumerate(keys) for c in configs if c not in k.times and not k.dropped(c)
    ]


def grown_cells(keys: Sequence[SweptKey]) -> list[tuple[int, Config]]:
    """The (key index, configuration) cells of a space grown since some keys were swept: a
    configuration another key's record timed, absent from a key whose record timed every
    candidate it had, all of them among the other key's (a space grown by a configuration
    and swept again at a few sizes). A space computed per call (other blocks at other
    sizes) has none, and what ``prune=`` dropped for the key is no cell."""
    have = [frozenset(k.times) | k.pruned for k in keys]
    cells: list[tuple[int, Config]] = []
    for i, k in enumerate(keys):
        grown = {c for theirs in have if have[i] < theirs for c in theirs} - have[i]
        cells += [(i, c) for c in sorted(grown, key=str) if k.complete]
    return cells


def dropped_cells(keys: Sequence[SweptKey], configs: Sequence[Config]) -> int:
    """How many (key, configuration) cells of ``configs`` are configurations ``prune=``
    dropped for the key."""
    return sum(k.dropped(c) for k in keys for c in configs)


def outside_cells(keys: Sequence[SweptKey], configs: Sequence[Config]) -> int:
    """How many (key, configuration) cells of ``configs`` are outside the key's space as
    its record states it."""
    return sum(k.outside(c) for k in keys for c in configs)


def with_cells(
    key: SweptKey,
    times: Mapping[Config, float | None],
    pruned: frozenset[Config] = frozenset(),
    complete: bool = False,
) -> SweptKey:
    """``key`` with the cells of ``times`` it lacks (its own times are kept), the
    configurations ``pruned`` says ``prune=`` dropped for it, and whether ``times`` holds
    every candidate of the key (a measuring's record, an exhaustive search)."""
    added = {c: t for c, t in times.items() if c not in key.times}
    if not added and pruned <= key.pruned and complete <= key.complete:
        return key
    return SweptKey(
        key.readable, {**key.times, **added}, key.pruned | pruned, key.complete or complete
    )


def _log_regret(key: SweptKey, config: Config) -> float:
    r = key.regret(config)
    if r is None:  # one prune= dropped (or outside its space) never launches: as one failing
        failed = key.failed(config) or key.no_candidate(config)
        return FAILED_LOG_REGRET if failed else UNKNOWN_LOG_REGRET
    return math.log(r)


def _total_log_regret(keys: Sequence[SweptKey], config: Config) -> float:
    return sum(_log_regret(k, config) for k in keys)


def _leaf(keys: Sequence[SweptKey], configs: Sequence[Config]) -> tuple[int, float]:
    costs = [_total_log_regret(keys, c) for c in configs]
    i = min(range(len(configs)), key=lambda j: costs[j])
    return i, costs[i]


def fit_tree(
    keys: Sequence[SweptKey],
    xs: Sequence[Mapping[str, float]],
    configs: Sequence[Config],
    depth: int = MAX_TREE_DEPTH,
    held: Mapping[str, float] | None = None,
) -> Tree:
    """Step 2's regret tree. Sizes are tried before alignments, and a split must be strictly
    better to replace one: a tie goes to a size. A split on an int's alignment needs the
    evidence ``model.rule_near.splits_alignment`` asks for. Leave-one-out passes the key it holds out as
    ``held`` (None where it does not reach this node): counted there as it is in the rule
    built from every key, so the split it validates is the one built."""
    pick, cost = _leaf(keys, configs)
    if depth == 0 or len(keys) < 2:
        return Tree(pick=pick)
    best: tuple[float, str, float] | None = None
    for feature in sorted({f for x in xs for f in x}, key=lambda f: (not ranged(f), f)):
        values = sorted({x[feature] for x in xs})
        for lo, hi in itertools.pairwise(values):
            edge = (lo + hi) / 2
            low = [i for i, x in enumerate(xs) if x[feature] <= edge]
            high = [i for i, x in enumerate(xs) if x[feature] > edge]
            if not ranged(feature) and not splits_alignment(
                xs, low, high, feature, held, MIN_ALIGNMENT_KEYS
            ):
                continue
            split = (
                _leaf([keys[i] for i in low], configs)[1]
                + _leaf([keys[i] for i in high], configs)[1]
            )
            if best is None or split < best[0] - 1e-12:
                best = (split, feature, edge)
    if best is None or best[0] >= cost - 1e-9:
        return Tree(pick=pick)
    _, feature, edge = best
    low = [i for i, x in enumerate(xs) if x[feature] <= edge]
    high = [i for i, x in enumerate(xs) if x[feature] > edge]
    goes_low = held is not None and held.get(feature, 0.0) <= edge  # the held key's way down
    lows, highs = (held, None) if goes_low else (None, held)
    return Tree(
        feature=feature,
        threshold=edge,
        low=fit_tree([keys[i] for i in low], [xs[i] for i in low], configs, depth - 1, lows),
        high=fit_tree([keys[i] for i in high], [xs[i] for i in high], configs, depth - 1, highs),
    )


def _points(
    keys: Sequence[SweptKey], xs: Sequence[Mapping[str, float]], configs: Sequence[Config]
) -> tuple[tuple[dict[str, float], int], ...]:
    return tuple((dict(x), _leaf([k], configs)[0]) for k, x in zip(keys, xs, strict=True))


def _ranges(xs: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, float]]:
    names = {f for x in xs for f in x if ranged(f)}
    return {f: (min(x[f] for x in xs), max(x[f] for x in xs)) for f in sorted(names)}


def _single(keys: Sequence[SweptKey]) -> Config:
    """The one configuration of least summed log-regret over ``keys`` (any they timed)."""
    seen = sorted({c for k in keys for c in k.times}, key=str)
    return min(seen, key=lambda c: _total_log_regret(keys, c))


def _fit(
    keys: Sequence[SweptKey],
    tolerance: float,
    max_configs: int,
    held: tuple[str, Mapping[str, float]] | None = None,
) -> tuple[list[Config], dict[str, tuple[list[int], Tree, tuple, Tree]]]:
    """Cover and the three maps of every family (indices into ``keys``): the regret tree, the
    nearest swept key, and one configuration for the whole family (a leaf alone), which wins
    where the per-size bests are noise. ``held``: the family and features of the key
    leave-one-out holds out (``fit_tree``)."""
    configs = cover(keys, tolerance, max_configs)
    by_family: dict[str, list[int]] = {}
    feats = [key_features(k.readable) for k in keys]
    for i, (family, _) in enumerate(feats):
        by_family.setdefault(family, []).append(i)
    singles: dict[str, Config] = {}
    for family, members in by_family.items():
        single = _single([keys[i] for i in members])
        if single not in configs and len(configs) < max_configs:
            configs.append(single)
        singles[family] = single
    maps = {}
    for family, members in by_family.items():
        fk = [keys[i] for i in members]
        fx = [feats[i][1] for i in members]
        single = singles[family]
        one = (
            Tree(pick=configs.index(single))
            if single in configs
            else Tree(pick=_leaf(fk, configs)[0])
        )
        theirs = held[1] if held is not None and held[0] == family else None
        tree = fit_tree(fk, fx, configs, held=theirs)
        maps[family] = (members, tree, _points(fk, fx, configs), one)
    return configs, maps


def build(
    keys: Sequence[SweptKey],
    tolerance: float = DEFAULT_TOLERANCE,
    max_configs: int = MAX_CONFIGS,
) -> Built:
    """Steps 1 to 3 over ``keys`` (at least one with a successful time)."""
    keys, left_out = one_layout(usable(keys))
    if not keys:
        raise ValueError("no swept key has a successful time")
    configs, maps = _fit(keys, tolerance, max_configs)
    feats = [key_features(k.readable) for k in keys]
    loo, drops = _leave_one_out(keys, feats, tolerance, max_configs)
    families = []
    chosen_regrets: list[float] = []
    unmeasured = failed = dropped = outside = 0
    for family, (members, tree, points, one) in maps.items():
        models = ("single", "tree", "nearest")  # the simplest first: it wins ties
        by_model = {m: [loo[i][m] for i in members if i in loo] for m in models}
        # Fewest held-out picks that fail first, then the lowest geomean of the others, a pick
        # never timed on its key counted as 4x slower. Where too few keys were held out to
        # tell the maps apart (two keys: each held out leaves one), the map that sends fewer
        # swept keys where they fail, then nearer their best.
        score: dict[str, tuple[float, ...]] = {
            m: (v.count(math.inf), _geomean(_charged(v))) for m, v in by_model.items()
        }
        xs = [feats[i][1] for i in members]
        if len(by_model["single"]) < FEWEST_HELD_OUT:
            at_swept: dict[str, list[float | None]] = {m: [] for m in models}
            for i, x in zip(members, xs, strict=True):
                for m, c in _picks(configs, one, tree, points, x).items():
                    at_swept[m].append(keys[i].held_out_regret(c))
            for m, v in at_swept.items():
                score[m] += (v.count(math.inf), _geomean(_charged(v)))
        model = min(models, key=lambda m: score[m])
        chosen_regrets += _ran(by_model[model])
        unmeasured += sum(r is None for r in by_model[model])
        why = [drops.get(i, {}).get(model) for i in members]
        failed += by_model[model].count(math.inf) - why.count("dropped") - why.count("outside")
        dropped += why.count("dropped")
        outside += why.count("outside")
        chosen = {"single": one, "tree": tree, "nearest": None}[model]
        families.append(Family(family, _ranges(xs), chosen, points))
    validation: dict[str, object] = {
        "method": "leave-one-key-out",
        "keys": len(keys),
        "tolerance": tolerance,
        **_summary(chosen_regrets),
        "unmeasured": unmeasured,
        "failed": failed,
        "dropped": dropped,
        "outside": outside,
        "baselines": {
            name: _summary(_ran([r[name] for r in loo.values()]))
            for name in ("nearest_key", "single_best")
        },
    }
    return Built(tuple(configs), tuple(families), validation, tuple(left_out))


def _leave_one_out(
    keys: Sequence[SweptKey],
    feats: Sequence[tuple[str, dict[str, float]]],
    tolerance: float,
    max_configs: int,
) -> tuple[dict[int, dict[str, float | None]], dict[int, dict[str, str]]]:
    """For each key (of a family with others): the regret of each map's pick when the rule
    is built without it, and of the two baselines; and the maps whose pick is no candidate
    of the key, ``"dropped"`` (by ``prune=``) or ``"outside"`` (its recorded space): their
    regret is infinite, never launched there."""
    out: dict[int, dict[str, float | None]] = {}
    drops: dict[int, dict[str, str]] = {}
    for i, held in enumerate(keys):
        family, x = feats[i]
        rest = [j for j in range(len(keys)) if j != i]
        if not any(feats[j][0] == family for j in rest):
            continue  # the only key of its family: nothing to learn it from
        train = [keys[j] for j in rest]
        configs, maps = _fit(train, tolerance, max_configs, (family, x))
        members, tree, points, one = maps[family]
        fam_x = [feats[rest[m]][1] for m in members]
        fam_keys = [train[m] for m in members]
        own_best = tuple((fx, _own_best(k)) for fx, k in zip(fam_x, fam_keys, strict=True))
        all_configs = sorted({c for k in train for c in k.times}, key=str)
        single = min(all_configs, key=lambda c: _total_log_regret(train, c))
        picks = _picks(configs, one, tree, points, x)
        drops[i] = {
            m: "dropped" if held.dropped(c) else "outside"
            for m, c in picks.items()
            if held.no_candidate(c)
        }
        out[i] = {
            **{m: held.held_out_regret(c) for m, c in picks.items()},
            "nearest_key": held.held_out_regret(
                _configs_of(own_best)[nearest(_indexed(own_best), x)]
            ),
            "single_best": held.held_out_regret(single),
        }
    return out, drops


def _picks(
    configs: Sequence[Config], one: Tree, tree: Tree, points: tuple, x: Mapping[str, float]
) -> dict[str, Config]:
    """Each map's pick for a key of features ``x``: the one configuration, the regret tree's,
    the nearest swept key's."""
    return {
        "single": configs[one.decide(x)],
        "tree": configs[tree.decide(x)],
        "nearest": configs[nearest(points, x)],
    }


def _ran(regrets: Sequence[float | None]) -> list[float]:
    """The regrets of picks that were timed and ran (neither None nor infinite)."""
    return [r for r in regrets if r is not None and r != math.inf]


def _charged(regrets: Sequence[float | None]) -> list[float]:
    """The regrets of picks that did not fail, one never timed charged as 4x slower."""
    return [math.exp(UNKNOWN_LOG_REGRET) if r is None else r for r in regrets if r != math.inf]


def _own_best(key: SweptKey) -> Config:
    return min((c for c, t in key.times.items() if t is not None), key=lambda c: key.times[c])  # type: ignore[arg-type, return-value]


def _configs_of(pairs: Sequence[tuple[Mapping[str, float], Config]]) -> list[Config]:
    return [c for _, c in pairs]


def _indexed(
    pairs: Sequence[tuple[Mapping[str, float], Config]],
) -> list[tuple[Mapping[str, float], int]]:
    return [(x, i) for i, (x, _) in enumerate(pairs)]


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.inf


def _summary(regrets: Sequence[float]) -> dict[str, object]:
    if not regrets:
        return {"geomean": None, "p95": None, "max": None, "n": 0}
    ordered = sorted(regrets)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {"geomean": _geomean(ordered), "p95": p95, "max": ordered[-1], "n": len(ordered)}
