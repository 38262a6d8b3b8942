"""Benchmark calibration and winner selection, with a scripted timer (pure Python)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tunedsl.engine import bench, choose
from tunedsl.engine.bench import EFFORTS, Timing
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


def constant(first: float, then: float) -> Iterator[float]:
    yield first
    while True:
        yield then


def test_warm_up_is_discarded_and_reps_follow_the_budget() -> None:
    timer = ScriptedTimer(constant(1000.0, 2.0))  # a slow first launch (module load)
    setups = []
    effort = EFFORTS["default"]
    timing, samples = bench.measure(lambda: None, lambda: setups.append(1), timer, effort)
    assert 1000.0 not in samples
    assert timing.median_ms == 2.0 and timing.min_ms == 2.0 and timing.spread == 0.0
    # 40 ms budget / 2 ms per repetition (the scripted timer itself takes no wall time)
    assert timing.reps == 20 and len(samples) == 20
    assert len(setups) == timer.runs == 21  # setup before every launch, warm-up included


def test_reps_are_clamped() -> None:
    effort = EFFORTS["quick"]
    fast, _ = bench.measure(lambda: None, lambda: None, ScriptedTimer(constant(1.0, 1e-6)), effort)
    slow, _ = bench.measure(lambda: None, lambda: None, ScriptedTimer(constant(1.0, 100.0)), effort)
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


def test_leaders_are_remeasured_before_a_winner_is_declared() -> None:
    # First pass: b looked fastest (noise); fresh samples show a is.
    first = {
        "a": Timing(1.00, 0.0, 40, 1.0),
        "b": Timing(0.90, 0.0, 40, 0.9),
        "c": Timing(5.0, 0.0, 8, 5.0),
    }
    calls: list[tuple[str, int]] = []

    def sampler(name: str, value: float):
        def sample(reps: int) -> list[float]:
            calls.append((name, reps))
            return [value] * reps

        return sample

    samplers = {"a": sampler("a", 0.8), "b": sampler("b", 1.1), "c": sampler("c", 5.0)}
    effort = EFFORTS["quick"]  # 2 leaders, 2 rounds
    winner, final = choose.choose(first, samplers, effort)
    assert winner == "a"
    assert final["a"].median_ms == 0.8 and final["b"].median_ms == 1.1
    assert final["c"] is first["c"]  # not a leader: not measured again
    assert [name for name, _ in calls] == ["b", "a", "a", "b"]  # interleaved rounds
    # reps scaled from the first pass: 40 * (20 ms / 10 ms) / 2 rounds = 40
    assert all(reps == 40 for _, reps in calls)


def test_single_configuration_needs_no_remeasure() -> None:
    first = {"a": Timing(1.0, 0.0, 10, 1.0)}
    winner, final = choose.choose(
        first, {"a": lambda reps: pytest.fail("re-measured")}, EFFORTS["default"]
    )
    assert winner == "a" and final == first
