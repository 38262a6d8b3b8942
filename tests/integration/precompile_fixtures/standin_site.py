"""A small stand-in for the runtime's site, used until (and besides) the real one.

It implements the interface ``PrecompileSite`` relies on: ``variants(kernel, args, kwargs,
bind, key, lazy) -> (key_tuple, [Variant])`` with the expansion contract's ``bind``.
Calling it (outside precompile mode) launches the first configuration.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any, NamedTuple

HINTS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


class Variant(NamedTuple):
    config: Any
    args: tuple
    kwargs: dict
    grid: tuple
    options: dict


class StandInSite:
    def __init__(self, space: dict[str, list[Any]], label: str) -> None:
        self.space = space
        self.label = label

    def configs(self) -> list[SimpleNamespace]:
        names = list(self.space)
        return [
            SimpleNamespace(**dict(zip(names, values, strict=True)))
            for values in itertools.product(*(self.space[n] for n in names))
        ]

    def variants(self, kernel, args, kwargs, bind, key, lazy):
        out = []
        for cfg in self.configs():
            _holes, dyn_kwargs, grid = bind(cfg)
            options = {h: getattr(cfg, h) for h in HINTS if hasattr(cfg, h)}
            out.append(Variant(cfg, tuple(args), {**kwargs, **dyn_kwargs}, grid, options))
        return (key,), out

    def __call__(self, kernel, args, kwargs, bind, key, lazy):
        variant = self.variants(kernel, args, kwargs, bind, key, lazy)[1][0]
        kernel[variant.grid](*variant.args, **variant.kwargs, **variant.options)
        return variant.config
