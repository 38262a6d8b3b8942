"""A decision rule for keys never tuned: a few configurations and a map from a key to one.

A rule is built ahead of time from a site's tuning records (``model/rule_build.py``, ``tunedsl
rules build``) and shipped beside records. At run time a miss with no record asks the rule.

A key is read as a family and features (``model/rule_features.py``). A key is *in range*
when its family is one the rule was built for and each size feature lies within the swept
keys' range (alignment has no range). A family's map is a shallow tree over the features
(splits at midpoints of log2 values) or the nearest swept key's pick, whichever the build's
leave-one-key-out validation preferred. Pure Python, no torch or triton: the model layer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from tunedsl.model.config import Config
from tunedsl.model.keys import canonical_json
from tunedsl.model.rule_features import ALIGNED, key_features, ranged, show_feature, show_value
from tunedsl.model.rule_near import Grid, NearTable, judge_of
from tunedsl.model.rule_unswept import never_swept

# 3: an int's class is in a key's family; 4: an int's alignment decides only sizes it brackets.
RULE_SCHEMA, READ_SCHEMAS = 4, (4,)
_OLDER = dict.fromkeys("12", "; it does not say which int classes (==1, 32- or 64-bit) it swept")
_OLDER["3"] = "; its maps may give a size off a multiple of 16 the pick of odd sizes far from it"
RULE_KIND = "tunedsl-rule"
MAX_TREE_DEPTH = 3
MAX_CONFIGS = 8
#: The most configurations a rule lists as swept (a site's space is listed up to 4,096).
MAX_SWEPT = 4096
#: The largest feature a key has in size: log2 of a size (of an int this many bits long,
#: far past any tensor or ``key=`` value). A swept key or range past it is no key's, and its
#: distance to a key (the nearest-key map) overflows a float.
MAX_FEATURE = float(1 << 16)


class InvalidRule(ValueError):
    """A rule file that does not match the schema; the message says which field."""


@dataclass(frozen=True)
class Tree:
    """A node: a leaf (``pick`` set) or a split (``feature`` <= ``threshold`` goes ``low``)."""

    pick: int | None = None
    feature: str | None = None
    threshold: float = 0.0
    low: Tree | None = None
    high: Tree | None = None

    def decide(self, x: Mapping[str, float]) -> int:
        node = self
        while node.pick is None:
            assert node.feature is not None and node.low is not None and node.high is not None
            node = node.low if x.get(node.feature, 0.0) <= node.threshold else node.high
        return node.pick

    def to_json(self) -> dict[str, Any]:
        if self.pick is not None:
            return {"pick": self.pick}
        assert self.low is not None and self.high is not None
        return {
            "feature": self.feature,
            "threshold": self.threshold,
            "low": self.low.to_json(),
            "high": self.high.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any, n_configs: int, where: str, depth: int = 0) -> Tree:
        if not isinstance(data, dict) or depth > MAX_TREE_DEPTH + 1:
            raise InvalidRule(f"{where} is not a tree node")
        if "pick" in data:
            pick = data["pick"]
            if not isinstance(pick, int) or isinstance(pick, bool) or not 0 <= pick < n_configs:
                raise InvalidRule(f"{where}.pick is {pick!r}; expected a configuration index")
            return cls(pick=pick)
        feature, threshold = data.get("feature"), data.get("threshold")
        if not isinstance(feature, str) or not _finite(threshold):
            raise InvalidRule(f"{where} needs a feature name and a finite threshold")
        return cls(
            feature=feature,
            threshold=float(threshold),
            low=cls.from_json(data.get("low"), n_configs, f"{where}.low", depth + 1),
            high=cls.from_json(data.get("high"), n_configs, f"{where}.high", depth + 1),
        )

    def lines(self, configs: Sequence[Config], indent: str = "") -> list[str]:
        """The tree as text a person reads: ``M <= 64 -> config A``."""
        if self.pick is not None:
            return [f"{indent}-> {_label(self.pick)} {configs[self.pick]}"]
        assert self.low is not None and self.high is not None and self.feature is not None
        if not ranged(self.feature):  # an int's alignment: 0 or 1
            name = self.feature.removesuffix(ALIGNED)
            low, high = f"{name} % 16 != 0", f"{name} % 16 == 0"
        else:
            edge = show_value(self.threshold)
            low, high = f"{self.feature} <= {edge}", f"{self.feature} > {edge}"
        return [
            f"{indent}if {low}:",
            *self.low.lines(configs, indent + "    "),
            f"{indent}else ({high}):",
            *self.high.lines(configs, indent + "    "),
        ]


def _label(i: int) -> str:
    return f"[{chr(ord('A') + i)}]" if i < 26 else f"[{i}]"


def _finite(x: Any) -> TypeGuard[int | float]:
    if not isinstance(x, int | float) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an int past any float
        return False


def _feature(x: Any) -> TypeGuard[int | float]:
    """A number a key's feature can be (``MAX_FEATURE``)."""
    return _finite(x) and -MAX_FEATURE <= x <= MAX_FEATURE


