"""Whether a stored timeout still stands (runtime layer).

A configuration that timed out was judged by a limit, not by what it is: it did not compile
within the compile limit (``compile timed out after N s``), or a measurement worker did not
answer within its limit (``timeout: no answer after N s``), both ``TUNEDSL_CONFIG_TIMEOUT``
(default 300 s to compile, 60 s to answer). A record never retries what failed, so a key
tuned once under a tight limit would keep that configuration out for good, whatever the
limit of a later process.

So a record states the limits its timeouts were made under (``context["limits"]``), and a
process under a larger limit reads the record without those timeouts: they are measured
again, the rest of the record's timings reused. Under the same or a smaller limit they stay
out. A site measuring in its own process (not isolated) judges by the limit as set too,
though nothing stops a run there: a configuration a worker gave up on may hang, and is run
in the caller's process only where the limit grew (as ``tunedsl precompile --tune``, which
isolates, keeps the hangs it finds out of the program that reads its records). A record that
states no limits (written before records stated them) counts as one of a smaller limit: its
timeouts are measured once more, and the new record states the limits.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tunedsl import knobs

if TYPE_CHECKING:
    from tunedsl.store.records import ConfigResult, Record

#: The record ``context`` entry stating the limits its timeouts were made under.
LIMITS = "limits"

#: How a timeout's reason reads (``backends/compile_pool.py`` ``CompileTimeout``, and a
#: measurement worker's silence in ``backends/isolated.py``), and the limits that bounded
#: it: a compile, the compile limit; a worker's answer, its answer limit (a request that
#: compiles waits both).
_KINDS = (
    ("compile timed out after", ("compile_s",)),
    ("timeout: no answer after", ("compile_s", "answer_s")),
)


def limits() -> dict[str, float]:
    """The limits this process measures under, in seconds: a compile, a worker's answer."""
    return {"compile_s": knobs.compile_timeout_s(), "answer_s": knobs.isolate_timeout_s()}


def noted() -> dict[str, Any]:
    """The ``context`` entry of a new record: the limits its timeouts were made under."""
    return {LIMITS: limits()}


def bounded_by(reason: str | None) -> tuple[str, ...]:
    """The limits a failure's ``reason`` ran into (empty: not a timeout)."""
    if reason:
        for text, bounds in _KINDS:
            if text in reason:
                return bounds
    return ()


def current(record: Record | None) -> Record | None:
    """``record`` as this process reads it: without the timeouts of a smaller limit."""
    if record is None:
        return None
    now = limits()
    stated = record.context.get(LIMITS)
    kept = tuple(r for r in record.results if not _lifted(r, stated, now))
    return record if len(kept) == len(record.results) else replace(record, results=kept)


def _lifted(result: ConfigResult, stated: Any, now: dict[str, float]) -> bool:
    """Whether ``result`` is a timeout under a limit smaller than this process's (or unknown)."""
    if result.status != "failed":
        return False
    bounds = bounded_by(result.reason)
    if not bounds:
        return False
    if not isinstance(stated, dict):  # a record written before records stated limits
        return True
    return any(_larger(now[name], stated.get(name)) for name in bounds)


def _larger(now: float, then: Any) -> bool:
    """Whether the limit ``now`` exceeds the stated ``then`` (not a number: unknown, taken
    as smaller)."""
    if isinstance(then, bool) or not isinstance(then, (int, float)) or not math.isfinite(then):
        return True
    return now > then
