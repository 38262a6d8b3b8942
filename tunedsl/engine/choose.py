"""Choosing the winner: re-measure the leading configurations before declaring one.

The first pass measures each configuration once, as it finishes compiling. Noise (clock
boost, a neighbour process, thermal drift) can put a slightly slower configuration first,
so the ``effort.leaders`` best are measured again in ``effort.rounds`` interleaved rounds
(A B C, C B A, A B C, ...: drift affects all of them alike) and the winner is the lowest
median of those fresh samples. Configurations measured in an earlier process (kept in a
record) are never trusted against this process's numbers: if one leads, it is re-measured
too, which is how adding a configuration to a space measures only what is new plus the
leaders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tunedsl.engine.bench import Effort, Timing, summarize

# config -> function(reps) -> raw samples in ms
Sampler = Callable[[int], list[float]]


def leaders(timings: Mapping[Any, Timing], count: int) -> list[Any]:
    """The ``count`` configurations with the lowest median, best first."""
    ranked = sorted(timings, key=lambda cfg: timings[cfg].median_ms)
    return ranked[: max(1, count)]


def remeasure(
    candidates: list[Any],
    first: Mapping[Any, Timing],
    samplers: Mapping[Any, Sampler],
    effort: Effort,
) -> dict[Any, Timing]:
    """Fresh timings of ``candidates`` in interleaved rounds; those without a sampler keep
    their first timing (they could not be run again)."""
    runnable = [c for c in candidates if c in samplers]
    samples: dict[Any, list[float]] = {c: [] for c in runnable}
    # The first pass calibrated its repetitions to its budget in wall time; scale that.
    scale = effort.leader_budget_ms / effort.budget_ms / max(1, effort.rounds)
    for round_index in range(effort.rounds):
        order = runnable if round_index % 2 == 0 else list(reversed(runnable))
        for cfg in order:
            reps = max(effort.min_reps, min(effort.max_reps, round(first[cfg].reps * scale)))
            samples[cfg].extend(samplers[cfg](reps))
    fresh = {c: summarize(s) for c, s in samples.items() if s}
    return {c: fresh.get(c, first[c]) for c in candidates}


def choose(
    first: Mapping[Any, Timing], samplers: Mapping[Any, Sampler], effort: Effort
) -> tuple[Any, dict[Any, Timing]]:
    """The winner and the final timings (leaders' replaced by their re-measurement)."""
    if not first:
        raise ValueError("no configuration was measured")
    lead = leaders(first, effort.leaders)
    if len(first) == 1 and not any(c not in samplers for c in lead):
        return lead[0], dict(first)
    fresh = remeasure(lead, first, samplers, effort)
    final = dict(first)
    final.update(fresh)
    winner = min(fresh, key=lambda c: fresh[c].median_ms)
    return winner, final
