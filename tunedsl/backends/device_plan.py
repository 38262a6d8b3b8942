"""How many GPUs a tuning measures on (backends layer, pure): more only when they pay off.

Measuring on several GPUs (``multi_device.py``) costs a worker process per GPU: starting one
(a process, torch, CUDA, the inputs) takes seconds. ``plan_devices`` weighs that with a small
cost model of one tuning of ``n`` configurations (``Costs``, seconds):

- the host compiles every configuration once, on all its cores, whatever the GPU count:
  ``compile = n x compile_s``, ``measure = n x measure_s``;
- one GPU measures in this process beside the compiles (plus a worker's start when the
  tuning is isolated): ``wall_1 = max(compile, isolated_start + measure)``;
- ``k`` GPUs, the caller's in this process (``local_caller``): it measures from the start,
  the other workers start beside it and then share what is left:
  ``wall_k = max(compile, start + (measure - start) / k)`` (just ``measure`` when the caller
  is done before they start); the caller's in a worker too (an isolated tuning): every GPU
  waits for its worker, ``wall_k = max(compile, start + measure / k)``.

So a second GPU pays when the measuring it takes over is worth more than its worker's
start, and the host compiles faster than one GPU measures. Several GPUs are used when
``wall_k x MARGIN <= wall_1``; under a budget that ends the search before the space is
measured, when they are expected to measure ``MARGIN`` times the configurations one does in
it. Of several GPUs, one more is taken only when it cuts the expected wall time by
``MORE_GPUS_GAIN``. Every default is a measurement of the H100 and H200 hosts (16 and 32
cores); the workers' start and a configuration's measuring seconds are replaced by what
this process has measured since (``observe``, in this process or in the workers).
``measurers.maybe_multi_device`` applies the plan to a tuning request.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Costs",
    "costs_for",
    "expected_measured",
    "expected_wall",
    "model_name",
    "observe",
    "observed",
    "plan_devices",
]

#: A cold worker's start (process, torch, CUDA, the inputs): 5.0-6.5 s on the 2xH100 host.
DEFAULT_START_S = 6.0
#: A warm worker's start (alive from an earlier tuning: it only receives the new inputs).
WARM_START_S = 0.5
#: One GPU's seconds per configuration (load, opening repetitions, its share of the later
#: rounds), in this process: an H200 measured 845 configurations of the 1,104-configuration
#: matmul space in a 20 s budget while it also waited for compiles (so at most 0.024 s).
DEFAULT_MEASURE_S = 0.022
#: Compile-slot seconds per configuration, in a tuning's first minute (the later compiles of
#: a space's largest tiles take longer, but a budget or the cheaper ones come first): the
#: 1,104-configuration matmul space compiled 845 configurations in a 20 s budget on 32
#: cores (2xH200), and 1,063 in 60 s on 16 (H100), its processes using every core; one GPU
#: measured what was compiled, so a second had nothing to take. Not followed from
#: measurements: a tuning that finds its binaries in Triton's cache would teach the next one
#: that compiling is free.
DEFAULT_COMPILE_S = 0.8
#: Several GPUs must be expected this much faster (or to measure this many times the
#: configurations): what the model leaves out (round trips, the workers' CPU beside the
#: compiles, an estimate off by a fifth) must not make a tuning slower.
MARGIN = 1.25
#: A GPU beyond the second must cut the expected wall time by this much more (it holds a
#: GPU and a worker process that a compile-bound tuning would not use).
MORE_GPUS_GAIN = 1.1
#: An observation counts only from this many configurations (fewer: noise, and fixed costs).
MIN_OBSERVED = 8


@dataclass(frozen=True)
class Costs:
    """The cost model of one tuning (seconds): see the module docstring."""

    start_s: float  # starting the workers (side by side)
    measure_s: float  # one configuration on one GPU
    compile_s: float  # one configuration on the host, in wall seconds (the cores share it)
    isolated_start_s: float = 0.0  # what one GPU pays to start its own worker (isolate=True)
    local_caller: bool = False  # the caller's GPU measures in this process, from the start


def expected_wall(configs: int, gpus: int, costs: Costs) -> float:
    """Expected seconds of an exhaustive tuning of ``configs`` configurations on ``gpus``."""
    compile_s = configs * costs.compile_s
    measure_s = configs * costs.measure_s
    if gpus <= 1:
        return max(compile_s, costs.isolated_start_s + measure_s)
    if costs.local_caller:
        if measure_s <= costs.start_s:  # done before the other workers are up
            return max(compile_s, measure_s)
        return max(compile_s, costs.start_s + (measure_s - costs.start_s) / gpus)
    return max(compile_s, costs.start_s + measure_s / gpus)


def expected_measured(configs: int, gpus: int, costs: Costs, budget_s: float) -> float:
    """Expected configurations measured within ``budget_s`` on ``gpus``: at most all, at most
    what the host compiles in the budget, at most what the GPUs measure (the caller's from
    the start when it measures in this process, the others once their workers are up)."""
    if gpus <= 1:
        measured = max(0.0, budget_s - costs.isolated_start_s) / costs.measure_s
    else:
        late = max(0.0, budget_s - costs.start_s) / costs.measure_s  # one worker's share
        first = budget_s / costs.measure_s if costs.local_caller else late
        measured = first + (gpus - 1) * late
    compiled = budget_s / costs.compile_s if costs.compile_s > 0 else float("inf")
    return min(float(configs), compiled, measured)


def plan_devices(configs: int, gpus: int, costs: Costs, budget_s: float | None = None) -> int:
    """How many of ``gpus`` GPUs a tuning of ``configs`` configurations uses (pure): more
    than one only when they beat one by ``MARGIN``, each beyond the second only when it
    gains ``MORE_GPUS_GAIN`` more."""
    if gpus <= 1 or configs < 2:
        return 1
    if budget_s is not None and expected_measured(configs, 1, costs, budget_s) < configs:
        # The budget ends the search either way: count the configurations measured in it.
        def value(k: int) -> float:
            return expected_measured(configs, k, costs, budget_s)
    else:

        def value(k: int) -> float:  # a tuning a second
            return 1.0 / max(expected_wall(configs, k, costs), 1e-9)

    best, chosen = value(1), 1
    for k in range(2, gpus + 1):
        if value(k) > 0 and value(k) >= best * (MARGIN if chosen == 1 else MORE_GPUS_GAIN):
            best, chosen = value(k), k
    return chosen


# -- what this process measured on this host -------------------------------------------------

_seen: dict[str, dict[str, float]] = {}  # device model -> {"start_s": ..., "measure_s": ...}
_seen_lock = threading.Lock()


def model_name(facts: Mapping[str, Any]) -> str:
    """A device's model as the plan's observations are kept ("NVIDIA H100 (cuda 9.0)")."""
    return f"{facts.get('name')} ({facts.get('type')} {facts.get('capability')})"


def observe(
    model: str,
    *,
    start_s: float | None = None,
    measure_s: float | None = None,
    configs: int = MIN_OBSERVED,
) -> None:
    """Record what a tuning on ``model``'s GPUs measured: a worker's start (the slowest seen
    counts: the workers start side by side), or the seconds one GPU spent on each of
    ``configs`` configurations."""
    with _seen_lock:
        seen = _seen.setdefault(model, {})
        if start_s is not None and start_s > 0:
            seen["start_s"] = max(start_s, seen.get("start_s", 0.0))
        if configs < MIN_OBSERVED:
            return
        if measure_s is not None and measure_s > 0:
            seen["measure_s"] = measure_s


def observed() -> dict[str, dict[str, float]]:
    """What this process has measured, by device model (benchmarks print it)."""
    with _seen_lock:
        return {model: dict(seen) for model, seen in _seen.items()}


def costs_for(model: str, *, warm: bool, isolate: bool, cores: int | None = None) -> Costs:
    """The cost model on ``model``'s GPUs: measured in this process where it has been. An
    isolated tuning measures in workers only; any other on the caller's GPU in this process."""
    with _seen_lock:
        seen = dict(_seen.get(model, {}))
    start = WARM_START_S if warm else seen.get("start_s", DEFAULT_START_S)
    slots = max(1, cores or os.cpu_count() or 1)
    return Costs(
        start_s=start,
        measure_s=seen.get("measure_s", DEFAULT_MEASURE_S),
        compile_s=DEFAULT_COMPILE_S / slots,
        isolated_start_s=start if isolate else 0.0,
        local_caller=not isolate,
    )
