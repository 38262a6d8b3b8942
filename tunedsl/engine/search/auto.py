"""``auto`` (the default): exhaustive when the valid space is small, ``model`` above that.

"Small" is up to ``SMALL_VALID`` valid configurations (proposed as one batch), counted
lazily (a space of 10^7 points is never listed: the count stops at the threshold). The
model search's default surrogate (a Gaussian process) needs numpy only, a dependency of
tunedsl; were it missing, ``pattern`` (which needs nothing) would replace it. A model search
whose library is found but fails to load (a tree backend) goes on without it (neighbours of
the best first, then random draws) after one warning. Without ``batch=``, the model search's
batches are as many as compile in parallel (the driver's hint), pattern's 8.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from tunedsl.engine.seams import Observation, SearchSpace, SearchStrategy
from tunedsl.engine.search.exhaustive import Exhaustive
from tunedsl.engine.search.model import ModelSearch, model_available
from tunedsl.engine.search.pattern import PatternSearch
from tunedsl.model.config import Config

SMALL_VALID = 256
# Spaces whose product is larger than this are not counted at all: they are large.
_COUNT_LIMIT = 16 * SMALL_VALID


class AutoSearch:
    name = "auto"

    def __init__(self, seed: int = 0, batch: int | None = None, limit: int | None = None) -> None:
        self.seed = seed
        self.batch = batch  # None: the model search fills the compile workers, pattern 8
        self.limit = limit
        self.inner: SearchStrategy | None = None
        self._hint: dict[str, Any] = {}

    @property
    def adaptive(self) -> bool:
        return getattr(self.inner, "adaptive", True)

    @property
    def resolved(self) -> str:
        """``auto:<strategy>`` once the first batch was proposed."""
        return f"auto:{self.inner.name}" if self.inner is not None else "auto"

    def choose(self, space: SearchSpace) -> SearchStrategy:
        small = space.size_hint() <= _COUNT_LIMIT and (
            sum(1 for _ in itertools.islice(space.iter_valid(), SMALL_VALID + 1)) <= SMALL_VALID
        )
        if small:
            # One batch: every configuration compiles in one stream (no thread idles between
            # batches) and runs in one race, whose leader is known soonest.
            return Exhaustive(self.seed, SMALL_VALID, self.limit)
        if model_available():
            return ModelSearch(self.seed, self.batch, self.limit)
        return PatternSearch(self.seed, self.batch or 8, self.limit)

    def hint(self, **hints: Any) -> None:
        """The driver's hints, passed on to the strategy chosen (see ``run_search``)."""
        self._hint = hints

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        if self.inner is None:
            self.inner = self.choose(space)
        tell = getattr(self.inner, "hint", None)
        if tell is not None and self._hint:
            tell(**self._hint)
        return self.inner.propose(space, history, remaining_s)