@dataclass(frozen=True)
class Family:
    """One family's map: its features' ranges and a tree or the nearest swept key."""

    family: str
    ranges: dict[str, tuple[float, float]]
    tree: Tree | None  # None: nearest swept key
    points: tuple[tuple[dict[str, float], int], ...]  # the swept keys' features and picks
    # Per layout of a key's feature names (in order): whether they are this family's sizes,
    # and the swept keys as vectors over them.
    _layouts: dict[tuple[str, ...], tuple[bool, NearTable]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # The sizes the sweep varied on their own, each with its widest gap (worked out once).
    _grid: list[Grid | None] = field(default_factory=list, init=False, repr=False, compare=False)

    def _layout(self, x: Mapping[str, float]) -> tuple[bool, NearTable]:
        names = tuple(x)  # keys of one family come with the same features: worked out once
        layout = self._layouts.get(names)
        if layout is None:
            table = NearTable(self.points, names)
            layout = (self.ranges.keys() == set(table.sizes), table)
            if len(self._layouts) < 64:
                self._layouts[names] = layout
        return layout

    def in_range(self, x: Mapping[str, float]) -> bool:
        return self.outside(x) is None

    def outside(self, x: Mapping[str, float]) -> tuple[str, str] | None:
        """What puts ``x`` (of this family) outside the swept range (a size's name, or
        ``"sizes"``) and why, or None when it is in range: a size the sweep did not have,
        one beyond the swept values, or a point on several sizes farther from every swept
        key than the sweep's widest gap on some size (M and K both swept from 16 to 4096,
        but only together: M=16 with K=4096 is no swept shape)."""
        if not self._layout(x)[0]:  # not the sizes (ranged features) the family was swept with
            theirs = sorted(self.ranges.keys() ^ {f for f in x if ranged(f)})
            return "sizes", f"its sizes are not the swept ones ({', '.join(theirs)})"
        for f, (lo, hi) in self.ranges.items():
            if not lo <= x[f] <= hi:
                return f, (
                    f"{show_feature(f, x[f])} is outside the swept "
                    f"[{show_value(lo)}, {show_value(hi)}]"
                )
        if not self._grid:
            self._grid.append(Grid.of(self.points, self.ranges))
        grid = self._grid[0]
        return None if grid is None else grid.outside(x)

    def judge(self, names: tuple[str, ...]) -> Callable[[Mapping[str, float]], int | None]:
        """For keys whose features are ``names``, in order: ``pick`` where ``in_range``, else None."""
        fits, table = self._layout(dict.fromkeys(names, 0.0))
        grid = self._grid or [Grid.of(self.points, self.ranges)]  # as ``outside`` keeps it
        pick = self.tree.decide if self.tree is not None else table.nearest
        return judge_of(self.ranges, grid[0], pick) if fits else lambda x: None

    def clamp(self, x: Mapping[str, float]) -> dict[str, float]:
        kept = {f: v for f, v in x.items() if not ranged(f)}
        return {
            **kept,
            **{f: min(max(x.get(f, lo), lo), hi) for f, (lo, hi) in self.ranges.items()},
        }

    def pick(self, x: Mapping[str, float]) -> int:
        if self.tree is not None:
            return self.tree.decide(x)
        return self._layout(x)[1].nearest(x)

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "ranges": {f: list(r) for f, r in sorted(self.ranges.items())},
            "model": "tree" if self.tree is not None else "nearest",
            "tree": self.tree.to_json() if self.tree is not None else None,
            "points": [{"x": x, "pick": p} for x, p in self.points],
        }

    @classmethod
    def from_json(cls, data: Any, n_configs: int, where: str) -> Family:
        if not isinstance(data, dict) or not isinstance(data.get("family"), str):
            raise InvalidRule(f"{where} is not a family")
        if not isinstance(_family_parts(data["family"]), dict):  # read by _closest_family
            raise InvalidRule(f"{where}.family is not the JSON text of an object")
        ranges_raw = data.get("ranges")
        if not isinstance(ranges_raw, dict):
            raise InvalidRule(f"{where}.ranges is not a mapping")
        ranges: dict[str, tuple[float, float]] = {}
        for name, pair in ranges_raw.items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(map(_feature, pair))):
                raise InvalidRule(f"{where}.ranges[{name!r}] is not [low, high] of a key's sizes")
            if pair[0] > pair[1]:
                raise InvalidRule(f"{where}.ranges[{name!r}] has low > high")
            ranges[name] = (float(pair[0]), float(pair[1]))
        points_raw = data.get("points")
        if not isinstance(points_raw, list) or not points_raw:
            raise InvalidRule(f"{where}.points is not a non-empty list")
        points = []
        for i, item in enumerate(points_raw):
            x, p = (item.get("x"), item.get("pick")) if isinstance(item, dict) else (None, None)
            if not isinstance(x, dict) or not all(_feature(v) for v in x.values()):
                raise InvalidRule(f"{where}.points[{i}].x is not a mapping of a key's features")
            if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < n_configs:
                raise InvalidRule(f"{where}.points[{i}].pick is not a configuration index")
            points.append(({str(k): float(v) for k, v in x.items()}, p))
        _check_ranges(ranges, points, where)
        model = data.get("model")
        if model == "tree":
            tree: Tree | None = Tree.from_json(data.get("tree"), n_configs, f"{where}.tree")
            given = set.intersection(*(set(x) for x, _ in points))
            _check_splits(tree, given, f"{where}.tree")
        elif model == "nearest":
            tree = None
        else:
            raise InvalidRule(f"{where}.model is {model!r}; expected 'tree' or 'nearest'")
        return cls(data["family"], ranges, tree, tuple(points))


