"""``model``: a surrogate-guided search: learn where the fast configurations are.

1. Measure one batch (``initial``, the batch size by default) of uniformly drawn
   configurations. The batch (``batch=None``) is as many as compile in parallel, the
   driver's ``compile_workers`` hint, within 8 and 32: a batch waits for one compile time
   however many of the workers it keeps busy, so 8 on the H100's 16 threads wasted half.
2. Fit a surrogate of log time over the axis features (``features`` of the space: log2 of
   tile sizes, values of ordered axes, positions of categorical ones; each scaled to [0, 1])
   on everything measured so far; a failed configuration counts as slower than the slowest.
   The surrogate is a Gaussian process (Matern 5/2 kernel, its length
   scale and noise chosen by marginal likelihood from a small grid), written on numpy alone:
   no optional library; about 10 ms per fit on 100 points (2 CPU cores), 50 ms for a
   whole batch's proposal (pool, fit, eight picks).
3. Score a pool of unmeasured candidates (everything within two steps of the best five, plus
   ``pool`` random draws) by expected improvement (EI) over the best measured time, and
   propose a batch of two parts: ``local`` (half) taken by EI among the unmeasured
   neighbours of the best (a model-guided climb), the rest by EI over the whole pool. The
   batch is chosen one at a time, each pick added to the model as if it had measured its
   prediction (a "kriging believer"), so the batch spreads out instead of piling onto one
   spot. Measure, refit, repeat.
4. Stop proposing when the next batch cannot finish before the driver's reserve for its
   final race (its ``reserve_s`` hint; without one, ``reserve``, 10% of the budget): the
   duration of a batch is learnt from how much budget the previous ones took. A batch
   started too late is not measured (its compiles finish after the loop stopped) and its
   compiles eat the time of the final race, which then compares the leaders on 3
   repetitions each.
5. In the last ``polish`` share of the budget, climb from the best point (its unmeasured
   neighbours), as ``pattern`` does.

Why this shape (``benchmarks/bench_search_replay.py`` replays the strategies against the H100
tables of every configuration): a batch of 8 compiles in about the time of one compile, so the
budgets (0.1x of an exhaustive call) buy 3 to 8 batches. The Gaussian process's uncertainty
lets EI look beyond the best's neighbours where the model is unsure, where a tree regressor
ranking only the neighbours stopped at local optima one or two steps away; stopping in time
leaves the final race its time. BENCHMARKS.md, "Search at scale", has the figures.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.engine.search.base import BaseStrategy, best_ok
from tunedsl.errors import UsageError
from tunedsl.model.config import Config

# Without a budget (no remaining_s), the model search stops after this many configurations.
DEFAULT_LIMIT = 100
# The batch when the driver gives no hint; with one, as many as compile in parallel, within
# these (a batch's picks refit the Gaussian process once each).
DEFAULT_BATCH = MIN_BATCH = 8
MAX_BATCH = 32
Features = Callable[[Config], list[float]]
# The Gaussian process's grid of length scales (features scaled to [0, 1]) and noise
# variances (of the standardized log time), chosen from by marginal likelihood at each fit.
GP_SCALES = (0.15, 0.25, 0.4, 0.6, 1.0, 1.6)
GP_NOISES = (1e-3, 1e-2, 5e-2, 0.2)
TOP_CENTRES = 5  # the pool holds everything within two steps of this many best points
FAILED_LOG = 0.5  # a failed configuration: this much slower (log time) than the slowest


def model_available() -> bool:
    """Whether the Gaussian process can run: it needs numpy, which Triton's interpreter needs
    too but the core of tunedsl does not."""
    return importlib.util.find_spec("numpy") is not None


class GaussianProcess:
    """A Gaussian process regressor on numpy alone (Matern 5/2 kernel, one length scale).

    ``fit`` standardizes ``y`` and picks the length scale and noise of the grid
    (``GP_SCALES`` x ``GP_NOISES``) with the highest log marginal likelihood; ``believe``
    adds points with the given values keeping them (the "kriging believer" of a batch).
    """

    def __init__(self) -> None:
        self.scale = 0.0
        self.noise = 0.0

    def fit(
        self,
        x: Any,
        y: Any,
        scales: Sequence[float] = GP_SCALES,
        noises: Sequence[float] = GP_NOISES,
    ) -> GaussianProcess:
        import numpy as np

        self.x = np.asarray(x, dtype=float)
        self.y = np.asarray(y, dtype=float)
        self.mean = float(self.y.mean())
        self.std = float(self.y.std()) or 1.0
        z = (self.y - self.mean) / self.std
        eye = np.eye(len(z))
        best: tuple[float, float, float, Any, Any] | None = None
        for scale in scales:
            k = _matern52(self.x, self.x, scale)
            for noise in noises:
                try:
                    chol = np.linalg.cholesky(k + noise * eye)
                except np.linalg.LinAlgError:
                    continue
                alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, z))
                lml = float(-0.5 * z @ alpha - np.log(np.diag(chol)).sum())
                if best is None or lml > best[0]:
                    best = (lml, scale, noise, chol, alpha)
        if best is None:  # not reachable with a positive noise; kept for safety
            raise ValueError("GaussianProcess: no kernel of the grid could be factorized")
        _, self.scale, self.noise, self.chol, self.alpha = best
        return self

    def believe(self, x: Any, y: Any) -> GaussianProcess:
        """This process with the points ``x`` measured as ``y`` (same kernel, refactorized)."""
        import numpy as np

        grown = GaussianProcess()
        return grown.fit(np.vstack([self.x, x]), np.append(self.y, y), (self.scale,), (self.noise,))

    def predict(self, x: Any) -> tuple[Any, Any]:
        """Mean and standard deviation at the points ``x``."""
        import numpy as np

        cross = _matern52(np.asarray(x, dtype=float), self.x, self.scale)
        mu = cross @ self.alpha
        v = np.linalg.solve(self.chol, cross.T)
        var = np.maximum(1.0 - (v * v).sum(axis=0), 1e-12)
        return mu * self.std + self.mean, np.sqrt(var) * self.std


def _matern52(a: Any, b: Any, scale: float) -> Any:
    import numpy as np

    d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1), 0.0)) / scale
    r = math.sqrt(5.0) * d
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


def expected_improvement(best: float, mu: Any, sd: Any) -> Any:
    """Expected improvement below ``best`` (minimizing) of normal predictions."""
    import numpy as np

    sd = np.maximum(sd, 1e-12)
    z = (best - mu) / sd
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mu) * cdf + sd * pdf


def _within_two_steps(space: SearchSpace, centres: Sequence[Config]) -> list[Config]:
    """The neighbours of ``centres`` and their neighbours (centres excluded), in order."""
    first = list(dict.fromkeys(n for c in centres for n in space.neighbours(c)))
    second = (n for c in first for n in space.neighbours(c))
    out = dict.fromkeys([*first, *second])
    for c in centres:
        out.pop(c, None)
    return list(out)


class ModelSearch(BaseStrategy):
    name = "model"

    def __init__(
        self,
        seed: int = 0,
        batch: int | None = None,
        limit: int | None = None,
        initial: int | None = None,
        pool: int = 512,
        polish: float = 0.2,
        local: float = 0.5,
        reserve: float = 0.1,
    ) -> None:
        super().__init__(seed, DEFAULT_BATCH if batch is None else batch, limit)
        # None: as many as compile in parallel (the driver's hint), within MIN/MAX_BATCH.
        self._fill = batch is None
        if not (0 <= local <= 1 and 0 <= polish < 1 and 0 <= reserve < 1):
            raise ValueError(
                f"ModelSearch: local ({local}) must be in [0, 1], "
                f"polish ({polish}) and reserve ({reserve}) in [0, 1)"
            )
        if not model_available():
            raise UsageError("search='model' needs numpy, which is missing: pip install numpy")
        self._initial = initial  # None: one batch (see the ``initial`` property)
        self.pool = pool
        self.polish = polish
        self.local = local
        # The driver's share of the budget kept for the final race (run_search's reserve).
        self.reserve = reserve
        self.reserve_s: float | None = None  # the driver's, in seconds (hint), once told
        self._budget0: float | None = None
        self._last_remaining: float | None = None
        self.batch_s: list[float] = []  # budget each batch took (proposal to proposal)
        self.fits = 0

    def hint(self, compile_workers: int | None = None, reserve_s: float | None = None) -> None:
        """The driver's, before each batch: how many configurations compile in parallel (a
        batch of 8 on the H100's 16 compile threads left half of them idle for the same
        wait) and the seconds it keeps for the final race."""
        if compile_workers and self._fill and not self.proposed:  # fixed from the first
            self.batch = max(MIN_BATCH, min(MAX_BATCH, compile_workers))
        self.reserve_s = reserve_s

    @property
    def initial(self) -> int:
        """Configurations drawn uniformly before the first fit: ``initial=``, else a batch."""
        return self.batch if self._initial is None else self._initial

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        if remaining_s is None and self.limit is None:
            self.limit = DEFAULT_LIMIT
        if self._budget0 is None and remaining_s is not None:
            self._budget0 = remaining_s
        if self._too_late(remaining_s):
            return []
        seen = self.seen(history)
        room = self.room(history)
        if room == 0:
            return []
        if len(history) < self.initial:
            want = min(room, self.initial - len(history))
            return self.take(self.sample_new(space, seen, want), seen, room)
        best = best_ok(history)
        if best is not None and self._polishing(history, remaining_s):
            step = self.take(space.neighbours(best.config), seen, room)
            if step:
                return step
            if remaining_s is None:
                return []  # the best is a local optimum and there is no budget to explore
        return self._guided(space, history, seen, room)

    def _too_late(self, remaining_s: float | None) -> bool:
        """Whether the next batch would end after the driver stops racing (``reserve`` of
        the budget left): a batch is expected to take as long as the longest of the last
        three (a batch's time is mostly its compiles, about the same from batch to batch)."""
        if remaining_s is None or self._budget0 is None:
            return False
        if self._last_remaining is not None:
            self.batch_s.append(max(0.0, self._last_remaining - remaining_s))
        self._last_remaining = remaining_s
        if not self.batch_s:
            return False
        keep = self.reserve * self._budget0 if self.reserve_s is None else self.reserve_s
        return remaining_s - keep < max(self.batch_s[-3:])

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
        return self._guided_gp(space, history, ok, seen, room, features)

    def _guided_gp(
        self,
        space: SearchSpace,
        history: Sequence[Observation],
        ok: list[Observation],
        seen: set[Config],
        room: int,
        features: Features,
    ) -> list[Config]:
        """Steps 2 and 3 of the module."""
        import numpy as np

        centres = [o.config for o in ok[:TOP_CENTRES]]
        near = [n for n in _within_two_steps(space, centres) if n not in seen]
        pool = list(dict.fromkeys(near + self.sample_new(space, seen, self.pool)))
        if not pool:
            return []
        worst = math.log(ok[-1].median_ms or 1.0) + FAILED_LOG if ok else 0.0
        y = [math.log(o.median_ms) if o.status == "ok" and o.median_ms else worst for o in history]
        if not ok or len(set(y)) < 2:
            return self.take(pool, seen, room)  # nothing to learn yet: near the best, draws
        raw = np.array([features(o.config) for o in history] + [features(c) for c in pool])
        low, span = raw.min(axis=0), np.ptp(raw, axis=0)
        scaled = (raw - low) / np.where(span > 0, span, 1.0)
        x, candidates = scaled[: len(history)], scaled[len(history) :]
        model = GaussianProcess().fit(x, y)
        self.fits += 1
        around = set(space.neighbours(ok[0].config))
        is_near = np.array([c in around for c in pool])
        free = np.ones(len(pool), dtype=bool)
        n_local = round(self.local * room)
        best_y = min(y)
        picked: list[Config] = []
        while len(picked) < room and free.any():
            mu, sd = model.predict(candidates)
            score = np.where(free, expected_improvement(best_y, mu, sd), -np.inf)
            if len(picked) < n_local and (free & is_near).any():
                score = np.where(is_near, score, -np.inf)  # the climb: the best's neighbours
            i = int(np.argmax(score))  # the first of equals: deterministic
            picked.append(pool[i])
            free[i] = False
            if len(picked) < room:
                model = model.believe(candidates[i : i + 1], mu[i : i + 1])
        return self.take(picked, seen, room)
