"""What every search strategy shares: its seeded RNG, what it proposed, and small helpers.

A strategy is asked for batches (``propose``) and told what happened through the history the
driver passes back; it never proposes a configuration twice, nor one the history already
holds (measured, failed or rejected: in this run or a stored one).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.model.config import Config

# Spaces up to this size are drawn from whole when looking for unmeasured points.
_SMALL = 4096


class BaseStrategy:
    """Seeded, remembers what it proposed; subclasses implement ``propose``."""

    name = "base"
    #: False when the next batch does not depend on the current one's results, so the
    #: driver may compile it while the current batch is measured.
    adaptive = True

    def __init__(self, seed: int = 0, batch: int = 8, limit: int | None = None) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        self.seed = seed
        self.rng = random.Random(seed)
        self.batch = batch
        self.limit = limit  # at most this many configurations measured (None: no cap)
        self.proposed: set[Config] = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, batch={self.batch})"

    def seen(self, history: Sequence[Observation]) -> set[Config]:
        return self.proposed | {o.config for o in history}

    def room(self, history: Sequence[Observation]) -> int:
        """How many more the ``limit`` allows (the batch size when there is no limit)."""
        if self.limit is None:
            return self.batch
        return max(0, min(self.batch, self.limit - len(self.seen(history))))

    def take(self, configs: Iterable[Config], seen: set[Config], count: int) -> list[Config]:
        """The first ``count`` of ``configs`` not seen, marked as proposed."""
        out: list[Config] = []
        if count <= 0:
            return out
        for cfg in configs:  # an iterator is consumed only as far as needed
            if cfg not in seen:
                seen.add(cfg)
                out.append(cfg)
                if len(out) >= count:
                    break
        self.proposed.update(out)
        return out

    def sample_new(self, space: SearchSpace, seen: set[Config], count: int) -> list[Config]:
        """Up to ``count`` uniformly drawn valid configurations not seen (not yet marked)."""
        if count <= 0:
            return []
        size = space.size_hint()
        if size <= _SMALL:
            pool = space.sample(self.rng, size)  # the whole (small) valid space, shuffled
            return [c for c in pool if c not in seen][:count]
        out: dict[Config, None] = {}
        for _ in range(4):  # collisions with seen points are rare in a large space
            drawn = space.sample(self.rng, 2 * count)
            for cfg in drawn:
                if cfg not in seen:
                    out[cfg] = None
            if len(out) >= count or len(drawn) < 2 * count:
                break  # enough, or valid points so rare that the draws ran out: no retry
        return list(out)[:count]


def best_ok(history: Sequence[Observation], among: set[Config] | None = None) -> Observation | None:
    """The fastest successful observation (restricted to ``among`` when given)."""
    ok = [
        o
        for o in history
        if o.status == "ok" and o.median_ms is not None and (among is None or o.config in among)
    ]
    return min(ok, key=lambda o: o.median_ms or 0.0) if ok else None
