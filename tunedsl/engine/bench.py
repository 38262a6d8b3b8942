"""Honest timing of one launch: warm-up, repetitions calibrated to a budget, median and spread.

The timer (``backends.timers.CudaEventTimer`` on a GPU, ``WallTimer`` under the
interpreter) supplies raw samples in milliseconds; this module decides how many to take
and summarizes them, pyperf-style:

1. one warm-up launch (loads the module, fills the instruction cache; discarded);
2. a probe of up to 3 launches estimates the time of one;
3. repetitions = time budget / wall time of one probe repetition (setup and L2 flush
   included), clamped to the effort's [min_reps, max_reps];
4. median, minimum and spread (inter-quartile range divided by the median) of all samples
   after the warm-up.

``setup`` runs before every repetition, outside the timed region (restore/zero arguments,
pre-hook); the CUDA timer also flushes L2 there.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class Timer(Protocol):
    kind: str

    def sample(
        self, run: Callable[[], object], setup: Callable[[], object], reps: int
    ) -> list[float]: ...


@dataclass(frozen=True)
class Effort:
    """How hard to look: per-configuration budget, and how the leaders are re-measured."""

    name: str
    budget_ms: float  # time budget of one configuration's first measurement
    leaders: int  # how many of the best are re-measured before a winner is declared
    leader_budget_ms: float  # budget of each leader's re-measurement, split over rounds
    rounds: int  # leaders are re-measured in this many interleaved rounds
    min_reps: int
    max_reps: int


EFFORTS: dict[str, Effort] = {
    "quick": Effort("quick", 10.0, 2, 20.0, 2, 3, 200),
    "default": Effort("default", 40.0, 3, 100.0, 3, 5, 1000),
    "thorough": Effort("thorough", 150.0, 5, 400.0, 4, 10, 5000),
}

# Under the interpreter a launch takes milliseconds of CPU; keep tuning short there.
INTERPRETER_REPS = (1, 3)


def effort_for(name: str, timer_kind: str) -> Effort:
    from tunedsl.errors import UsageError

    try:
        effort = EFFORTS[name]
    except KeyError:
        raise UsageError(f"effort={name!r}: expected one of {', '.join(EFFORTS)}") from None
    if timer_kind == "wall":
        lo, hi = INTERPRETER_REPS
        effort = Effort(
            effort.name, effort.budget_ms, effort.leaders, effort.leader_budget_ms, 2, lo, hi
        )
    return effort


@dataclass(frozen=True)
class Timing:
    median_ms: float
    spread: float  # (q3 - q1) / median
    reps: int
    min_ms: float


def summarize(samples: Sequence[float]) -> Timing:
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    median = statistics.median(ordered)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4)
    else:
        q1, q3 = ordered[0], ordered[-1]
    spread = (q3 - q1) / median if median > 0 else 0.0
    return Timing(median_ms=median, spread=spread, reps=len(ordered), min_ms=ordered[0])


def reps_for(budget_ms: float, estimate_ms: float, effort: Effort) -> int:
    if estimate_ms <= 0:
        return effort.max_reps
    return max(effort.min_reps, min(effort.max_reps, int(budget_ms / estimate_ms)))


def measure(
    run: Callable[[], object],
    setup: Callable[[], object],
    timer: Timer,
    effort: Effort,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[Timing, list[float]]:
    """Warm up, calibrate, time; return the summary and the raw samples.

    ``clock`` (seconds) measures the probe's wall time; tests pass a frozen one so that a
    loaded machine cannot change the calibration they check.
    """
    timer.sample(run, setup, 1)  # warm-up, discarded
    start = clock()
    probe = timer.sample(run, setup, min(3, effort.min_reps))
    # The budget is wall time: a repetition costs its setup and L2 flush too.
    wall_ms = (clock() - start) * 1e3 / len(probe)
    reps = reps_for(effort.budget_ms, max(wall_ms, statistics.median(probe)), effort)
    samples = probe + (timer.sample(run, setup, reps - len(probe)) if reps > len(probe) else [])
    return summarize(samples), samples
