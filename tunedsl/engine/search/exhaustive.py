"""``exhaustive``: every valid configuration, in space order (racing makes it cheap)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.engine.search.base import BaseStrategy
from tunedsl.model.config import Config


class Exhaustive(BaseStrategy):
    name = "exhaustive"
    adaptive = False

    def __init__(self, seed: int = 0, batch: int = 16, limit: int | None = None) -> None:
        super().__init__(seed, batch, limit)
        self._it: Iterator[Config] | None = None

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        if self._it is None:
            self._it = space.iter_valid()
        return self.take(self._it, self.seen(history), self.room(history))
