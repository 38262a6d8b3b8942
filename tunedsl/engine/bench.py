"""A timing summary of raw samples (milliseconds): median, minimum and spread, pyperf-style.

The timers (``backends.timers``) take the samples and the race (``engine.racing``) decides how
many; this module only summarizes them for records and reports.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


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
