"""Search spaces: what ``space=`` may be, and its expansion into a list of ``Config``.

- a dict of sequences is a Cartesian product (the last axis varies fastest);
- a list of dicts is a fixed list of configurations;
- ``Space(constraint=fn, **axes)`` is a product filtered by ``constraint(cfg) -> bool``;
  an axis may be an ``Axis`` that declares its kind (``Axis.pow2(16, 256)``).

``expand_space`` turns every way into the same validated tuple of distinct configurations,
in order; ``search_space`` turns it into a ``SearchSpace`` that strategies sample and walk
without listing it (a ``Space`` of 10^9 points costs the same as one of 10).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import random
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from tunedsl.errors import TunedslSyntaxError, UsageError, callable_name
from tunedsl.model.config import (
    Config,
    check_field,
    is_triton_config,
    triton_config_fields,
    triton_pre_hook_note,
)
from tunedsl.model.options import unknown_field
from tunedsl.model.space_draw import draw_valid
from tunedsl.model.space_input import MAX_AXIS_VALUES, axis_values, check_constraint, check_verdict

SpaceSpec = Any  # Mapping[str, Sequence] | Sequence[Mapping] | Space


class Axis:
    """One axis of a ``Space``: its values and how a search may move along it.

    - ``"log"``: ordered numbers on a log scale (tile sizes: all powers of two);
    - ``"ordered"``: ordered numbers (stages 1..8); a step goes to the next larger/smaller;
    - ``"categorical"``: unordered choices (layouts, booleans); any other value is a step.

    Plain sequences are inferred: ints that are all powers of two are ``"log"``, other
    numbers ``"ordered"``, anything else (bools, strings, mixtures) ``"categorical"``.
    """

    KINDS = ("log", "ordered", "categorical")

    def __init__(self, values: Iterable[Any], kind: str | None = None) -> None:
        # Distinct by type and value, so 1, 1.0 and True stay three values (as in Config).
        kept = list({(type(v).__name__, v): v for v in axis_values("Axis", values)}.values())
        if kind is None:
            kind = _infer_kind(kept)
        if kind not in self.KINDS:
            raise UsageError(f"Axis kind {kind!r}: expected one of {', '.join(self.KINDS)}")
        if kind != "categorical" and not all(_is_number(v) for v in kept):
            raise UsageError(f"an {kind!r} axis holds numbers only, not {kept!r}")
        self.values: tuple[Any, ...] = tuple(kept)
        self.kind = kind
        # Steps follow the sorted order of an ordered axis, the listed order otherwise.
        self.steps: tuple[Any, ...] = tuple(sorted(kept)) if kind != "categorical" else self.values
        self._rank = {(type(v).__name__, v): i for i, v in enumerate(self.steps)}

    @classmethod
    def pow2(cls, lo: int, hi: int) -> Axis:
        """Powers of two from ``lo`` to ``hi`` inclusive (a log-scale ordered axis)."""
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 < lo <= hi):
            raise UsageError(f"Axis.pow2({lo!r}, {hi!r}): expected integers 0 < lo <= hi")
        if hi.bit_length() - lo.bit_length() > MAX_AXIS_VALUES:  # counted before it is built
            raise UsageError(f"Axis.pow2: more values than an axis lists ({MAX_AXIS_VALUES:,})")
        values, v = [], 1
        while v <= hi:
            if v >= lo:
                values.append(v)
            v *= 2
        if not values:
            raise UsageError(f"Axis.pow2({lo}, {hi}) holds no power of two")
        return cls(values, "log")

    @classmethod
    def ordered(cls, values: Iterable[Any]) -> Axis:
        return cls(values, "ordered")

    @classmethod
    def categorical(cls, values: Iterable[Any]) -> Axis:
        return cls(values, "categorical")

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"Axis({list(self.values)!r}, {self.kind!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Axis):
            return NotImplemented
        return (self.kind, self._keys()) == (other.kind, other._keys())

    def __hash__(self) -> int:
        return hash((self.kind, self._keys()))

    def _keys(self) -> tuple[tuple[str, Any], ...]:
        return tuple((type(v).__name__, v) for v in self.values)

    def has(self, value: Any) -> bool:
        return (type(value).__name__, value) in self._rank

    def step_neighbours(self, value: Any) -> list[Any]:
        """Values one step away: the next smaller and larger of an ordered axis, every other
        value of a categorical one."""
        i = self._rank.get((type(value).__name__, value))
        if i is None:
            return []
        if self.kind == "categorical":
            return [v for j, v in enumerate(self.steps) if j != i]
        return [self.steps[j] for j in (i - 1, i + 1) if 0 <= j < len(self.steps)]

    def feature(self, value: Any) -> float:
        """A number a surrogate model can split on: log2 of a log axis, the value of an
        ordered one, the position of a categorical one (-1: not a value of the axis)."""
        if self.kind == "log" and _is_number(value) and value > 0:
            return math.log2(value)
        if self.kind == "ordered" and _is_number(value):
            return float(value)
        return float(self._rank.get((type(value).__name__, value), -1))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _infer_kind(values: Sequence[Any]) -> str:
    if values and all(_is_number(v) for v in values):
        if all(isinstance(v, int) and v > 0 and v & (v - 1) == 0 for v in values):
            return "log"
        return "ordered"
    return "categorical"


# Spaces up to this many points are listed once when sampled (cheap, and exact even when
# the constraint keeps few of them); larger ones are sampled by rejection, never listed.
SMALL_SPACE = 4096
# Rejection sampling gives up after this many draws per requested configuration.
SAMPLE_TRIES = 200
# The first valid configuration is looked for among this many points in product order,
# then among as many drawn at random (a fixed seed): a constraint that rejects them all is
# an error, never a scan of the whole space (10^7 points take minutes).
FIRST_SCAN = 10_000


class Space:
    """A Cartesian product of axes, optionally filtered by ``constraint``; never listed
    unless asked (``configs()``), so it may hold billions of points.

    >>> Space(tile=[64, 128], num_warps=[4, 8], constraint=lambda c: c.tile >= 128).configs()
    (Config(tile=128, num_warps=4), Config(tile=128, num_warps=8))

    It is a ``SearchSpace`` (``tunedsl.engine.seams``): ``size_hint``, ``iter_valid``,
    ``sample``, ``neighbours``, ``in``, and ``features`` for surrogate models.
    """

    def __init__(
        self,
        axes: Mapping[str, Any] | None = None,
        /,
        *,
        constraint: Callable[[Config], bool] | None = None,
        **more_axes: Any,
    ) -> None:
        merged: dict[str, Any] = dict(axes or {})
        name = next((n for n in more_axes if n in merged), None)
        if name is not None:  # the keyword would silently replace the dict's values
            raise UsageError(
                f"Space: axis {name!r} is given twice, as {merged[name]!r} in the dict and "
                f"{name}={more_axes[name]!r}; give it once"
            )
        merged.update(more_axes)
        check_constraint(constraint)
        self.axes = merged
        self.constraint = constraint
        self._dims: dict[str, Axis] | None = None
        self._answered = False  # the constraint returned something other than None
        self._small: tuple[Config, ...] | None = None
        self._first: Config | None = None  # first_valid's answer, found once

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}={v!r}" for k, v in self.axes.items())
        tail = f", constraint={getattr(self.constraint, '__name__', self.constraint)}"
        return f"Space({axes}{tail if self.constraint else ''})"

    # -- the axes ------------------------------------------------------------------------
    @property
    def dims(self) -> dict[str, Axis]:
        """Each axis as an ``Axis`` (kinds inferred where plain values were given)."""
        if self._dims is None:
            if not self.axes:
                raise UsageError(
                    "space is empty: give at least one axis, e.g. {'tile': [256, 512]}"
                )
            dims = {}
            for name, values in self.axes.items():
                axis = values if isinstance(values, Axis) else Axis(axis_values(name, values))
                if not axis.values:
                    raise UsageError(f"space axis {name!r} is empty: give at least one value")
                for value in axis.values:
                    check_field(name, value, f"space axis {name!r}")
                dims[name] = axis
            self._dims = dims
        return self._dims

    def size_hint(self) -> int:
        """Points before the constraint: an upper bound of the valid configurations."""
        return math.prod(len(a) for a in self.dims.values())

    def _ok(self, cfg: Config) -> bool:
        if self.constraint is None:
            return True
        try:
            verdict = self.constraint(cfg)
        except Exception as err:  # the user's function: say for which configuration
            getattr(err, "add_note", lambda _: None)(  # add_note: Python 3.11+
                f"raised by the Space's constraint= for {cfg}: fix it, or have it return "
                "False for such configurations")  # fmt: skip
            raise
        check_verdict(verdict, self.constraint, cfg)
        self._answered = self._answered or verdict is not None  # else a missing `return`?
        return bool(verdict)

    def _at(self, index: int) -> Config:
        # Mixed-radix decoding, the last axis varying fastest (the order of iter_valid).
        fields: dict[str, Any] = {}
        for name, axis in reversed(self.dims.items()):
            index, i = divmod(index, len(axis))
            fields[name] = axis.values[i]
        return Config({n: fields[n] for n in self.dims})

    # -- SearchSpace ---------------------------------------------------------------------
    def __contains__(self, config: object) -> bool:
        if not isinstance(config, Config) or set(config) != set(self.dims):
            return False
        if not all(axis.has(config[n]) for n, axis in self.dims.items()):
            return False
        return self._ok(config)

    def _points(self) -> Iterator[Config]:
        names = list(self.dims)
        for combo in itertools.product(*(a.values for a in self.dims.values())):
            yield Config(dict(zip(names, combo, strict=True)))

    def iter_valid(self) -> Iterator[Config]:
        """Every valid configuration, lazily, in product order (last axis fastest)."""
        return (cfg for cfg in self._points() if self._ok(cfg))

    def _scanned(self, points: Iterable[Config], limit: int) -> Generator[Config, None, None]:
        """The valid ones of ``points`` (at most ``limit``), with a progress line on a
        terminal while the constraint takes longer than a second."""
        if self.constraint is None:  # every point is valid: nothing to wait for
            yield from points
            return
        from tunedsl.progress import Scan

        scan = Scan(f"a space of {self.size_hint():,} points ({self._constraint_name()})", limit)
        try:
            for cfg in points:
                scan.step()
                if self._ok(cfg):
                    yield cfg
        finally:
            scan.close()

    def first_valid(self) -> Config:
        """The first valid configuration in product order when one is among the first
        ``FIRST_SCAN`` points, else one of ``FIRST_SCAN`` drawn at random (seed 0: the same
        one every time); a space of up to twice ``FIRST_SCAN`` points is scanned whole (no
        more tries than that). A constraint that rejects every point tried is a
        ``UsageError``."""
        if self._first is not None:
            return self._first
        size = self.size_hint()
        rng = random.Random(0)
        extra = FIRST_SCAN if size > 2 * FIRST_SCAN else 0  # drawn past the first points
        drawn = (self._at(rng.randrange(size)) for _ in range(extra))
        scanned = FIRST_SCAN if extra else 2 * FIRST_SCAN
        tried = itertools.chain(itertools.islice(self._points(), scanned), drawn)
        with contextlib.closing(self._scanned(tried, min(size, 2 * FIRST_SCAN))) as valid:
            found = next(valid, None)
        if found is not None:
            self._first = found
            return found
        if size <= 2 * FIRST_SCAN:
            raise self._all_removed(size)
        raise UsageError(
            f"the space's constraint {self._constraint_name()} rejected the first "
            f"{FIRST_SCAN:,} of its {size:,} configurations and {FIRST_SCAN:,} more drawn at "
            "random; loosen it, or narrow the axes to where valid configurations are"
            + self._no_answer()
        )

    def _constraint_name(self) -> str:
        return callable_name(self.constraint)

    def _no_answer(self) -> str:
        """Added to "rejected everything" when the constraint only ever returned None."""
        why = "returned None for every configuration tried: a missing `return`? (return True"
        return "" if self._answered else f"; {self._constraint_name()} {why} to keep one)"

    def sample(self, rng: random.Random, count: int) -> list[Config]:
        """Up to ``count`` distinct valid configurations, uniformly: a small space is listed
        once; a large one is sampled by rejection over the product, never listed, each point
        drawn tested once; one of up to ``FIRST_SCAN`` points whose valid ones are too rare
        for that is scanned whole, as ``first_valid`` scans it. Fewer than ``count`` come
        back only when the valid ones are that rare (or that few)."""
        if count <= 0:
            return []
        size = self.size_hint()
        if size <= SMALL_SPACE:
            if self._small is None:
                self._small = self._listed()
            if not self._small:
                raise self._all_removed(size)
            return rng.sample(self._small, min(count, len(self._small)))
        found, _ = draw_valid(
            rng, size, count, self._at, self._ok, SAMPLE_TRIES * count, FIRST_SCAN
        )
        if not found and size <= FIRST_SCAN:
            raise self._all_removed(size)
        if not found:  # as rare as that: the point the site found (or its error), found once
            return [self.first_valid()]
        return found

    def neighbours(self, config: Config) -> list[Config]:
        """Valid configurations one step away along one axis (see ``Axis.step_neighbours``)."""
        if not isinstance(config, Config) or set(config) != set(self.dims):
            return []
        out = []
        for name, axis in self.dims.items():
            for value in axis.step_neighbours(config[name]):
                cfg = config.replace(**{name: value})
                if self._ok(cfg):
                    out.append(cfg)
        return out

    def features(self, config: Config) -> list[float]:
        """One number per axis (``Axis.feature``), for surrogate models."""
        return [axis.feature(config.get(name)) for name, axis in self.dims.items()]

    # -- listing (small spaces) ----------------------------------------------------------
    def configs(self) -> tuple[Config, ...]:
        """Every valid configuration, listed (use on small spaces only)."""
        kept = self._listed()
        if not kept:
            raise self._all_removed(self.size_hint())
        return kept

    def _listed(self) -> tuple[Config, ...]:
        if self.constraint is None:
            return tuple(self._points())
        return tuple(self._scanned(self._points(), self.size_hint()))

    def _all_removed(self, size: int) -> UsageError:
        return UsageError(
            f"the space's constraint {self._constraint_name()} removed all {size} configurations; "
            "loosen it or widen the axes" + self._no_answer()
        )


class ListSpace:
    """A fixed list of configurations (``space=[{...}, ...]``) as a ``SearchSpace``; a
    neighbour differs in exactly one field, which numeric fields order."""

    def __init__(self, configs: Sequence[Config]) -> None:
        if not configs:
            raise UsageError("space is an empty list: give at least one configuration")
        self.configs_ = tuple(dict.fromkeys(configs))
        self._set = frozenset(self.configs_)
        names = field_names(self.configs_)
        self._axes = {n: Axis([c[n] for c in self.configs_ if n in c]) for n in names}

    def configs(self) -> tuple[Config, ...]:
        return self.configs_

    def size_hint(self) -> int:
        return len(self.configs_)

    def __contains__(self, config: object) -> bool:
        return config in self._set

    def iter_valid(self) -> Iterator[Config]:
        return iter(self.configs_)

    def first_valid(self) -> Config:
        return self.configs_[0]

    def sample(self, rng: random.Random, count: int) -> list[Config]:
        return rng.sample(self.configs_, min(max(count, 0), len(self.configs_)))

    def neighbours(self, config: Config) -> list[Config]:
        out = []
        for other in self.configs_:
            diff = [n for n in set(config) | set(other) if config.get(n) != other.get(n)]
            if len(diff) != 1 or len(other) != len(config):
                continue
            (name,) = diff
            axis = self._axes[name]
            if other[name] in axis.step_neighbours(config[name]):
                out.append(other)
        return out

    def features(self, config: Config) -> list[float]:
        return [axis.feature(config.get(name)) for name, axis in self._axes.items()]


def search_space(spec: SpaceSpec) -> Space | ListSpace:
    """Any accepted ``space=`` value as a ``SearchSpace``, without listing a ``Space``."""
    if isinstance(spec, Space):
        return spec
    if isinstance(spec, Mapping):
        return Space(spec)
    return ListSpace(expand_space(spec))


def _distinct(configs: Iterable[Config]) -> tuple[Config, ...]:
    return tuple(dict.fromkeys(configs))


def expand_space(spec: SpaceSpec) -> tuple[Config, ...]:
    """Turn any accepted ``space=`` value into a non-empty tuple of distinct configurations."""
    if isinstance(spec, Space):
        return spec.configs()
    if isinstance(spec, Mapping):
        return Space(spec).configs()
    if isinstance(spec, Config):
        return (spec,)
    if isinstance(spec, Sequence) and not isinstance(spec, (str, bytes)):
        if not spec:
            raise UsageError("space is an empty list: give at least one configuration")
        configs = []
        for i, item in enumerate(spec):
            if isinstance(item, Config):
                configs.append(item)
            elif isinstance(item, Mapping):
                for name, value in item.items():
                    check_field(name, value, f"space[{i}]")
                configs.append(Config(item))
            elif is_triton_config(item):
                raise UsageError(
                    f"space[{i}] is a triton.Config; a tunedsl space holds its fields as a "
                    f"dict: {triton_config_fields(item)!r}" + triton_pre_hook_note(item)
                )
            else:
                raise UsageError(
                    f"space[{i}] is {item!r}: a list space holds dicts of fields, e.g. "
                    "[{'tile': 256}, {'tile': 512}]"
                )
        return _distinct(configs)
    raise UsageError(
        f"space= must be a dict of sequences, a list of dicts or a tunedsl.Space, not {spec!r}"
    )


def field_names(configs: Iterable[Config]) -> list[str]:
    """Every field that appears in any configuration, in first-seen order."""
    return list(dict.fromkeys(name for cfg in configs for name in cfg))


def check_placeholders(
    placeholders: Iterable[tuple[str, int, int]], configs: Sequence[Config], filename: str
) -> None:
    """Raise TunedslSyntaxError at the first ``$NAME`` that is not a field of every config."""
    names = field_names(configs)
    for name, line, col in placeholders:
        lacking = next((cfg for cfg in configs if name not in cfg), None)
        if lacking is None:
            continue
        message, hint = unknown_field(name, names)  # the front end's words for a literal space
        if name in names:  # a list space where some configurations have it
            message = f"`${name}` is not a field of every configuration: {lacking!r} has none"
            hint = f"give every configuration of the list space a `{name}`"
        raise TunedslSyntaxError(
            message,
            filename=filename,
            lineno=line,
            col=col,
            source_line=_source_line(filename, line),
            hint=hint,
            end_col=col + 1 + len(name),
        )


def _source_line(filename: str, line: int) -> str | None:
    import linecache

    text = linecache.getline(filename, line)
    return text or None