def _check_ranges(
    ranges: Mapping[str, tuple[float, float]],
    points: Sequence[tuple[Mapping[str, float], int]],
    where: str,
) -> None:
    """A family's ranges are its swept keys' sizes, lowest to highest, as the build writes
    them: a range wider than its keys would decide sizes never swept, and one whose keys
    hold a single value breaks the map's measure of the sweep's gaps."""
    for name in sorted({f for x, _ in points for f in x if ranged(f)} | set(ranges)):
        if not all(name in x for x, _ in points):
            raise InvalidRule(f"{where}.points do not all give {name!r}, a size of the family")
        values = [x[name] for x, _ in points]
        swept = (min(values), max(values))
        if ranges.get(name) != swept:
            raise InvalidRule(
                f"{where}.ranges[{name!r}] is {ranges.get(name)}, not its swept keys' range "
                f"{swept}: build the rule again"
            )


def _check_splits(node: Tree | None, given: set[str], where: str) -> None:
    """Each split of a family's tree reads a feature every swept key of the family gives, as
    the build's splits do: a key lacking it would read as 0 there and go down one branch."""
    if node is None or node.pick is not None:
        return
    if node.feature not in given:
        raise InvalidRule(
            f"{where} splits on {node.feature!r}, which the family's swept keys do not give "
            f"({', '.join(map(repr, sorted(given)[:8]))}): build the rule again"
        )
    _check_splits(node.low, given, f"{where}.low")
    _check_splits(node.high, given, f"{where}.high")


