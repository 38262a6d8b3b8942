"""Where a cold tune's wall time goes, measured from outside tunedsl (benchmarks only).

``install()`` wraps two module attributes for the rest of the process; no engine code
changes, and tuning behaves exactly as without it (the wrappers only read the clock):

* ``tunedsl.engine.compile_pool.compile_stream`` (the in-process measurer looks it up at
  each batch): the time the tuning thread spends waiting inside the stream for the next
  compiled configuration, i.e. compiling that measuring did not hide; and each job's
  compile seconds on its worker thread (``CompileJob.seconds``, which the pool records);
* ``tunedsl.backends.graph_timing.make_timer`` (the measurer's timer): the time inside
  ``sample()``, i.e. measuring (the warm-up launch, the timer probe, every race sample with
  its L2 flush and launch overhead), and the launches it timed.

``report(wall_s)`` splits the first call's wall time into ``compile_wait_s``,
``measure_s`` and ``other_s`` (the rest: the key, building variants, the search's own
Python, the record, the final launch). Compiling runs on worker threads beside measuring,
so ``compile_thread_s`` (the sum over compiles) can exceed the wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Breakdown:
    compile_wait_s: float = 0.0
    measure_s: float = 0.0
    compile_thread_s: float = 0.0
    compiles: int = 0
    samples: int = 0  # launches timed (warm-ups and probes included)


_totals = Breakdown()
_installed = False


class _TimedTimer:
    """A timer that adds the time of each ``sample`` call to the totals; the rest of the
    timer (``kind``, ``settle``, ...) is the wrapped one's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> Any:
        start = time.perf_counter()
        try:
            return self._inner.sample(run, setup, reps)
        finally:
            _totals.measure_s += time.perf_counter() - start
            _totals.samples += reps

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install() -> None:
    """Wrap the compile stream and the timer factory (once per process)."""
    global _installed
    if _installed:
        return
    from tunedsl.backends import graph_timing
    from tunedsl.engine import compile_pool

    stream = compile_pool.compile_stream
    make_timer = graph_timing.make_timer

    def timed_stream(jobs: Any, **options: Any) -> Iterator[tuple[Any, Any]]:
        inner = stream(jobs, **options)
        try:
            while True:
                start = time.perf_counter()
                try:
                    item = next(inner)
                except StopIteration:
                    return
                finally:
                    _totals.compile_wait_s += time.perf_counter() - start
                _totals.compiles += 1
                _totals.compile_thread_s += item[0].seconds or 0.0
                yield item
        finally:
            inner.close()  # the consumer stopped early: the pool starts no further job

    def timed_timer(*args: Any, **kwargs: Any) -> Any:
        return _TimedTimer(make_timer(*args, **kwargs))

    compile_pool.compile_stream = timed_stream  # type: ignore[assignment]
    graph_timing.make_timer = timed_timer
    _installed = True


def reset() -> None:
    global _totals
    _totals = Breakdown()


def report(wall_s: float) -> dict[str, float]:
    """The totals since ``reset`` (or ``install``), with ``other_s`` = the rest of ``wall_s``."""
    out: dict[str, float] = asdict(_totals)
    out["other_s"] = max(0.0, wall_s - _totals.compile_wait_s - _totals.measure_s)
    return out
