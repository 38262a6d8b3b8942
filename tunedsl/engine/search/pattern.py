"""``pattern``: local search (hill climbing) over the axes, with random restarts.

A climb starts from the best of ``starts`` random configurations, then measures the unmeasured
neighbours of its best point (one step up or down each ordered axis, another value of a
categorical one) until none is better: a local optimum. Then it restarts from a fresh random
start, until the budget or the space runs out.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.engine.search.base import BaseStrategy, best_ok
from tunedsl.model.config import Config


class PatternSearch(BaseStrategy):
    name = "pattern"

    def __init__(
        self, seed: int = 0, batch: int = 8, limit: int | None = None, starts: int = 8
    ) -> None:
        super().__init__(seed, batch, limit)
        self.starts = starts
        self.climb: set[Config] = set()  # the configurations of the current climb
        self.optima: list[Config] = []  # local optima found so far

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        seen = self.seen(history)
        room = self.room(history)
        if room == 0:
            return []
        if not self.climb:
            # The first climb starts from what a stored search already measured, if anything.
            start = best_ok(history)
            if start is not None and not self.optima:
                self.climb = {start.config}
            else:
                return self._restart(space, seen, room)
        centre = best_ok(history, self.climb)
        if centre is None:  # every configuration of this climb failed
            return self._restart(space, seen, room)
        step = self.take(space.neighbours(centre.config), seen, room)
        if step:
            self.climb.update(step)
            return step
        self.optima.append(centre.config)
        return self._restart(space, seen, room)

    def _restart(self, space: SearchSpace, seen: set[Config], room: int) -> list[Config]:
        start = self.take(self.sample_new(space, seen, min(self.starts, room)), seen, room)
        self.climb = set(start)
        return start