def _family_parts(family: str) -> Any:
    try:
        return json.loads(family)
    except (ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class Rule:
    """A site's rule: its configurations and one map per family, with where it was measured
    and how it did on the swept keys it was not built from."""

    site: str
    kernel: dict[str, Any]  # qualname, source_hash (and the DSL site's launch text)
    hints: Any
    env: Any
    device: dict[str, Any]  # type, name, capability, arch of the GPU it was measured on
    toolchain: dict[str, Any]  # the keyed toolchain (Triton's version and backend)
    configs: tuple[Config, ...]
    families: tuple[Family, ...]
    validation: dict[str, Any]
    built: float = 0.0
    schema: int = RULE_SCHEMA
    # Every configuration the sweep timed, where it timed every one on each key (an
    # exhaustive search): a site that now keeps others is tuned, not decided (None: unknown).
    swept: frozenset[Config] | None = None

    def family_of(self, family: str) -> Family | None:
        for fam in self.families:
            if fam.family == family:
                return fam
        return None

    def decide(self, readable: Mapping[str, Any]) -> tuple[Config, bool]:
        """The configuration for a key, and whether the key is in the rule's range (else the
        pick of the nearest family, its features clamped into that family's range)."""
        family, x = key_features(readable)
        fam = self.family_of(family)
        if fam is not None and fam.in_range(x):
            return self.configs[fam.pick(x)], True
        fam = fam or self._closest_family(family)
        return self.configs[fam.pick(fam.clamp(x))], False

    def outside(self, readable: Mapping[str, Any]) -> tuple[str, str] | None:
        """What puts a key outside the rule's range and why, or None when it is in range:
        its family, never swept (the text names the parts that differ from the closest swept
        family), or a size of its family (the text names the size and the swept range)."""
        family, x = key_features(readable)
        fam = self.family_of(family)
        if fam is not None:
            found = fam.outside(x)
            return None if found is None else (f"{family} {found[0]}", found[1])
        closest = self._closest_family(family)
        return family, never_swept(family, x, closest.family, closest.ranges)

    def _closest_family(self, family: str) -> Family:
        want = json.loads(family)

        def shared(fam: Family) -> int:
            theirs = json.loads(fam.family)
            return sum(1 for k, v in want.items() if theirs.get(k) == v)

        return max(self.families, key=shared)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": RULE_KIND,
            "schema": self.schema,
            "site": self.site,
            "kernel": self.kernel,
            "hints": self.hints,
            "env": self.env,
            "device": self.device,
            "toolchain": self.toolchain,
            "configs": [c.to_json() for c in self.configs],
            "families": [f.to_json() for f in self.families],
            "validation": self.validation,
            "built": self.built,
            "swept": None if self.swept is None else _sorted_configs(self.swept),
        }

    @classmethod
    def from_json(cls, data: Any) -> Rule:
        """Validate and rebuild; raise InvalidRule naming the first bad field."""
        if not isinstance(data, dict) or data.get("kind") != RULE_KIND:
            raise InvalidRule("not a tunedsl rule (its 'kind' is not 'tunedsl-rule')")
        if (schema := data.get("schema")) not in READ_SCHEMAS:
            raise InvalidRule(  # by its text: a schema may be any JSON value, unhashable too
                f"rule schema {schema!r} is not one this tunedsl reads "
                f"({', '.join(map(str, READ_SCHEMAS))}){_OLDER.get(str(schema), '')}: "
                "build the rule again with this tunedsl (`tunedsl rules build`)"
            )
        for name, kind in (("site", str), ("kernel", dict), ("device", dict), ("toolchain", dict)):
            if not isinstance(data.get(name), kind):
                raise InvalidRule(f"rule.{name} is not a {kind.__name__}")
        configs_raw = data.get("configs")
        if not isinstance(configs_raw, list) or not 0 < len(configs_raw) <= MAX_CONFIGS:
            raise InvalidRule(f"rule.configs is not a list of 1 to {MAX_CONFIGS} configurations")
        try:
            configs = tuple(Config.from_json(c) for c in configs_raw)
        except Exception as err:
            raise InvalidRule(f"rule.configs: {err}") from None
        families_raw = data.get("families")
        if not isinstance(families_raw, list) or not families_raw:
            raise InvalidRule("rule.families is not a non-empty list")
        families = tuple(
            Family.from_json(f, len(configs), f"rule.families[{i}]")
            for i, f in enumerate(families_raw)
        )
        validation = data.get("validation", {})
        if not isinstance(validation, dict):
            raise InvalidRule("rule.validation is not a mapping")
        built = data.get("built", 0.0)
        swept_raw = data.get("swept")
        if swept_raw is not None and (
            not isinstance(swept_raw, list) or not 0 < len(swept_raw) <= MAX_SWEPT
        ):
            raise InvalidRule(f"rule.swept is not a list of 1 to {MAX_SWEPT} configurations")
        try:
            swept = None if swept_raw is None else frozenset(map(Config.from_json, swept_raw))
        except Exception as err:
            raise InvalidRule(f"rule.swept: {err}") from None
        return cls(
            site=data["site"],
            kernel=data["kernel"],
            hints=data.get("hints"),
            env=data.get("env"),
            device=data["device"],
            toolchain=data["toolchain"],
            configs=configs,
            families=families,
            validation=validation,
            built=float(built) if _finite(built) else 0.0,
            schema=data["schema"],
            swept=swept,
        )

    def measured_on(self) -> str:
        """Where the rule was measured, for a message: its GPU's name and toolchain, with
        control characters escaped (the file's text)."""
        return f"{self.device.get('name')} with {self.toolchain}".translate(_CONTROL)

    def describe(self) -> str:
        """The rule as a table a person can read."""
        lines = [
            f"rule for {self.site} (kernel {self.kernel.get('qualname', '?')})",
            f"  measured on {self.device.get('name')} with {_toolchain_text(self.toolchain)}",
        ]
        v = self.validation
        if v:
            lines.append(
                f"  leave-one-key-out over {v.get('keys')} swept keys: regret geomean "
                f"{_ratio(v.get('geomean'))}, p95 {_ratio(v.get('p95'))}, "
                f"max {_ratio(v.get('max'))}"
                + "".join(f"; {v[k]} {t}" for k, t in _NO_REGRET if _finite(v.get(k)) and v[k])
                + _alone(self.families)
            )
            base = v.get("baselines")
            if isinstance(base, Mapping) and all(
                isinstance(base.get(b), Mapping) for b in ("nearest_key", "single_best")
            ):
                near, single = base["nearest_key"], base["single_best"]
                lines.append(
                    f"  baselines: nearest swept key's best geomean {_ratio(near.get('geomean'))}"
                    f", p95 {_ratio(near.get('p95'))}; single best configuration geomean "
                    f"{_ratio(single.get('geomean'))}, p95 {_ratio(single.get('p95'))}"
                )
        if self.swept is not None:
            lines.append(
                f"  swept {len(self.swept)} configurations (a site whose space or prune= keeps "
                "another is tuned where it may)"
            )
        lines.append("  configurations:")
        lines += [f"    {_label(i)} {c}" for i, c in enumerate(self.configs)]
        for fam in self.families:
            lines.append(f"  family {fam.family}")
            for f, (lo, hi) in sorted(fam.ranges.items()):
                lines.append(f"    {f} in [{show_value(lo)}, {show_value(hi)}]")
            if fam.tree is not None:
                lines += fam.tree.lines(self.configs, "    ")
            else:
                lines.append("    nearest swept key:")
                for x, p in fam.points:
                    where = ", ".join(show_feature(f, v) for f, v in sorted(x.items()))
                    lines.append(f"      {where} -> {_label(p)}")
        return "\n".join(line.translate(_CONTROL) for line in lines)


