"""Whether a stored timeout still stands (runtime layer).

A configuration that timed out was judged by a limit, not by what it is: it did not compile
within the compile limit (``compile timed out after N s``), or a measurement worker did not
answer within its limit (``timeout: no answer after N s``), both ``TUNEDSL_CONFIG_TIMEOUT``
(default 300 s to compile, 60 s to answer; the compile limit is ``tunedsl precompile
--timeout``'s where that command tunes: ``backends/compile_limit.py``). A record never retries what failed, so a key
tuned once under a tight limit would keep that configuration out for good, whatever the
limit of a later process.

So a record states the limits its timeouts were made under (``context["limits"]``), and a
process under a larger limit reads the record without those timeouts: they are measured
again, the rest of the record's timings reused. Under the same or a smaller limit they stay
out. A record written again with timeouts it kept (not measured again) states no limit
larger than the one they were made under. A worker's silence is measured again only by a site that measures in a worker too
(``isolate=True``, ``tunedsl precompile --tune``): the configuration may hang, and in the
caller's own process nothing would stop it. A record that states no limits (written before
records stated them) keeps its timeouts out, as it did: ``tunedsl cache clear`` measures the
key anew.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
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
_COMPILE, _SILENCE = "compile timed out after", "timeout: no answer after"
_KINDS = ((_COMPILE, ("compile_s",)), (_SILENCE, ("compile_s", "answer_s")))


def limits() -> dict[str, float]:
    """The limits a tuning here measures under, in seconds: a compile (the one in force in
    this thread: ``tunedsl precompile --timeout``, else ``TUNEDSL_CONFIG_TIMEOUT``'s), a
    worker's answer."""
    from tunedsl.backends.compile_limit import compile_limit_s

    return {"compile_s": compile_limit_s(), "answer_s": knobs.isolate_timeout_s()}


def noted(then: Any = None, carried: Iterable[ConfigResult] = ()) -> dict[str, Any]:
    """The ``context`` entry of a new record: the limits its timeouts were made under.
    ``carried``: results kept from a record stating the limits ``then``; where a timeout is
    among them (one not measured again, a worker's silence in a site measuring in its own
    process), no limit is stated larger than the one it was made under, so a later process
    under a larger limit still measures it again."""
    now = limits()
    timed_out = any(r.status == "failed" and bounded_by(r.reason) for r in carried)
    if timed_out and isinstance(then, dict):
        for name, value in now.items():
            if _larger(value, then.get(name)):
                now[name] = float(then[name])
    return {LIMITS: now}


def bounded_by(reason: str | None) -> tuple[str, ...]:
    """The limits a failure's ``reason`` ran into (empty: not a timeout)."""
    if reason:
        for text, bounds in _KINDS:
            if text in reason:
                return bounds
    return ()


def current(
    record: Record | None, isolated: bool, stated: list[Any] | None = None
) -> Record | None:
    """``record`` as this process reads it: without the timeouts of a smaller limit (a
    worker's silence only where the site measures in a worker: ``isolated``). ``stated``
    is given the limits the record states (None: no record), for ``noted``."""
    if stated is not None:
        stated.append(None if record is None else record.context.get(LIMITS))
    if record is None:
        return None
    now = limits()
    stated = record.context.get(LIMITS)
    kept = tuple(r for r in record.results if not _lifted(r, stated, now, isolated))
    return record if len(kept) == len(record.results) else replace(record, results=kept)


def _lifted(result: ConfigResult, stated: Any, now: dict[str, float], isolated: bool) -> bool:
    """Whether ``result`` is a timeout under a stated limit smaller than this process's."""
    if result.status != "failed" or not isinstance(stated, dict):
        return False  # not a failure, or a record written before records stated limits
    bounds = bounded_by(result.reason)
    if not bounds or (_SILENCE in (result.reason or "") and not isolated):
        return False
    return any(_larger(now[name], stated.get(name)) for name in bounds)


def _larger(now: float, then: Any) -> bool:
    """Whether the limit ``now`` exceeds the stated ``then`` (not a finite number: a record
    this process cannot read the limit of, whose timeouts stay out; an int past any float
    included)."""
    if isinstance(then, bool) or not isinstance(then, (int, float)):
        return False
    try:
        return math.isfinite(then) and now > then
    except OverflowError:  # an int past any float (a damaged or forged record)
        return False
