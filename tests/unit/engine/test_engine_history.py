"""Observations to record results and back: a stored search is continued, not repeated."""

from __future__ import annotations

from landscape import LandscapeMeasurer, SimClock, make_space

from tunedsl.engine.driver import run_search
from tunedsl.engine.history import observations_from_results, results_from_observations
from tunedsl.engine.search import make_strategy
from tunedsl.store.records import ConfigResult


def test_a_search_round_trips_through_record_results_and_is_continued() -> None:
    space = make_space()
    clock = SimClock()
    first = run_search(space, make_strategy("random"), LandscapeMeasurer(clock=clock),
                       budget_s=1.0, clock=clock)  # fmt: skip
    results = results_from_observations(first.observations, lambda c: ({"num_warps": 4}, {}))
    assert len(results) == len(first.observations)
    # The JSON form a record file holds reads back to the same results.
    results = [ConfigResult.from_json(r.to_json(), "r") for r in results]
    ok = [r for r in results if r.status == "ok"]
    failed = [r for r in results if r.status == "failed"]
    assert ok and failed and all(r.reps and r.options == {"num_warps": 4} for r in ok)
    assert all("out of resources" in (r.reason or "") for r in failed)

    history = observations_from_results(results)
    clock2 = SimClock()
    m = LandscapeMeasurer(clock=clock2)
    later = run_search(space, make_strategy("random", seed=1), m, budget_s=2.0, clock=clock2,
                       history=history)  # fmt: skip
    assert not any(m.prepared[r.config] for r in failed)  # failures are never retried
    merged = results_from_observations(later.observations, previous=results)
    assert {r.config for r in results} <= {r.config for r in merged}
    assert len(merged) == len(later.observations)