# The held-out picks of no regret (validation's counts), as `describe` names them.
_NO_REGRET = (
    ("failed", "picks failed there"),
    ("dropped", "picks prune= drops there"),
    ("outside", "picks outside their key's space"),
    ("unmeasured", "picks never timed there"),
)
# Control characters as escapes: a rule file's text (a GPU's name, a feature's name) could
# carry escape sequences that rewrite the screen of whoever reads the table.
_CONTROL = {i: f"\\x{i:02x}" for i in (*range(32), *range(127, 160))}


def _sorted_configs(configs: frozenset[Config]) -> list[Any]:
    """The configurations' JSON in one order (a rule file built twice is the same)."""
    return [c.to_json() for c in sorted(configs, key=lambda c: canonical_json(c.to_json()))]


def _alone(families: Sequence[Family]) -> str:
    """The validation line's word on swept keys alone in their family: never held out."""
    alone = sum(len(fam.points) == 1 for fam in families)
    if not alone or len(families) == 1:  # one family of one key: no regret is shown at all
        return ""
    return f"; {alone} of them alone in their family, never held out (no regret of theirs)"


def _ratio(x: Any) -> str:
    return f"{x:.3f}x" if _finite(x) else "-"


def _toolchain_text(toolchain: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(toolchain.items()) if isinstance(v, str))
