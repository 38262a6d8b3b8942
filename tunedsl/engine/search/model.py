"""``model``: a surrogate-guided search (as Helion's LFBO): learn which configurations are good.

1. Measure one batch (``initial``, the batch size by default) of uniformly drawn
   configurations.
2. Fit a surrogate over the axis features (``features`` of the space: log2 of tile sizes,
   values of ordered axes, positions of categorical ones) on everything measured so far:
   by default a regressor of log time (``target="time"``; a failed configuration counts as
   slower than the slowest), or a classifier of "in the top decile or not"
   (``target="top"``, the first version's).
3. Score a pool of unmeasured candidates (random draws plus the neighbours of the best few)
   and propose a batch of three parts: the best-scored unmeasured neighbours of the best
   configuration (``local``, three quarters: a model-guided climb), the best-scored of the
   rest of the pool, and one in eight drawn at random from what is left (``explore``).
   Measure, refit, repeat.
4. In the last ``polish`` share of the budget, climb from the best point (its unmeasured
   neighbours), as ``pattern`` does.

Why this shape (``benchmarks/bench_search_replay.py``, which replays the strategies against
the H100 tables of every configuration): a 5 s budget on the 600-configuration softmax buys
three or four batches of 8. The first version opened with 16 random configurations (two
batches), so it had one guided batch before polishing, and its "top decile" classifier had
one or two positives to learn from: it chose 5.6% from the best on average (the H100 runs:
5.2% and 6.7%). A regressor learns from every timing, and the climb along the best's
neighbours, ranked by the model, is what ``pattern`` does well on such landscapes.

The model comes from an optional library (``pip install 'tunedsl[search]'``): LightGBM by
default, chosen by measurement against scikit-learn and XGBoost (BENCHMARKS.md, "Search
strategies: choosing the surrogate's library"): the same quality within seed noise, the
least CPU per refit (which a real search spends out of its budget), a 10 MB package. Its
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
BACKENDS = ("sklearn", "lightgbm", "xgboost")
DEFAULT_BACKEND = "lightgbm"
TARGETS = ("time", "top")
TREES = 32  # trees (boosting rounds) per fit: the data is at most a few hundred points
# The packages each backend imports (LightGBM's scikit-learn API needs scikit-learn too).
_PACKAGES = {"sklearn": ("sklearn",), "lightgbm": ("lightgbm", "sklearn"), "xgboost": ("xgboost",)}
Features = Callable[[Config], list[float]]
_PIP = {"sklearn": "scikit-learn", "lightgbm": "lightgbm", "xgboost": "xgboost"}


def make_model(backend: str, seed: int, target: str = "time") -> Any:
    """A fresh regressor (``target="time"``) or classifier (``"top"``) of ``backend``;
    UsageError naming the extra when its library is missing."""
    if backend not in _PIP:
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
        batch: int = 8,
        limit: int | None = None,
        initial: int | None = None,
        pool: int = 512,
        explore: float = 0.125,
        polish: float = 0.2,
        local: float = 0.75,
        target: str = "time",
        backend: str = DEFAULT_BACKEND,
        fallback: bool = False,
    ) -> None:
        super().__init__(seed, batch, limit)
        if target not in TARGETS:
            raise UsageError(f"model target {target!r}: expected one of {', '.join(TARGETS)}")
        if not (0 <= explore <= 1 and 0 <= local <= 1 and 0 <= polish < 1):
            raise ValueError(
                f"ModelSearch: explore ({explore}) and local ({local}) must be in [0, 1], "
                f"polish ({polish}) in [0, 1)"
            )
        self.initial = batch if initial is None else initial
        self.pool = pool
        self.explore = explore
        self.polish = polish
        self.local = local
        self.target = target
        self.backend = backend
        # ``auto``'s: when the library is found but fails to load, climb without the model
        # (one warning) instead of failing the tuning.
        self.fallback = fallback
        self._unusable = False
        if not _installed(backend):
            make_model(backend, seed, target)  # the UsageError with the install hint
        self._importing: threading.Thread | None = None
        if any(name not in sys.modules for name in _PACKAGES[backend]):
            # Joined at exit: an interpreter finalizing under an import of a compiled
            # library can abort the process.
            self._importing = start_drained_thread(
                _import_quietly, backend, name="tunedsl-model-import"
            )
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
        best = best_ok(history)
        if best is not None and self._polishing(history, remaining_s):
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
