"""How many GPUs a tuning measures on (``backends/device_plan.py``), with the figures measured
on the H100 and H200 hosts: a cold worker starts in 5.0-6.5 s; of the 1,104-configuration
matmul space one GPU measured 845 configurations in a 20 s budget on 32 cores (what the host
compiled: two GPUs measured 672) and 1,039 in 60 s on 16 cores. No clock and no GPU: the
model is pure, and its defaults are those measurements."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tunedsl.backends import device_plan
from tunedsl.backends.device_plan import (
    Costs,
    costs_for,
    expected_measured,
    expected_wall,
    plan_devices,
)
from tunedsl.engine.search.auto import SMALL_VALID

ANCHOR = 48  # the anchor matmul's space
LARGE = 1104  # bench_multi_gpu.py's large space


@pytest.fixture(autouse=True)
def _nothing_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_plan, "_seen", {})


def h100(*, warm: bool = False, cores: int = 32) -> Costs:
    """The model before this process has measured anything: the 2xH100 host's figures."""
    return costs_for("NVIDIA H100 80GB HBM3 (cuda 9.0)", warm=warm, isolate=False, cores=cores)


def test_the_defaults_reproduce_what_the_hosts_measured() -> None:
    one_32 = expected_measured(LARGE, 1, h100(cores=32), 20.0)
    assert 0.85 * 845 <= one_32 <= 1.15 * 845  # 845 measured in 20 s, 32 cores
    one_16 = expected_measured(LARGE, 1, h100(cores=16), 60.0)
    assert 0.85 * 1039 <= one_16 <= 1.15 * 1039  # 1,039 measured in 60 s, 16 cores
    # Two GPUs measured fewer (672): the host compiles what one measures.
    two_over_one = expected_measured(LARGE, 2, h100(), 20.0) / one_32
    assert two_over_one < device_plan.MARGIN
    assert 5.0 <= h100().start_s <= 6.5


def test_a_small_space_stays_on_one_gpu_when_its_workers_must_start() -> None:
    cold = h100()
    assert plan_devices(ANCHOR, 2, cold) == 1  # 5-6.5 s of start against a 3 s tuning
    assert plan_devices(ANCHOR, 8, cold) == 1
    # Every space the tuner searches without a budget (a small one, exhaustively) measures
    # in less time than a cold worker takes to start: never slower, never several GPUs.
    assert all(plan_devices(n, 2, cold) == 1 for n in range(1, SMALL_VALID + 1))


def test_the_large_space_stays_on_one_gpu_where_the_host_compiles_no_faster_than_it_measures() -> (
    None
):
    cold = h100()  # 32 cores: what they compile, one GPU measures
    assert plan_devices(LARGE, 2, cold) == 1
    assert plan_devices(LARGE, 2, cold, budget_s=20.0) == 1
    assert plan_devices(LARGE, 2, cold, budget_s=10.0) == 1


def test_a_host_that_compiles_faster_than_one_gpu_measures_uses_both() -> None:
    cold = h100(cores=64)
    assert plan_devices(LARGE, 2, cold) == 2
    one, two = expected_wall(LARGE, 1, cold), expected_wall(LARGE, 2, cold)
    assert two * device_plan.MARGIN <= one
    # Under a budget the GPUs must measure MARGIN times the configurations. The caller's GPU
    # measures in this process from the start, the second once its worker is up: under 20 s
    # or 10 s it adds 14 s or 4 s of measuring; under 7 s only 1 s, too little.
    assert plan_devices(2 * LARGE, 2, cold, budget_s=20.0) == 2
    assert plan_devices(LARGE, 2, cold, budget_s=10.0) == 2
    assert plan_devices(LARGE, 2, cold, budget_s=7.0) == 1
    # A budget that covers the whole space: decided by the wall time, as without one.
    assert plan_devices(ANCHOR, 2, cold, budget_s=600.0) == plan_devices(ANCHOR, 2, cold)


def test_with_the_caller_measuring_in_this_process_more_gpus_are_never_expected_slower() -> None:
    cold = h100()
    assert cold.local_caller
    for n in range(1, 3000, 7):
        assert expected_wall(n, 2, cold) <= expected_wall(n, 1, cold)
        for budget in (1.0, 7.0, 20.0):
            assert expected_measured(n, 2, cold, budget) >= expected_measured(n, 1, cold, budget)
    # A worker that starts after the caller has measured everything adds nothing.
    assert expected_wall(ANCHOR, 2, cold) == expected_wall(ANCHOR, 1, cold)


def test_the_break_even_is_where_the_measuring_saved_pays_for_the_start() -> None:
    cold = h100(cores=64)
    first = next(n for n in range(2, 5000) if plan_devices(n, 2, cold) == 2)
    # From there on, always: more configurations never make several GPUs lose.
    assert all(plan_devices(n, 2, cold) == 2 for n in range(first, 5000))
    # The caller alone needs longer than a worker's start: the second GPU takes half of the
    # rest, and that is worth the margin.
    assert first * cold.measure_s > cold.start_s
    assert expected_wall(first, 2, cold) * device_plan.MARGIN <= expected_wall(first, 1, cold)
    assert expected_wall(first - 1, 2, cold) * device_plan.MARGIN > expected_wall(
        first - 1, 1, cold
    )
    # A slower start moves the break-even up; a slower kernel (more measuring) down.
    slow_start = dataclasses.replace(cold, start_s=12.0)
    slow_kernel = dataclasses.replace(cold, measure_s=0.2)
    assert next(n for n in range(2, 5000) if plan_devices(n, 2, slow_start) == 2) > first
    assert next(n for n in range(2, 5000) if plan_devices(n, 2, slow_kernel) == 2) < first


