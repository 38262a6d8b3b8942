"""``random``: uniform samples from the valid space until the budget (or space) runs out."""

from __future__ import annotations

from collections.abc import Sequence

from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.engine.search.base import BaseStrategy
from tunedsl.model.config import Config


class RandomSearch(BaseStrategy):
    name = "random"
    adaptive = False

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        seen = self.seen(history)
        count = self.room(history)
        return self.take(self.sample_new(space, seen, count), seen, count)
