"""Where a cold tune's wall time goes, measured from outside tunedsl (benchmarks only).

``install()`` wraps two module attributes for the rest of the process; no engine code
changes, and tuning behaves exactly as without it (the wrappers only read the clock):

* ``tunedsl.backends.compile_pool.compile_stream`` (the in-process measurer looks it up at
  each batch): the time the tuning thread spends waiting inside the stream for the next
  compiled configuration, i.e. compiling that measuring did not hide; and each job's
  compile seconds on its worker thread (``CompileJob.seconds``, which the pool records);
* ``tunedsl.backends.graph_timing.make_timer`` (the measurer's timer): the time inside
  ``sample()``, i.e. measuring (the warm-up launch, the timer probe, every race sample with
  its L2 flush and launch overhead), and the launches it timed.

``timeline()`` lists, in seconds since ``reset``, when each stage of the first call ran:
warming Triton's caches, forking the compile workers, each worker job as the tuning
process waits for it, each load of a worker's result, the launcher build, each sample; ``sample_log()`` the
values each sample returned.

``compile_log()`` lists each compile job as the tuning thread got it: its configuration,
its seconds on its worker thread (a forked worker's compile and the load here) and why it
failed, if it did (a kernel over the GPU's shared memory stops early in its worker).
``triton_compiles()`` counts Triton's compiles in this process (a listener on the public
``triton.knobs.compilation.listener``): ``built`` ran the compiler here, ``loaded`` found
the kernel in Triton's cache (a worker's result, or a JIT table miss served from disk).

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
_origin = time.perf_counter()
_events: list[tuple[float, float, str]] = []  # (start, end, what), since _origin
_begun: set[str] = set()  # the spans that have begun since reset
_samples: list[tuple[float, int, list[float]]] = []  # (start, which run, values ms)
_runs: dict[int, int] = {}  # id of a timed run -> its number, in order of first sample
_compiles: list[tuple[dict[str, Any], float, str | None]] = []  # (config, seconds, failure)
_triton = {"built": 0, "loaded": 0}  # Triton's compile() calls in this process


def _span(what: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, recording when each call ran (under ``what``, or its first argument's name)."""

    def spanned(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        _begun.add(what)
        try:
            return fn(*args, **kwargs)
        finally:
            _events.append((start - _origin, time.perf_counter() - _origin, what))

    return spanned


class StackSampler:
    """Samples Python stacks every ``period_s`` until ``stop()``, until a span named
    ``until`` has ended, or (``until="<span> begins"``) until that span has begun: which
    functions the first call's opening spends its time in (a poor man's py-spy; each
    function counted once per sample it is on). ``thread_id``
    None samples every thread, each function named with its thread's name."""

    def __init__(self, thread_id: int | None, until: str, period_s: float = 0.002) -> None:
        import threading

        self.counts: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._until, self._thread_id, self._period = until, thread_id, period_s
        self._worker = threading.Thread(target=self._run, daemon=True)
        self._worker.start()

    def _run(self) -> None:
        import sys
        import threading

        me = threading.get_ident()
        while not self._stop.wait(self._period):
            if self._until.endswith(" begins") and self._until[: -len(" begins")] in _begun:
                return
            if any(w == self._until for _, _, w in list(_events)):
                return
            names = {t.ident: t.name for t in threading.enumerate()}
            frames = sys._current_frames()
            if self._thread_id is not None:
                frames = {self._thread_id: frames.get(self._thread_id)}
            seen = set()
            for ident, frame in frames.items():
                if ident == me:
                    continue
                prefix = "" if self._thread_id is not None else f"{names.get(ident, ident)}|"
                while frame is not None:
                    code = frame.f_code
                    seen.add(f"{prefix}{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}")
                    frame = frame.f_back
            for name in seen:
                self.counts[name] = self.counts.get(name, 0) + 1
            self.samples += 1

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._worker.join()
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:60]
        ms = self._period * 1e3
        return {"samples": self.samples, "top_ms": [(n, round(c * ms)) for n, c in top]}