def test_warm_workers_pay_sooner() -> None:
    warm, cold = h100(warm=True, cores=64), h100(cores=64)
    assert plan_devices(LARGE, 2, warm, budget_s=7.0) == 2
    assert plan_devices(16, 2, warm) == 1  # measured in half a second anyway
    warm_from = next(n for n in range(2, 5000) if plan_devices(n, 2, warm) == 2)
    cold_from = next(n for n in range(2, 5000) if plan_devices(n, 2, cold) == 2)
    assert warm_from < cold_from / 4


def test_a_compile_bound_tuning_takes_no_gpu_it_cannot_feed() -> None:
    # Two cores compile slower than one GPU measures: more GPUs would wait.
    assert plan_devices(LARGE, 2, h100(cores=2)) == 1
    assert plan_devices(LARGE, 2, h100(cores=2), budget_s=20.0) == 1
    # 64 cores feed more than one GPU, not four: the fourth would cut the wall time by
    # less than MORE_GPUS_GAIN.
    assert 1 < plan_devices(LARGE, 4, h100(cores=64)) < 4
    # A slower kernel (0.2 s a configuration) keeps four GPUs busy.
    assert plan_devices(LARGE, 4, dataclasses.replace(h100(), measure_s=0.2)) == 4


def test_isolated_tunings_pay_a_worker_start_on_one_gpu_too() -> None:
    isolated = costs_for("H100 (cuda 9.0)", warm=False, isolate=True, cores=32)
    assert not isolated.local_caller and isolated.isolated_start_s == isolated.start_s
    assert plan_devices(300, 2, h100()) == 1
    assert plan_devices(300, 2, isolated) == 2
    # Every GPU waits for its worker, one GPU's too: a 7 s budget leaves each 1 s.
    assert expected_measured(LARGE, 1, isolated, 7.0) < expected_measured(LARGE, 1, h100(), 7.0)


def test_what_this_process_measured_replaces_the_defaults() -> None:
    model = "Test GPU (cuda 9.0)"
    cold = costs_for(model, warm=False, isolate=False, cores=32)
    assert (cold.start_s, cold.measure_s) == (
        device_plan.DEFAULT_START_S,
        device_plan.DEFAULT_MEASURE_S,
    )
    device_plan.observe(model, start_s=9.0)
    device_plan.observe(model, start_s=4.0)  # the slowest start counts
    device_plan.observe(model, measure_s=5.0, configs=device_plan.MIN_OBSERVED - 1)  # too few
    assert costs_for(model, warm=False, isolate=False).measure_s == device_plan.DEFAULT_MEASURE_S
    device_plan.observe(model, measure_s=1.0, configs=48)
    seen = costs_for(model, warm=False, isolate=False, cores=32)
    assert (seen.start_s, seen.measure_s) == (9.0, 1.0)
    assert costs_for(model, warm=True, isolate=False).start_s == device_plan.WARM_START_S
    other = costs_for("Other GPU (cuda 8.0)", warm=False, isolate=False)
    assert other.start_s == device_plan.DEFAULT_START_S
    # A kernel measured at a second a configuration makes the anchor worth two GPUs.
    assert plan_devices(ANCHOR, 2, h100()) == 1
    assert plan_devices(ANCHOR, 2, seen) == 2


def test_the_plan_weighs_the_budget_the_search_runs_under() -> None:
    from tunedsl.backends.measurers import plan_budget
    from tunedsl.engine.request import TuneRequest
    from tunedsl.model.config import Config
    from tunedsl.model.settings import Settings
    from tunedsl.model.variant import Variant

    def request(n: int, **kw: Any) -> TuneRequest:
        variants = [Variant(Config(i=i), (), {}, (1,), {}) for i in range(n)]
        return TuneRequest(kernel=None, variants=variants, settings=Settings(**kw))

    # A small space is searched exhaustively without a budget: so is it planned.
    assert plan_budget(request(ANCHOR)) is None
    assert plan_budget(request(LARGE)) == 10.0  # the default effort's
    assert plan_budget(request(LARGE, effort="thorough")) == 40.0
    assert plan_budget(request(ANCHOR, budget_s=3.0)) == 3.0
    assert plan_budget(request(ANCHOR, search="random")) == 10.0
    # A kernel measured at a second a configuration: the anchor's tuning takes 48 s on one
    # GPU, unbudgeted, and two GPUs pay; planned as if under 10 s, they would not.
    slow = Costs(start_s=6.0, measure_s=1.0, compile_s=0.6 / 32)
    assert plan_devices(ANCHOR, 2, slow, plan_budget(request(ANCHOR))) == 2
    assert plan_devices(ANCHOR, 2, slow, 10.0) == 1


def test_a_space_too_large_to_list_is_planned_by_its_size_not_its_empty_variants() -> None:
    # A space too large to list comes with no variants (they are built as the search
    # proposes them): the plan counted 0 configurations and, for search="auto", planned
    # an exhaustive search without a budget where the tuner searches under the effort's.
    from tunedsl.backends.measurers import plan_budget, space_size
    from tunedsl.engine.request import TuneRequest
    from tunedsl.model.settings import Settings
    from tunedsl.model.space import Space

    def lazy(points: int, **kw: Any) -> TuneRequest:
        space = Space(i=list(range(points // 10)), j=list(range(10)))
        settings = Settings(space=space, large=True, **kw)
        return TuneRequest(kernel=None, variants=[], settings=settings, variant_for=lambda c: c)

    assert space_size(lazy(1_000_000)) == 1_000_000
    assert plan_budget(lazy(1_000_000)) == 10.0  # the default effort's, as the tuner's
    assert plan_budget(lazy(1_000_000, effort="thorough")) == 40.0
    assert plan_budget(lazy(1_000_000, budget_s=3.0)) == 3.0
