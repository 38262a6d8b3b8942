"""``model``: a surrogate-guided search (as Helion's LFBO): learn which configurations are good.

1. Measure ``initial`` uniformly drawn configurations.
2. Fit a classifier of "in the top decile or not" over the axis features (``features`` of
   the space: log2 of tile sizes, values of ordered axes, positions of categorical ones) on
   everything measured so far; failed configurations are "not".
3. Score a pool of unmeasured candidates (random draws plus the neighbours of the best few)
   and propose the batch with the highest predicted chance of being good, plus a share of
   random ones from the pool (exploration). Measure, refit, repeat.
4. In the last ``polish`` share of the budget, climb from the best point (its unmeasured
   neighbours), as ``pattern`` does.

The classifier comes from an optional library (``pip install 'tunedsl[search]'``):
LightGBM by default, chosen by measurement against scikit-learn and XGBoost (BENCHMARKS.md,
"Search strategies: choosing the surrogate's library"): the same quality within seed noise,
the least CPU per refit (which a real search spends out of its budget), a 10 MB package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.engine.search.base import BaseStrategy, best_ok
from tunedsl.errors import UsageError
from tunedsl.model.config import Config

# Without a budget (no remaining_s), the model search stops after this many configurations.
DEFAULT_LIMIT = 100
BACKENDS = ("sklearn", "lightgbm", "xgboost")
DEFAULT_BACKEND = "lightgbm"
TREES = 32  # trees (boosting rounds) per fit: the data is at most a few hundred points


class Classifier(Protocol):
    def fit(self, x: list[list[float]], y: list[int]) -> Any: ...

    def predict_proba(self, x: list[list[float]]) -> Any: ...


def make_classifier(backend: str, seed: int) -> Classifier:
    """A fresh classifier of ``backend``; UsageError naming the extra when it is missing."""
    package = {"sklearn": "scikit-learn", "lightgbm": "lightgbm", "xgboost": "xgboost"}
    if backend not in package:
        raise UsageError(f"model backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    try:
        if backend == "sklearn":
            from sklearn.ensemble import ExtraTreesClassifier

            return ExtraTreesClassifier(  # type: ignore[no-any-return]
                n_estimators=TREES, min_samples_leaf=1, random_state=seed, n_jobs=1
            )
        if backend == "lightgbm":
            import lightgbm

            return lightgbm.LGBMClassifier(  # type: ignore[no-any-return]
                n_estimators=TREES, min_child_samples=2, random_state=seed, verbose=-1, n_jobs=1
            )
        import xgboost

        return xgboost.XGBClassifier(  # type: ignore[no-any-return]
            n_estimators=TREES, max_depth=4, random_state=seed, n_jobs=1, verbosity=0
        )
    except ImportError:
        raise UsageError(
            f"search='model' needs {package[backend]}, which is not installed: "
            "pip install 'tunedsl[search]' (or use search='pattern', which needs nothing)"
        ) from None


def model_available(backend: str = DEFAULT_BACKEND) -> bool:
    try:
        make_classifier(backend, 0)
    except Exception:  # not installed, or lightgbm without scikit-learn (LightGBMError)
        return False
    return True


class ModelSearch(BaseStrategy):
    name = "model"

    def __init__(
        self,
        seed: int = 0,
        batch: int = 8,
        limit: int | None = None,
        initial: int = 16,
        pool: int = 512,
        explore: float = 0.25,
        polish: float = 0.2,
        backend: str = DEFAULT_BACKEND,
    ) -> None:
        super().__init__(seed, batch, limit)
        self.initial = initial
        self.pool = pool
        self.explore = explore
        self.polish = polish
        self.backend = backend
        make_classifier(backend, seed)  # fail now, with the install hint, if missing
        self._budget0: float | None = None
        self.fits = 0

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        if remaining_s is None and self.limit is None:
            self.limit = DEFAULT_LIMIT
        if self._budget0 is None and remaining_s is not None:
            self._budget0 = remaining_s
        seen = self.seen(history)
        room = self.room(history)
        if room == 0:
            return []
        if len(history) < self.initial:
            want = min(room, self.initial - len(history))
            return self.take(self.sample_new(space, seen, want), seen, room)
        if self._polishing(history, remaining_s):
            best = best_ok(history)
            assert best is not None
            step = self.take(space.neighbours(best.config), seen, room)
            if step:
                return step
            if remaining_s is None:
                return []  # the best is a local optimum and there is no budget to explore
        return self._guided(space, history, seen, room)

    def _polishing(self, history: Sequence[Observation], remaining_s: float | None) -> bool:
        if remaining_s is not None and self._budget0:
            return remaining_s <= self.polish * self._budget0
        if self.limit is not None:
            return len(history) >= (1 - self.polish) * self.limit
        return False

    def _guided(
        self, space: SearchSpace, history: Sequence[Observation], seen: set[Config], room: int
    ) -> list[Config]:
        features = getattr(space, "features", None)
        if features is None:
            raise UsageError(
                f"search='model' needs a space with features(); {type(space).__name__} has none"
            )
        ok = sorted(
            (o for o in history if o.status == "ok" and o.median_ms is not None),
            key=lambda o: o.median_ms or 0.0,
        )
        cut = ok[max(0, math.ceil(0.1 * len(ok)) - 1)].median_ms or 0.0
        x = [features(o.config) for o in history]
        y = [int(o.status == "ok" and (o.median_ms or math.inf) <= cut) for o in history]
        pool = self.sample_new(space, seen, self.pool)
        near = [n for o in ok[:3] for n in space.neighbours(o.config) if n not in seen]
        pool = list(dict.fromkeys(near + pool))
        if not pool:
            return []
        if len(set(y)) < 2:  # one class only: nothing to learn yet
            return self.take(pool, seen, room)
        model = make_classifier(self.backend, self.seed + self.fits)
        model.fit(x, y)
        self.fits += 1
        chance = [float(p[1]) for p in model.predict_proba([features(c) for c in pool])]
        ranked = sorted(range(len(pool)), key=lambda i: -chance[i])  # stable: ties keep draw order
        n_explore = round(self.explore * room)
        exploit = [pool[i] for i in ranked[: room - n_explore]]
        rest = [pool[i] for i in ranked[room - n_explore :]]
        explore = self.rng.sample(rest, min(n_explore, len(rest)))
        return self.take(exploit + explore, seen, room)