def sample_log() -> list[tuple[float, int, list[float]]]:
    """Each ``sample`` call since ``reset``: (start s, the run's number, its values in ms).
    Runs are numbered by their first sample; a run is one configuration's launch."""
    return list(_samples)


def timeline() -> list[tuple[float, float, str]]:
    """Each recorded stage as (start s, end s, what), by start."""
    return sorted((round(a, 4), round(b, 4), w) for a, b, w in _events)


class _TimedTimer:
    """A timer that adds the time of each ``sample`` call to the totals; the rest of the
    timer (``kind``, ``settle``, ...) is the wrapped one's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> Any:
        start = time.perf_counter()
        values: list[float] = []
        try:
            values = list(self._inner.sample(run, setup, reps))
            return values
        finally:
            end = time.perf_counter()
            _totals.measure_s += end - start
            _totals.samples += reps
            _events.append((start - _origin, end - _origin, f"sample x{reps}"))
            which = _runs.setdefault(id(run), len(_runs))
            _samples.append((round(start - _origin, 4), which, [round(v, 5) for v in values]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install() -> None:
    """Wrap the compile stream and the timer factory (once per process)."""
    global _installed
    if _installed:
        return
    from tunedsl.backends import compile_pool, graph_timing

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
                failed = item[1] if isinstance(item[1], BaseException) else None
                why = None if failed is None else f"{type(failed).__name__}: {failed}"[:120]
                config = getattr(item[0].config, "as_dict", dict)()
                _compiles.append((config, round(item[0].seconds or 0.0, 4), why))
                yield item
        finally:
            inner.close()  # the consumer stopped early: the pool starts no further job

    def timed_timer(*args: Any, **kwargs: Any) -> Any:
        return _TimedTimer(make_timer(*args, **kwargs))

    compile_pool.compile_stream = timed_stream  # type: ignore[assignment]
    graph_timing.make_timer = timed_timer
    _install_spans()
    install_compile_counter()
    _installed = True


def _install_spans() -> None:
    """The compile path's stages (module attributes looked up at each call)."""
    from tunedsl.backends import compat, compile_processes, process_compile

    compat.warm_compile_caches = _span("warm caches", compat.warm_compile_caches)
    compat.prebuild_launcher = _span("launcher build", compat.prebuild_launcher)
    compile_processes.pool_for = _span("fork workers", compile_processes.pool_for)
    process_compile.compile_variant = _span("load", process_compile.compile_variant)
    run = compile_processes.ForkedWorkers.run
    compile_processes.ForkedWorkers.run = _span("worker job", run)  # type: ignore[method-assign]


def install_compile_counter() -> None:
    """Count Triton's ``compile`` calls in this process (chaining a listener already set)."""
    import triton

    before = triton.knobs.compilation.listener

    def listener(**kwargs: Any) -> None:
        _triton["loaded" if kwargs.get("cache_hit") else "built"] += 1
        if before is not None:
            before(**kwargs)

    triton.knobs.compilation.listener = listener


def triton_compiles() -> dict[str, int]:
    return dict(_triton)


def compile_log() -> list[tuple[dict[str, Any], float, str | None]]:
    return list(_compiles)


def reset() -> None:
    global _totals, _origin
    _totals = Breakdown()
    _origin = time.perf_counter()
    _events.clear()
    _begun.clear()
    _samples.clear()
    _runs.clear()
    _compiles.clear()
    _triton.update(built=0, loaded=0)


def report(wall_s: float) -> dict[str, float]:
    """The totals since ``reset`` (or ``install``), with ``other_s`` = the rest of ``wall_s``."""
    out: dict[str, float] = asdict(_totals)
    out["other_s"] = max(0.0, wall_s - _totals.compile_wait_s - _totals.measure_s)
    return out
