"""Benchmark calibration and winner selection, with a scripted timer (pure Python)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tunedsl.engine import bench
from tunedsl.engine.bench import EFFORTS
from tunedsl.errors import UsageError


class ScriptedTimer:
    """Returns the given sample values in order and counts setups and launches."""

    kind = "cuda-events"

    def __init__(self, values: Iterator[float]) -> None:
        self.values = values
        self.setups = 0
        self.runs = 0

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        out = []
        for _ in range(reps):
            setup()
            self.setups += 1
            run()
            self.runs += 1
            out.append(next(self.values))
        return out


def frozen_clock() -> float:
    """A clock that never moves: the probe's wall time is the timer's samples alone."""
    return 0.0


def constant(first: float, then: float) -> Iterator[float]:
    yield first
    while True:
        yield then


def test_warm_up_is_discarded_and_reps_follow_the_budget() -> None:
    timer = ScriptedTimer(constant(1000.0, 2.0))  # a slow first launch (module load)
    setups = []
    effort = EFFORTS["default"]
    timing, samples = bench.measure(
        lambda: None, lambda: setups.append(1), timer, effort, clock=frozen_clock
    )
    assert 1000.0 not in samples
    assert timing.median_ms == 2.0 and timing.min_ms == 2.0 and timing.spread == 0.0
    # 40 ms budget / 2 ms per repetition (the scripted timer itself takes no wall time)
    assert timing.reps == 20 and len(samples) == 20
    assert len(setups) == timer.runs == 21  # setup before every launch, warm-up included


def test_reps_are_clamped() -> None:
    effort = EFFORTS["quick"]

    def measure(timer: ScriptedTimer) -> bench.Timing:
        return bench.measure(lambda: None, lambda: None, timer, effort, clock=frozen_clock)[0]

    fast = measure(ScriptedTimer(constant(1.0, 1e-6)))
    slow = measure(ScriptedTimer(constant(1.0, 100.0)))
    assert fast.reps == effort.max_reps and slow.reps == effort.min_reps


def test_interpreter_effort_is_short() -> None:
    effort = bench.effort_for("thorough", "wall")
    assert (effort.min_reps, effort.max_reps) == bench.INTERPRETER_REPS
    with pytest.raises(UsageError, match="effort='max'"):
        bench.effort_for("max", "wall")


def test_summarize_median_and_spread() -> None:
    t = bench.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert t.median_ms == 3.0 and t.min_ms == 1.0 and t.reps == 5
    assert t.spread > 0
