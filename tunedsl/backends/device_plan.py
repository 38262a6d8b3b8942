"""Whether a tuning measures on several GPUs (backends layer, pure): only when it pays off.

Measuring on several GPUs (``multi_device.py``) costs a worker process per GPU: starting one
(a process, torch, CUDA, the inputs) takes seconds, while a tuning on the caller's GPU alone
measures in this process at once. ``plan_devices`` weighs the two with a small cost model
(``Costs``) and picks the number of GPUs expected to finish first:

- one GPU: ``wall_1 = max(compile, measure)`` (the host compiles while the GPU measures;
  plus a worker's start when the tuning is isolated anyway);
- ``k`` GPUs: ``wall_k = max(compile, start + measure / k)`` (the workers start beside the
  compiles; a warm worker, kept from an earlier tuning, starts for ``WARM_START_S``);
- ``compile`` is ``configurations x compile_s``, ``measure`` is the configurations measured
  (all of them, or what the budget allows) ``x measure_s``.

Several GPUs are used only when ``wall_k * MARGIN <= wall_1``; under a budget (the wall is
the budget either way) only when they are expected to measure ``MARGIN`` times the
configurations. ``start_s`` and ``measure_s`` start from what two H100s measured
(``DEFAULT_START_S``, ``DEFAULT_MEASURE_S``) and follow what this process measured on this
host since (``observe``): the first multi-GPU tuning teaches the next.
``measurers.maybe_multi_device`` applies it to a tuning request.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

__all__ = ["Costs", "costs_for", "observe", "plan_devices"]

#: Seconds a measuring worker takes to start on a GPU (process, torch, CUDA, the inputs):
#: 5.0-6.5 s measured on an H100 host; used until this process has started one.
DEFAULT_START_S = 6.0
#: Seconds a warm worker (alive from an earlier tuning) takes to receive new inputs.
WARM_START_S = 0.5
#: Seconds one GPU spends on one configuration (loading it, its opening and its share of
#: the race's later rounds): a 4096-cubed fp16 matmul on an H100; followed from measurements.
DEFAULT_MEASURE_S = 0.12
#: CPU seconds the host spends compiling one configuration (divided over the cores): the
#: anchor's 48 configurations compile in about 2.3 s on 32 cores.
COMPILE_CPU_S = 1.5
#: Several GPUs must be expected to be this much faster (or measure this much more).
MARGIN = 1.25


@dataclass(frozen=True)
class Costs:
    """The cost model of one tuning (seconds): see the module docstring."""

    start_s: float  # starting the workers (they start side by side)
    measure_s: float  # one configuration on one GPU
    compile_s: float  # one configuration on the host (wall: the cores share the work)
    isolated_start_s: float = 0.0  # what one GPU pays to start its own worker (isolate=True)


def expected_wall(configs: int, gpus: int, costs: Costs) -> float:
    """Expected seconds of an exhaustive tuning of ``configs`` configurations on ``gpus``."""
    compile_s = configs * costs.compile_s
    measure_s = configs * costs.measure_s
    if gpus <= 1:
        return max(compile_s, costs.isolated_start_s + measure_s)
    return max(compile_s, costs.start_s + measure_s / gpus)


def expected_measured(configs: int, gpus: int, costs: Costs, budget_s: float) -> float:
    """Expected configurations measured within ``budget_s`` on ``gpus`` (at most all, at
    most what the host compiles in the budget: what it compiled while the workers started
    waits for them)."""
    start = costs.isolated_start_s if gpus <= 1 else costs.start_s
    measured = max(0.0, budget_s - start) * max(1, gpus) / costs.measure_s
    compiled = budget_s / costs.compile_s if costs.compile_s > 0 else float("inf")
    return min(float(configs), compiled, measured)


def plan_devices(configs: int, gpus: int, costs: Costs, budget_s: float | None = None) -> int:
    """How many of ``gpus`` GPUs a tuning of ``configs`` configurations uses: ``gpus`` when
    they are expected to pay for their workers by ``MARGIN``, else 1 (pure)."""
    if gpus <= 1 or configs < 2:
        return 1
    one = expected_measured(configs, 1, costs, budget_s) if budget_s is not None else configs
    if budget_s is not None and one < configs:  # the budget ends the search: count configs
        more = expected_measured(configs, gpus, costs, budget_s)
        return gpus if more >= MARGIN * one else 1
    faster = expected_wall(configs, gpus, costs) * MARGIN <= expected_wall(configs, 1, costs)
    return gpus if faster else 1


# -- what this process measured on this host -------------------------------------------------

_seen: dict[str, dict[str, float]] = {}  # device model -> {"start_s": ..., "measure_s": ...}
_seen_lock = threading.Lock()


def observe(model: str, *, start_s: float | None = None, measure_s: float | None = None) -> None:
    """Record a worker's measured start, or seconds per configuration, on ``model``'s GPUs."""
    with _seen_lock:
        seen = _seen.setdefault(model, {})
        if start_s is not None and start_s > 0:
            seen["start_s"] = max(start_s, seen.get("start_s", 0.0))  # the slowest start
        if measure_s is not None and measure_s > 0:
            seen["measure_s"] = measure_s


def costs_for(model: str, *, warm: bool, isolate: bool, cores: int | None = None) -> Costs:
    """The cost model on ``model``'s GPUs: measured in this process where it has been."""
    with _seen_lock:
        seen = dict(_seen.get(model, {}))
    start = WARM_START_S if warm else seen.get("start_s", DEFAULT_START_S)
    return Costs(
        start_s=start,
        measure_s=seen.get("measure_s", DEFAULT_MEASURE_S),
        compile_s=COMPILE_CPU_S / max(1, cores or os.cpu_count() or 1),
        isolated_start_s=start if isolate else 0.0,
    )
