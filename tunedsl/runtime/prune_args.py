"""The ``args`` mapping a site's ``prune=`` is given (runtime layer): the call's arguments
whose value does not depend on the configuration (docs/runtime.md, "Spaces and
configurations").

A DSL site passes ``HOLE`` for an argument written with ``$``, and ``bind`` gives its value
per configuration: it is left out. A plain-API call whose ``args=`` is a function of the
configuration passes that function's values for the site's default configuration (its key
is computed from them), and ``bind(cfg)`` returns ``ReplaceArgs``, the values under ``cfg``:
a position whose value under some configuration is another (a tensor another object, a
number or string another value) is left out too, else ``prune`` would see the default's
``BLOCK_SIZE`` while it ranks every configuration. The function is evaluated under every
configuration of a listed space, and under ``FIXED_PROBE`` spread over a larger one (as a
``kwargs=`` function is, ``api.py``), once per new key, only for a site with ``prune=``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE, ReplaceArgs
from tunedsl.model.keys import is_tensor
from tunedsl.model.settings import MissingArgument, ReadRecorder, Settings

#: A space larger than LIST_LIMIT is sampled (this many points, spread over it) to learn
#: which values an ``args=`` or ``kwargs=`` function gives alike for every configuration; a
#: smaller one is listed.
FIXED_PROBE = 256


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
    function) whose value is another under some configuration probed, and the names of the
    keyword arguments ``bind`` gives per configuration. A configuration ``bind`` fails
    under tells nothing (its launch, if ``prune`` keeps it, names the failure)."""
    if settings.large:
        probe: Sequence[Config] = settings.space.sample(random.Random(0), FIXED_PROBE)
    else:
        probe = settings.configs
    varying: set[int] = set()
    dynamic: set[str] = set()
    for cfg in probe:
        try:
            holes, dyn, _ = bind(cfg)
        except Exception:  # the user's expression, raising under this configuration
            continue
        dynamic.update(dyn)
        if not isinstance(holes, ReplaceArgs):  # every position is the default's object
            continue
        varying.update(range(len(holes), len(args)))
        varying.update(
            i for i, (a, b) in enumerate(zip(args, holes, strict=False)) if not same(a, b)
        )
    return varying, dynamic


def _keywords(bind: Callable[[Config], Any], default: Config) -> set[str]:
    """The names of the keyword arguments ``bind`` gives under ``default`` (none where it
    fails there: the launch names the failure)."""
    try:
        return set(bind(default)[1])
    except Exception:  # the user's expression, raising under the default
        return set()


def same(a: Any, b: Any) -> bool:
    """Whether two values of an argument are the same for ``prune``: a tensor the same
    object, any other value of one class and equal (unhashable ones: the same object)."""
    if a is b:
        return True
    if is_tensor(a) or is_tensor(b) or a.__class__ is not b.__class__:
        return False
    try:
        hash(a)
        return bool(a == b)
    except Exception:  # unhashable, or an == that gives no truth value: not the same
        return False
