"""The ``args`` mapping a site's ``prune=`` is given (runtime layer): the call's arguments
whose value does not depend on the configuration (docs/runtime.md, "Spaces and
configurations").

A DSL site passes ``HOLE`` for an argument written with ``$``, and ``bind`` gives its value
per configuration: it is left out. A plain-API call whose ``args=`` is a function of the
configuration passes that function's values for the site's default configuration (its key
is computed from them), and ``bind(cfg)`` returns ``ReplaceArgs``, the values under ``cfg``:
a position whose value under some configuration probed is not alike (``alike``) is left
out too, else ``prune`` would see the default's ``BLOCK_SIZE`` while it ranks every
configuration. The function is evaluated under a few configurations (``probe``: the
default and, per axis, two that differ from it in that axis alone), once per new key, only
for a site with ``prune=``: a value that follows only a combination of fields that no
single-axis change moves is not seen (docs/runtime.md, "prune=").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE, ReplaceArgs
from tunedsl.model.keys import is_tensor
from tunedsl.model.settings import MissingArgument, ReadRecorder, Settings

#: At most this many configurations are probed per new key to learn which positions of an
#: ``args=`` function follow the configuration (the default, two per axis); a space of at
#: most this many is probed whole.
PROBE_LIMIT = 16

#: A space whose configurations differ from the default in more than one field (a list of
#: configurations, a constraint) is probed also at this many spread over it.
SPREAD = 8


class PruneArgs(ReadRecorder):
    """``prune``'s ``args``, which names the arguments that depend on the configuration
    when ``prune`` reads one of them."""

    def __init__(self, data: Mapping[str, Any], per_config: Sequence[str]) -> None:
        super().__init__(data)
        self.per_config = tuple(per_config)

    def __missing__(self, name: Any) -> Any:
        if name not in self.per_config:
            return super().__missing__(name)
        held = [str(k) for k in dict.keys(self)]
        raise MissingArgument(
            f"{name!r}: prune= read args[{name!r}], whose value depends on the configuration "
            "(args holds only the call's values alike for every configuration); read the "
            "configuration's field it is made from instead (c.BLOCK for BLOCK_SIZE=c.BLOCK)"
            + (f" (args holds {', '.join(held)})" if held else "")
        )


def prune_args(
    arg_names: Sequence[str], call: Any, settings: Settings, plain_api: bool
) -> PruneArgs:
    """``prune``'s ``args`` for ``call`` (``miss.Call``): its arguments by name, less those
    whose value depends on the configuration (``plain_api``: an ``autotune_launch`` call,
    whose ``args=`` function is evaluated per configuration to learn them)."""
    varying: set[int] = set()
    dynamic: set[str] = set()
    if settings.prune is not None and plain_api:
        varying, dynamic = per_configuration(call.args, call.bind, settings)
    elif settings.prune is not None:  # a DSL site: its $ arguments are HOLE, its $ keywords
        dynamic = _keywords(call.bind, settings.default)  # those bind gives
    given: dict[str, Any] = {}
    per_config = set(dynamic)
    for i, (name, value) in enumerate(zip(arg_names, call.args, strict=False)):
        if value is HOLE or i in varying:
            per_config.add(name)
        else:
            given[name] = value
    given.update(call.static_kwargs)
    return PruneArgs(given, sorted(per_config - given.keys()))


def per_configuration(
    args: Sequence[Any], bind: Callable[[Config], Any], settings: Settings
) -> tuple[set[int], set[str]]:
    """The positions of ``args`` (the default configuration's values of an ``args=``
    function) whose value is not alike under some configuration ``probe`` gives, and the
    names of the keyword arguments ``bind`` gives per configuration. A configuration
    ``bind`` fails under tells nothing (its launch, if ``prune`` keeps it, names the
    failure)."""
    varying: set[int] = set()
    dynamic: set[str] = set()
    for cfg in probe(settings):
        try:
            holes, dyn, _ = bind(cfg)
        except Exception:  # the user's expression, raising under this configuration
            continue
        dynamic.update(dyn)
        if not isinstance(holes, ReplaceArgs):  # every position is the default's object
            continue
        varying.update(range(len(holes), len(args)))
        varying.update(
            i for i, (a, b) in enumerate(zip(args, holes, strict=False)) if not alike(a, b)
        )
    return varying, dynamic


def _keywords(bind: Callable[[Config], Any], default: Config) -> set[str]:
    """The names of the keyword arguments ``bind`` gives under ``default`` (none where it
    fails there: the launch names the failure)."""
    try:
        return set(bind(default)[1])
    except Exception:  # the user's expression, raising under the default
        return set()


def probe(settings: Settings) -> list[Config]:
    """The configurations an ``args=`` function is evaluated under to learn which of its
    positions follow the configuration: every one of a space of at most ``PROBE_LIMIT``;
    else the default and, for each axis, the configurations that differ from the default in
    that axis alone at its two ends (its first and last value but the default's), plus ``SPREAD`` spread over the space where some axis of more
    than one value has none (a list of configurations, a constraint); at most
    ``PROBE_LIMIT`` in all."""
    default = settings.default
    if settings.large:  # a Space: its axes, never listed
        space = settings.space
        picks = [default]
        unmoved = 0  # axes of more than one value that a constraint leaves no such point
        for name, axis in space.dims.items():
            others = [v for v in axis.values if v != default[name]]
            moved = [default.replace(**{name: v}) for v in others]
            pair = _first(moved, space), _first(moved[::-1], space)  # the axis's two ends
            picks.extend(c for c in dict.fromkeys(pair) if c is not None)
            unmoved += bool(others and pair[0] is None)
        if unmoved:
            picks.extend(space.sample(random.Random(0), SPREAD))
        return list(dict.fromkeys(picks))[:PROBE_LIMIT]
    configs = settings.configs
    if len(configs) <= PROBE_LIMIT:
        return list(configs)
    fields = dict.fromkeys(n for c in configs for n in c)  # those some configuration moves:
    names = [n for n in fields if any(default.get(n) != c.get(n) for c in configs)]
    found: dict[str, list[Config]] = {}  # per field, the first and last moving it alone
    for cfg in configs:
        diff = [n for n in names if default.get(n) != cfg.get(n)]
        if len(diff) == 1:
            ends = found.setdefault(diff[0], [cfg, cfg])
            ends[1] = cfg
    picks = [default, *(c for ends in found.values() for c in ends)]
    if len(found) < len(names):
        step = len(configs) / SPREAD
        picks.extend(configs[int(i * step)] for i in range(SPREAD))
    return list(dict.fromkeys(picks))[:PROBE_LIMIT]


def _first(configs: Sequence[Config], space: Any) -> Config | None:
    """The first of ``configs`` that is a point of ``space``."""
    return next((c for c in configs if _within(c, space)), None)


def _within(cfg: Config, space: Any) -> bool:
    """Whether ``cfg`` is a point of ``space`` (not where its constraint raises: a
    configuration no launch gets)."""
    try:
        return cfg in space
    except Exception:  # the user's constraint, raising for this point
        return False


def alike(a: Any, b: Any) -> bool:
    """Whether two values of an argument are alike for ``prune``: the same object; tensors
    with the same dtype, shape, strides and device (a view, or an output buffer, made afresh
    under each configuration); lists or tuples of one class whose items are
    alike; else values of one class that compare equal (a comparison that raises or gives
    no truth value: not alike)."""
    if a is b:
        return True
    if a.__class__ is not b.__class__:
        return False
    if is_tensor(a):  # prune reads what a tensor is, not what it holds: a fresh buffer too
        try:
            return bool(
                a.dtype == b.dtype
                and tuple(a.shape) == tuple(b.shape)
                and tuple(a.stride()) == tuple(b.stride())
                and a.device == b.device
            )
        except Exception:  # a tensor without storage (meta, fake): only itself is alike
            return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(alike(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except Exception:  # an == that raises or gives no truth value (an array): not alike
        return False
