"""Search spaces: what ``space=`` may be, and its expansion into a list of ``Config``.

- a dict of sequences is a Cartesian product (the last axis varies fastest);
- a list of dicts is a fixed list of configurations;
- ``Space(constraint=fn, **axes)`` is a product filtered by ``constraint(cfg) -> bool``.

Every way ends in the same validated tuple of distinct configurations, in order.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tunedsl.errors import TunedslSyntaxError, UsageError
from tunedsl.runtime.config import Config, check_field

SpaceSpec = Any  # Mapping[str, Sequence] | Sequence[Mapping] | Space


class Space:
    """A Cartesian product of axes, optionally filtered by ``constraint``.

    >>> Space(tile=[64, 128], num_warps=[4, 8], constraint=lambda c: c.tile >= 128).configs()
    (Config(tile=128, num_warps=4), Config(tile=128, num_warps=8))
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
        merged.update(more_axes)
        if constraint is not None and not callable(constraint):
            raise UsageError(f"Space(constraint=...) must be callable, not {constraint!r}")
        self.axes = merged
        self.constraint = constraint

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}={v!r}" for k, v in self.axes.items())
        tail = f", constraint={getattr(self.constraint, '__name__', self.constraint)}"
        return f"Space({axes}{tail if self.constraint else ''})"

    def configs(self) -> tuple[Config, ...]:
        values = [_axis_values(name, vals) for name, vals in self.axes.items()]
        if not values:
            raise UsageError("space is empty: give at least one axis, e.g. {'tile': [256, 512]}")
        names = list(self.axes)
        product = [
            Config(dict(zip(names, combo, strict=False))) for combo in itertools.product(*values)
        ]
        if self.constraint is None:
            return _distinct(product)
        kept = [cfg for cfg in product if self.constraint(cfg)]
        if not kept:
            fn = getattr(self.constraint, "__qualname__", repr(self.constraint))
            raise UsageError(
                f"the space's constraint {fn} removed all {len(product)} configurations; "
                "loosen it or widen the axes"
            )
        return _distinct(kept)


def _axis_values(name: str, values: Any) -> list[Any]:
    # A scalar is a one-value axis: {"num_stages": 3} means [3].
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        values = [values]
    out = list(values)
    if not out:
        raise UsageError(f"space axis {name!r} is empty: give at least one value")
    for value in out:
        check_field(name, value, f"space axis {name!r}")
    return out


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
        if all(name in cfg for cfg in configs):
            continue
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean `${close[0]}`?" if close else f"the space's fields are: {names}"
        if close == [] and any(name in cfg for cfg in configs):
            hint = "it is missing from some configurations of a list space"
        raise TunedslSyntaxError(
            f"`${name}` is not a field of the space",
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
