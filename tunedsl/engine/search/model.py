"""``model``: a surrogate-guided search: learn where the fast configurations are.

1. Measure one batch (``initial``, the batch size by default) of uniformly drawn
   configurations. The batch (``batch=None``) is as many as compile in parallel, the
   driver's ``compile_workers`` hint, within 8 and 32: a batch waits for one compile time
   however many of the workers it keeps busy, so 8 on the H100's 16 threads wasted half.
2. Fit a surrogate of log time over the axis features (``features`` of the space: log2 of
   tile sizes, values of ordered axes, positions of categorical ones; each scaled to [0, 1])
   on everything measured so far; a failed configuration counts as slower than the slowest.
   By default (``backend="gp"``) it is a Gaussian process (Matern 5/2 kernel, its length
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

Why this shape (``benchmarks/bench_search_replay.py``, which replays the strategies against
the H100 tables of every configuration; 20 seeds, 1.5% noise, compiles as on 16 threads): a
batch of 8 compiles in about the time of one compile, so the budgets (0.1x of an exhaustive
call) buy 3 to 8 batches. The previous version (a LightGBM regressor ranking the neighbours
of the best, three quarters of each batch) chose a configuration within 2% of the best in
59 of 80 runs over the four families; its misses were mostly climbs stopped at a local
optimum one or two steps away, and on the square matmul a final race starved by an
overrunning batch. The Gaussian process's uncertainty lets EI look beyond the best's
neighbours where the model is unsure, and stopping in time leaves the final race its time:
59 of 80 became 64 of 80 (square 18/20, skinny 19/20, softmax 12/20, split-K 15/20). The
softmax, with three batches in its 5 s, is the one family where it does worse (15/20
before, though partly by a fourth batch whose compiles ran past the budget). Batches that
fill the 16 compile threads, and a final-race reserve of what the race can take instead of
10% of the budget, took the held-out seeds (100-119, 200-219; noise 1.5% and 3%) from
234 of 320 to 297 of 320: square 80/80, skinny 79/80, softmax 61/80, split-K 77/80.

The tree backends (``backend="lightgbm"``, ``"sklearn"``, ``"xgboost"``: ``pip install
'tunedsl[search]'``) keep the previous steps 2 and 3: a regressor of log time
(``target="time"``) or a classifier of "in the top decile or not" (``target="top"``, the
first version's, which needs a tree backend), scoring the neighbours of the best few and
random draws; ``local`` (three quarters) of each batch are the best-scored neighbours of the
best, one in eight drawn at random (``explore``). LightGBM was chosen among them by
measurement (BENCHMARKS.md, "Search strategies: choosing the surrogate's library"). Its
import (about a second, paid out of the budget) runs on a background thread while the
opening batch compiles and is measured; the first fit waits for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.engine.compile_pool import start_drained_thread
from tunedsl.engine.seams import Observation, SearchSpace
from tunedsl.engine.search.base import BaseStrategy, best_ok
from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.warn import warn_once

# Without a budget (no remaining_s), the model search stops after this many configurations.
DEFAULT_LIMIT = 100
# The batch when the driver gives no hint; with one, as many as compile in parallel, within
# these (a batch's picks refit the Gaussian process once each).
DEFAULT_BATCH = MIN_BATCH = 8
MAX_BATCH = 32
BACKENDS = ("gp", "sklearn", "lightgbm", "xgboost")
DEFAULT_BACKEND = "gp"  # numpy only (a tunedsl dependency); the others are tree models
TREE_BACKEND = "lightgbm"  # the tree backend of target="top" when none is named
TARGETS = ("time", "top")
TREES = 32  # trees (boosting rounds) per fit: the data is at most a few hundred points
# The packages each backend imports (LightGBM's scikit-learn API needs scikit-learn too).
_PACKAGES = {
    "gp": ("numpy",),
    "sklearn": ("sklearn",),
    "lightgbm": ("lightgbm", "sklearn"),
    "xgboost": ("xgboost",),
}
Features = Callable[[Config], list[float]]
_PIP = {"sklearn": "scikit-learn", "lightgbm": "lightgbm", "xgboost": "xgboost"}
# The Gaussian process's grid of length scales (features scaled to [0, 1]) and noise
# variances (of the standardized log time), chosen from by marginal likelihood at each fit.
GP_SCALES = (0.15, 0.25, 0.4, 0.6, 1.0, 1.6)
GP_NOISES = (1e-3, 1e-2, 5e-2, 0.2)
TOP_CENTRES = 5  # the pool holds everything within two steps of this many best points
FAILED_LOG = 0.5  # a failed configuration: this much slower (log time) than the slowest


def make_model(backend: str, seed: int, target: str = "time") -> Any:
    """A fresh regressor (``target="time"``) or classifier (``"top"``) of ``backend``;
    UsageError naming the extra when its library is missing."""
    if backend not in _PIP:
        if backend == "gp":
            raise UsageError("the 'gp' backend is not a tree model: make_model builds trees only")
        raise UsageError(f"model backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if target not in TARGETS:
        raise UsageError(f"model target {target!r}: expected one of {', '.join(TARGETS)}")
    regress = target == "time"
    try:
        if backend == "sklearn":
            from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

            cls: Any = ExtraTreesRegressor if regress else ExtraTreesClassifier
            return cls(n_estimators=TREES, min_samples_leaf=1, random_state=seed, n_jobs=1)
        if backend == "lightgbm":
            import lightgbm

            cls = lightgbm.LGBMRegressor if regress else lightgbm.LGBMClassifier
            return cls(
                n_estimators=TREES, min_child_samples=2, random_state=seed, verbose=-1, n_jobs=1
            )
        import xgboost

        cls = xgboost.XGBRegressor if regress else xgboost.XGBClassifier
        return cls(n_estimators=TREES, max_depth=4, random_state=seed, n_jobs=1, verbosity=0)
    except ImportError:
        raise UsageError(
            f"search='model' needs {_PIP[backend]}, which is not installed: "
            "pip install 'tunedsl[search]' (or use search='pattern', which needs nothing)"
        ) from None
    except Exception as err:  # installed but broken: a missing libgomp is an OSError
        raise UsageError(
            f"search='model' could not load {_PIP[backend]} ({type(err).__name__}: {err}); "
            "reinstall it (pip install 'tunedsl[search]') or use search='pattern'"
        ) from None


def _installed(backend: str) -> bool:
    """Whether ``backend``'s packages can be found (without importing them: that takes a
    second, which ``ModelSearch`` spends on a background thread instead)."""
    for name in _PACKAGES.get(backend, ()):
        if name in sys.modules:
            if sys.modules[name] is None:  # what a blocked (absent) package looks like
                return False
            continue
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):
            return False
    return backend in _PACKAGES


def model_available(backend: str = DEFAULT_BACKEND) -> bool:
    return _installed(backend)


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


def _import_quietly(backend: str) -> None:
    # A failure here surfaces at the first fit, through make_model's UsageError.
    for name in _PACKAGES[backend]:
        try:
            importlib.import_module(name)
        except Exception:
            return


class ModelSearch(BaseStrategy):
    name = "model"

    def __init__(
        self,
        seed: int = 0,
        batch: int | None = None,
        limit: int | None = None,
        initial: int | None = None,
        pool: int = 512,
        explore: float = 0.125,
        polish: float = 0.2,
        local: float | None = None,
        target: str = "time",
        backend: str | None = None,
        fallback: bool = False,
        reserve: float = 0.1,
    ) -> None:
        super().__init__(seed, DEFAULT_BATCH if batch is None else batch, limit)
        # None: as many as compile in parallel (the driver's hint), within MIN/MAX_BATCH.
        self._fill = batch is None
        if target not in TARGETS:
            raise UsageError(f"model target {target!r}: expected one of {', '.join(TARGETS)}")
        if backend is None:
            backend = DEFAULT_BACKEND if target == "time" else TREE_BACKEND
        if backend not in BACKENDS:
            raise UsageError(f"model backend {backend!r}: expected one of {', '.join(BACKENDS)}")
        if backend == "gp" and target != "time":
            raise UsageError(
                f"model target {target!r} needs a tree backend "
                f"({', '.join(b for b in BACKENDS if b != 'gp')}), not 'gp'"
            )
        if local is None:
            local = 0.5 if backend == "gp" else 0.75
        if not (0 <= explore <= 1 and 0 <= local <= 1 and 0 <= polish < 1 and 0 <= reserve < 1):
            raise ValueError(
                f"ModelSearch: explore ({explore}) and local ({local}) must be in [0, 1], "
                f"polish ({polish}) and reserve ({reserve}) in [0, 1)"
            )
        self._initial = initial  # None: one batch (see the ``initial`` property)
        self.pool = pool
        self.explore = explore
        self.polish = polish
        self.local = local
        self.target = target
        self.backend = backend
        # The driver's share of the budget kept for the final race (run_search's reserve).
        self.reserve = reserve
        self.reserve_s: float | None = None  # the driver's, in seconds (hint), once told
        # ``auto``'s: when the library is found but fails to load, climb without the model
        # (one warning) instead of failing the tuning.
        self.fallback = fallback
        self._unusable = False
        if not _installed(backend):
            if backend == "gp":
                raise UsageError("search='model' (backend 'gp') needs numpy, which is missing")
            make_model(backend, seed, target)  # the UsageError with the install hint
        self._importing: threading.Thread | None = None
        if any(name not in sys.modules for name in _PACKAGES[backend]):
            # Joined at exit: an interpreter finalizing under an import of a compiled
            # library can abort the process.
            self._importing = start_drained_thread(
                _import_quietly, backend, name="tunedsl-model-import"
            )
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

    def _fit(
        self, history: Sequence[Observation], ok: list[Observation], features: Features
    ) -> Any | None:
        """The surrogate fitted on ``history`` (None when there is nothing to learn yet)."""
        x = [features(o.config) for o in history]
        if self.target == "time":
            # Failed configurations: slower than the slowest (log time, so ratios count).
            worst = math.log(ok[-1].median_ms or 1.0) + 1.0 if ok else 0.0
            y: list[Any] = [
                math.log(o.median_ms) if o.status == "ok" and o.median_ms else worst
                for o in history
            ]
        else:
            cut = ok[max(0, math.ceil(0.1 * len(ok)) - 1)].median_ms or 0.0 if ok else 0.0
            y = [int(o.status == "ok" and (o.median_ms or math.inf) <= cut) for o in history]
        if len(set(y)) < 2 or self._unusable:
            return None  # one value (or one class) only, or no library
        if self._importing is not None:
            self._importing.join()  # the library's import, started with the search
            self._importing = None
        try:
            model = make_model(self.backend, self.seed + self.fits, self.target)
        except UsageError as err:
            if not self.fallback:
                raise
            warn_once(
                f"search-model:{self.backend}", f"{err}; searching without the model", UserWarning
            )
            self._unusable = True
            return None
        model.fit(x, y)
        self.fits += 1
        return model

    def _score(self, model: Any, configs: list[Config], features: Features) -> list[float]:
        """Higher is better: minus the predicted log time, or the chance of the top decile."""
        x = [features(c) for c in configs]
        if self.target == "time":
            return [-float(v) for v in model.predict(x)]
        return [float(p[1]) for p in model.predict_proba(x)]

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
        if self.backend == "gp":
            return self._guided_gp(space, history, ok, seen, room, features)
        return self._guided_trees(space, history, ok, seen, room, features)

    def _guided_gp(
        self,
        space: SearchSpace,
        history: Sequence[Observation],
        ok: list[Observation],
        seen: set[Config],
        room: int,
        features: Features,
    ) -> list[Config]:
        """Steps 2 and 3 of the module with the Gaussian process."""
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

    def _guided_trees(
        self,
        space: SearchSpace,
        history: Sequence[Observation],
        ok: list[Observation],
        seen: set[Config],
        room: int,
        features: Features,
    ) -> list[Config]:
        """Steps 2 and 3 of the module with a tree model (the previous version)."""
        pool = self.sample_new(space, seen, self.pool)
        near = [n for o in ok[:3] for n in space.neighbours(o.config) if n not in seen]
        pool = list(dict.fromkeys(near + pool))
        if not pool:
            return []
        model = self._fit(history, ok, features)
        if model is None:
            return self.take(pool, seen, room)  # neighbours of the best first, then draws
        score = self._score(model, pool, features)
        ranked = [pool[i] for i in sorted(range(len(pool)), key=lambda i: -score[i])]  # stable
        # A model-guided climb: the best-scored unmeasured neighbours of the best.
        around = set(space.neighbours(ok[0].config)) if ok else set()
        local = [c for c in ranked if c in around][: round(self.local * room)]
        ranked = [c for c in ranked if c not in set(local)]
        n_explore = min(round(self.explore * room), room - len(local))
        n_exploit = room - len(local) - n_explore
        rest = ranked[n_exploit:]
        explore = self.rng.sample(rest, min(n_explore, len(rest)))
        return self.take(local + ranked[:n_exploit] + explore, seen, room)
