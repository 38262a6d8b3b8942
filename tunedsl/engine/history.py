"""Between a record's per-configuration results and the engine's observations (engine layer).

A stored record is the history a later search continues (``run_search(history=...)``), and a
search's observations become the record's results. ``ConfigResult`` keeps a summary (median,
spread, repetitions, minimum) rather than raw samples; a ``round`` is carried when the
record has one (a record written before rounds existed reads as round 0, which the driver
never trusts against this process's timings: stored leaders are raced again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tunedsl.engine.bench import summarize
from tunedsl.engine.seams import Observation
from tunedsl.model.config import Config
from tunedsl.model.record import ConfigResult


def observations_from_results(results: Iterable[ConfigResult]) -> list[Observation]:
    """A stored record's results as the history of a search."""
    out = []
    for r in results:
        round_ = getattr(r, "round", None)
        out.append(
            Observation(
                r.config,
                r.status,
                median_ms=r.median_ms if r.status == "ok" else None,
                reason=r.reason,
                round=round_ if isinstance(round_, int) else 0,
            )
        )
    return out


def results_from_observations(
    observations: Iterable[Observation],
    extras: Callable[[Config], tuple[dict[str, Any], dict[str, Any]]] = lambda c: ({}, {}),
    previous: Iterable[ConfigResult] = (),
) -> list[ConfigResult]:
    """The results a record stores: fresh observations summarized from their samples, those
    continued from ``previous`` kept as they were. ``extras(config)`` gives the launch
    options and config-dependent constexprs of a configuration."""
    kept = {r.config: r for r in previous}
    out = []
    for o in observations:
        options, constexprs = extras(o.config)
        if o.status != "ok":
            out.append(ConfigResult(o.config, o.status, reason=o.reason or o.status,
                                    options=options, constexprs=constexprs))  # fmt: skip
        elif o.samples:
            t = summarize(o.samples)
            out.append(ConfigResult(o.config, "ok", t.median_ms, t.spread, t.reps, t.min_ms,
                                    options=options, constexprs=constexprs))  # fmt: skip
        elif o.config in kept:
            out.append(kept[o.config])  # carried over from the stored search unchanged
    return out
