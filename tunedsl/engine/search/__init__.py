"""Search strategies by name (``search=``, ``TUNEDSL_SEARCH``), each a ``SearchStrategy``.

- ``exhaustive``: every valid configuration (racing keeps it cheap);
- ``random``: uniform draws from the valid space;
- ``pattern``: hill climbing over the axes with random restarts;
- ``model``: surrogate-guided (a Gaussian process on numpy);
- ``auto``: exhaustive on small spaces, model (or pattern) on large ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tunedsl.engine.seams import SearchStrategy
from tunedsl.engine.search.auto import AutoSearch
from tunedsl.engine.search.exhaustive import Exhaustive
from tunedsl.engine.search.model import ModelSearch
from tunedsl.engine.search.pattern import PatternSearch
from tunedsl.engine.search.random import RandomSearch
from tunedsl.errors import UsageError

STRATEGIES: dict[str, Callable[..., SearchStrategy]] = {
    "auto": AutoSearch,
    "exhaustive": Exhaustive,
    "random": RandomSearch,
    "pattern": PatternSearch,
    "model": ModelSearch,
}


def make_strategy(name: str, seed: int = 0, **options: Any) -> SearchStrategy:
    """A fresh strategy by name, deterministic given ``seed``."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise UsageError(f"search={name!r}: expected one of {', '.join(STRATEGIES)}") from None
    strategy: SearchStrategy = cls(seed=seed, **options)
    return strategy


__all__ = [
    "STRATEGIES",
    "AutoSearch",
    "Exhaustive",
    "ModelSearch",
    "PatternSearch",
    "RandomSearch",
    "make_strategy",
]
