"""When a tuning measures on several GPUs (``backends/device_plan.py``): a synthetic cost
model, no clock and no GPU. Several GPUs are chosen only when they are expected to pay for
their workers' start; a small space stays on the caller's GPU."""

from __future__ import annotations

import pytest

from tunedsl.backends import device_plan
from tunedsl.backends.device_plan import Costs, costs_for, expected_wall, plan_devices

# What two H100s of a 32-core host measured: a worker starts in 5-6.5 s, a configuration
# compiles in 1.5 CPU seconds, and one GPU spends about 0.12 s on each.
COLD = Costs(start_s=6.0, measure_s=0.12, compile_s=1.5 / 32)
WARM = Costs(start_s=0.5, measure_s=0.12, compile_s=1.5 / 32)


def test_a_small_space_stays_on_one_gpu_when_the_workers_must_start() -> None:
    assert plan_devices(48, 2, COLD) == 1  # the anchor: the start costs more than it saves
    assert plan_devices(48, 8, COLD) == 1
    assert plan_devices(1, 2, WARM) == 1


def test_a_large_space_uses_every_gpu() -> None:
    assert plan_devices(1104, 2, COLD) == 2
    assert plan_devices(1104, 4, COLD) == 4
    # The choice follows the expected wall time: two GPUs at least MARGIN faster.
    one, two = expected_wall(1104, 1, COLD), expected_wall(1104, 2, COLD)
    assert two * device_plan.MARGIN <= one


def test_the_break_even_is_where_the_start_is_paid_back() -> None:
    sizes = range(2, 2000)
    first = next(n for n in sizes if plan_devices(n, 2, COLD) == 2)
    # From there on, always: more configurations never make several GPUs lose.
    assert all(plan_devices(n, 2, COLD) == 2 for n in range(first, 2000))
    assert expected_wall(first, 2, COLD) * device_plan.MARGIN <= expected_wall(first, 1, COLD)
    assert expected_wall(first - 1, 2, COLD) * device_plan.MARGIN > expected_wall(
        first - 1, 1, COLD
    )
    # A slower start moves the break-even up.
    slow = Costs(start_s=12.0, measure_s=0.12, compile_s=1.5 / 32)
    assert next(n for n in sizes if plan_devices(n, 2, slow) == 2) > first


def test_warm_workers_make_a_small_space_worth_two_gpus() -> None:
    assert plan_devices(48, 2, WARM) == 2


def test_a_compile_bound_host_gains_nothing_from_more_gpus() -> None:
    two_cores = Costs(start_s=6.0, measure_s=0.12, compile_s=1.5 / 2)
    assert plan_devices(1104, 2, two_cores) == 1
    assert plan_devices(1104, 2, two_cores, budget_s=20.0) == 1


def test_under_a_budget_more_gpus_must_measure_more_configurations() -> None:
    assert plan_devices(1104, 2, COLD, budget_s=20.0) == 2
    # A budget barely longer than a worker's start: the second GPU measures less.
    assert plan_devices(1104, 2, COLD, budget_s=7.0) == 1
    # A budget that covers the whole space: decided by the wall time, as without one.
    assert plan_devices(48, 2, COLD, budget_s=600.0) == plan_devices(48, 2, COLD)


def test_isolated_tunings_pay_a_worker_start_on_one_gpu_too() -> None:
    isolated = Costs(start_s=6.0, measure_s=0.12, compile_s=1.5 / 32, isolated_start_s=6.0)
    assert plan_devices(100, 2, COLD) == 1
    assert plan_devices(100, 2, isolated) == 2


def test_what_this_process_measured_replaces_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_plan, "_seen", {})
    model = "Test GPU (cuda 90)"
    cold = costs_for(model, warm=False, isolate=False, cores=32)
    assert cold.start_s == device_plan.DEFAULT_START_S
    assert cold.measure_s == device_plan.DEFAULT_MEASURE_S
    device_plan.observe(model, start_s=9.0)
    device_plan.observe(model, start_s=4.0)  # the slowest start counts
    device_plan.observe(model, measure_s=1.0)
    seen = costs_for(model, warm=False, isolate=False, cores=32)
    assert (seen.start_s, seen.measure_s) == (9.0, 1.0)
    assert costs_for(model, warm=True, isolate=False).start_s == device_plan.WARM_START_S
    assert costs_for("Other GPU (cuda 80)", warm=False, isolate=False).start_s == 6.0
    # Slow measuring on this host makes the anchor worth two GPUs even cold.
    assert plan_devices(48, 2, seen) == 2
