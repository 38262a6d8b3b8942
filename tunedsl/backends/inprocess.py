"""In-process measurement (backends layer): the engine's ``Measurer`` seam in this process.

``InProcessMeasurer`` compiles configurations through the shared compile pool
(``compile_stream``: worker threads, completion order), verifies each against the reference
(``verify=``), warms it up, and times it on the caller's stream with the site's timer. It is
what ``tuner.tune`` measures with unless ``isolate=True`` (``backends/isolated.py``).

Data safety (a tensor descriptor's data is its base tensor): ``restore_value`` arguments
are snapshotted and copied back before every repetition, ``reset_to_zero`` ones zeroed.
Arguments the kernel changes in place unnamed are found over the first launches and
handled like ``restore_value`` (``inplace.py``). With ``verify`` every tensor argument is
snapshotted, and copied back before each check run where the kernel changed it (a
read-only broadcast input is never written). ``close`` restores every snapshot and zeroes
the ``reset_to_zero`` arguments, so the real launch sees the caller's data.

Hooks: ``pre_hook(args)`` runs before every repetition and check; ``post_hook(args,
exception=...)`` (Triton's signature) once per configuration after its check and warm-up,
with the error instead when it does not compile or fit the device, and again with the
error when a later repetition fails; ``args`` are the configuration's (``hooks.hook_args``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tunedsl.backends.compile_ahead import CompileAhead, compile_jobs
from tunedsl.backends.compile_pool import default_workers
from tunedsl.backends.guard import Guard, Verifier
from tunedsl.backends.hooks import hook_args
from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant
from tunedsl.progress import Progress

# One measurement at a time in this process: two sites tuning on two threads would
# otherwise time each other's kernels. A child forked while a thread measured gets a new
# lock (its holder does not exist there); users import it when they take it.
BENCH_LOCK = threading.RLock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: globals().update(BENCH_LOCK=threading.RLock()))
#: Find the arguments a kernel changes in place while tuning (``backends/inplace.py``).
#: A constant, not an option: ``benchmarks/bench_inplace_watch.py`` turns it off to price it.
WATCH_IN_PLACE = True


def per_launch_setup(req: Any) -> bool:
    return bool(req.settings.restore_value or req.settings.reset_to_zero or req.settings.pre_hook)


def reason(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    where = _users_line(err)
    return (f"{type(err).__name__}: {first}" + (f" (at {where})" if where else ""))[:500]


def _users_line(err: BaseException) -> str | None:
    """``file:line: source`` of the innermost frame outside Triton, torch, tunedsl and the
    standard library where ``err`` (or what it was raised from) came from: under the
    interpreter, the kernel's line (Triton's ``InterpreterError`` names only the inner
    error, ``AssertionError('')`` for a ``tl.static_assert`` without a message)."""
    import sysconfig
    import traceback

    packages = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # tunedsl/
    for name in ("triton", "torch"):
        init = getattr(sys.modules.get(name), "__file__", None)
        if init:
            packages.append(os.path.dirname(os.path.abspath(init)))
    packages.append(sysconfig.get_paths()["stdlib"])
    libraries = tuple(os.path.join(path, "") for path in packages)
    seen: set[int] = set()
    inner: BaseException | None = err
    while inner is not None and id(inner) not in seen:  # the innermost cause: the real error
        seen.add(id(inner))
        nxt = inner.__cause__ or (None if inner.__suppress_context__ else inner.__context__)
        if nxt is None:
            break
        inner = nxt
    for exc in (inner, err):
        if exc is None:
            continue
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            name = os.path.abspath(frame.filename)
            if frame.filename.startswith("<") or name.startswith(libraries):
                continue
            return f"{os.path.basename(name)}:{frame.lineno}: {(frame.line or '').strip()}"
    return None


def per_launch_timing(timer: Any) -> None:
    """In-place arguments were found: every launch now restores arguments first, so
    ``timing="auto"`` keeps per-launch timing (as with ``restore_value``)."""
    if hasattr(timer, "per_launch_setup"):
        timer.per_launch_setup = True


class InProcessMeasurer:
    """The ``Measurer`` seam in this process (see the module docstring).

    ``variant_for(config)`` builds a configuration's launch (grid, arguments, options) when
    it is first prepared, so a large space is never turned into variants up front.
    ``progress`` hears of every compile, failure and first measurement. ``settle()`` is the
    auto timer's switch to graph timing after the first batch (a no-op elsewhere).
    """

    def __init__(
        self,
        req: Any,
        variant_for: Callable[[Config], Variant],
        first: Variant,
        progress: Progress | None = None,
        left_out: dict[Config, str] | None = None,
        deaths: dict[Config, int] | None = None,
    ) -> None:
        """``left_out``: configurations failed with their reason, never launched;
        ``deaths``: how many earlier processes died launching each configuration named
        (``measurers._after_a_death``), kept in the in-flight file."""
        from tunedsl.backends import graph_timing
        from tunedsl.backends import triton as bt
        from tunedsl.backends.triton_launch import launch_jit
        from tunedsl.store.inflight import Inflight

        self.bt = bt
        self.req = req
        self.variant_for = variant_for
        self.progress = progress
        self._launch = launch_jit
        self.info = info = bt.kernel_info(req.kernel)
        self.bound = bt.bind_arguments(info, first.args, first.kwargs)
        with BENCH_LOCK:
            self.timer = graph_timing.make_timer(req.settings.timing, per_launch_setup(req))
            self.guard = Guard(self.bound, req, watch=WATCH_IN_PLACE, kernel=info.qualname)
            # A closure over the timer, not a bound method: a guard -> measurer cycle would
            # leave the timer's CUDA graphs to the garbage collector (see close).
            self.guard.on_found = functools.partial(per_launch_timing, self.timer)
            self.verifier = (
                Verifier(req, self.guard) if req.settings.verify not in (None, False) else None
            )
        self.runs: dict[Config, Callable[[], Any]] = {}
        # Per configuration: its hooks' arguments, and the setup before each repetition.
        self.hook_args: dict[Config, dict[str, Any]] = {}
        self.setups: dict[Config, Callable[[], None]] = {}
        self.first_ms: dict[Config, float] = {}
        self.settled = False
        self.ahead: list[CompileAhead] = []  # prefetched batches, oldest first
        self.gpu_s = 0.0  # seconds spent measuring (warm-ups, verification, samples)
        self.left_out = left_out or {}
        self.deaths = {c: n for c, n in (deaths or {}).items() if n > 0}
        # What is being launched, on disk: a crash in a launch leaves it for the next run,
        # with the earlier deaths this tuning knows of.
        earlier = [{"config": c.to_json(), "deaths": n} for c, n in self.deaths.items()]
        digest = getattr(req, "key_digest", "")
        self.inflight = Inflight(digest, earlier) if digest else None
        if self.inflight is not None:  # on disk before the first launch (a kill while compiling)
            self.inflight.done()

    @property
    def compile_workers(self) -> int:
        """How many configurations compile at once (the search driver sizes batches by it)."""
        return default_workers()

    @property
    def timer_kind(self) -> str:
        return str(self.timer.kind)

    def _runner(self, v: Variant) -> Callable[[], Any]:
        options = {**v.kwargs, **v.options}
        kernel, launch = self.req.kernel, self._launch
        return lambda: launch(kernel, v.grid, v.args, options)

    def _post(self, config: Config, error: BaseException | None) -> None:
        if self.req.settings.post_hook is not None:  # Triton's hook signature
            self.req.settings.post_hook(self.hook_args.get(config, self.bound), exception=error)

    def _setup(self, v: Variant) -> Callable[[], None]:
        args = self.hook_args[v.config] = hook_args(self.info, v, self.req.settings.hints)
        guard = self.guard
        setup = self.setups[v.config] = lambda: guard.before_rep(args)
        return setup

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Start compiling one of the driver's next batches while this one is measured (the
        driver calls it for strategies whose next batch does not depend on this one's
        results; several batches may be compiling at once, in the shared compile pool)."""
        variants = []
        for config in configs:
            try:
                variants.append(self.variant_for(config))
            except Exception:  # reported when the batch is prepared
                continue
        if variants:  # started by the next prepare, with what else is in flight
            self.ahead.append(CompileAhead(self.req.kernel, variants))

    def cancel_ahead(self) -> None:
        """The search raced its last batch: what was prefetched and not taken starts no
        further compile (the final race is not measured beside them)."""
        for batch in self.ahead:
            batch.cancel()
        self.ahead = []

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        from tunedsl.model.hints import InfeasibleConfig

        wanted = set(configs)
        ahead = [a for a in self.ahead if a.configs & wanted]
        self.ahead = [a for a in self.ahead if not a.configs & wanted]
        early = {c for a in ahead for c in a.configs & wanted}
        variants = []
        for config in configs:
            if config in early:
                continue
            if config in self.left_out:
                yield self._failed(config, "failed", self.left_out[config])
                continue
            try:
                variants.append(self.variant_for(config))
            except InfeasibleConfig as err:  # its launch hints do not fit this device
                self._post(config, err)
                yield self._failed(config, "failed", str(err))
        # The batches announced ahead compile beside this one, in one pool sized for every
        # configuration in flight (at most a process a compile slot: variant_compiler).
        in_flight = [*ahead, *self.ahead]
        shared_by = len(variants) + sum(len(batch.configs) for batch in in_flight)
        for batch in in_flight:
            batch.start(shared_by)
        compiled = compile_jobs(self.req.kernel, variants, shared_by=shared_by)
        if ahead:
            taken = (a.take(a.configs & wanted) for a in ahead)
            compiled = itertools.chain(*taken, compiled)
        try:
            yield from self._open(compiled)
        finally:  # a budget that ends the race inside these batches: no further compile
            for batch in ahead:
                batch.cancel()

    def _open(self, compiled: Iterator[tuple[Variant, Any]]) -> Iterator[Prepared]:
        """Each compiled variant verified and warmed up (a failure is its ``Prepared``)."""
        for v, handle in compiled:
            if isinstance(handle, BaseException):
                if isinstance(handle, KeyboardInterrupt):
                    raise handle
                self.hook_args[v.config] = hook_args(self.info, v, self.req.settings.hints)
                self._post(v.config, handle)
                yield self._failed(v.config, "failed", "compile: " + reason(handle))
                continue
            if self.progress is not None:
                self.progress.compiled(v.config)
            run = self._runner(v)
            setup = self._setup(v)
            error: BaseException | None = None
            problem: str | None = None
            with BENCH_LOCK, self._busy(), self._launching(v.config):
                try:
                    if self.verifier is not None:
                        problem = self.verifier.check(run, self.hook_args[v.config])
                    if problem is None:
                        self.timer.sample(run, setup, 1)  # warm-up, discarded
                except UsageError:  # a mistake in the call (or a hook), not in a configuration
                    raise
                except Exception as err:  # a configuration may fail at run time
                    error = err
                    if self.guard.watch is not None:  # not a launch the watch compares
                        self.guard.watch.failed()
                finally:
                    self._post(v.config, error)
            if problem is not None:
                yield self._failed(v.config, "rejected", problem)
            elif error is not None:
                yield self._failed(v.config, "failed", "run: " + reason(error))
            else:
                self.runs[v.config] = run
                yield Prepared(v.config)

    def _failed(self, config: Config, status: str, why: str) -> Prepared:
        if self.progress is not None:
            self.progress.failed(config, why)
        return Prepared(config, status, why)

    def sample(self, config: Config, reps: int) -> list[float]:
        run = self.runs.get(config)
        if run is None:  # prepared by an earlier process (a stored leader): prepare it now
            for prep in self.prepare([config]):
                if prep.error is not None:
                    raise MeasureFailure(prep.error.removeprefix("run: "))
            run = self.runs[config]
        setup = self.setups[config]
        with BENCH_LOCK, self._busy(), self._launching(config):
            try:
                if not self.settled and hasattr(self.timer, "settle"):
                    self._choose_timer(run, setup)
                samples = list(self.timer.sample(run, setup, reps))
            except UsageError:
                raise
            except Exception as err:
                if self.guard.watch is not None:  # not a launch the watch compares
                    self.guard.watch.failed()
                self._post(config, err)
                raise MeasureFailure(reason(err)) from err
        if config not in self.first_ms and samples:
            self.first_ms[config] = statistics.median(samples)
            if self.progress is not None:
                self.progress.measured(config, self.first_ms[config])
        return samples

    def _choose_timer(self, run: Any, setup: Callable[[], None]) -> None:
        """timing="auto", before the first sample: a short probe with events decides, once
        for the whole tuning, whether every sample is graph-timed (a kernel this short
        would be ranked by its launch overhead). Samples of one tuning never mix timers:
        graph-timed leaders against event-timed rivals once chose a configuration 25%
        slower (rmsnorm on the H100)."""
        self.settled = True
        # The fastest of five: the first launches of a fresh process can be slow for reasons
        # that are not the kernel's (clocks ramping up), and a slow probe means events.
        probe = self.timer.sample(run, setup, 5)
        self.timer.settle([min(probe)])

    def settle(self) -> None:
        """The timer is chosen before the first sample (``_choose_timer``): nothing left."""

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.gpu_s += time.perf_counter() - start

    @contextlib.contextmanager
    def _launching(self, config: Config) -> Iterator[None]:
        """``config`` is launched within: on disk meanwhile (``store/inflight.py``)."""
        if self.inflight is None:
            yield
            return
        self.inflight.trying(config.to_json(), self.deaths.get(config, 0))
        try:
            yield
        finally:
            self.inflight.done()

    def close(self) -> None:
        if self.inflight is not None:
            self.inflight.close()
        # The next tuning's plan of how many GPUs to use learns from this one (bookkeeping:
        # never a reason for closing to fail, say after a sticky CUDA error).
        with contextlib.suppress(Exception):
            if self.runs:
                from tunedsl.backends import device_plan

                model = device_plan.model_name(self.bt.device_facts())
                seconds = self.gpu_s / len(self.runs)
                device_plan.observe(model, measure_s=seconds, configs=len(self.runs))
        self.cancel_ahead()
        with BENCH_LOCK:
            self.bt.synchronize()
            if self.verifier is not None:  # its reference outputs: copies too
                self.verifier.reference = None
            self.guard.close()
            self.bt.synchronize()
            # The timer's CUDA graphs go now, not at a later garbage collection: the
            # collector can run inside the program's own CUDA-graph capture, where
            # destroying a graph invalidates that capture.
            close_timer = getattr(self.timer, "close", None)
            if close_timer is not None:
                close_timer()
