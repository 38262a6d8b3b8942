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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tunedsl.backends.compile_ahead import CompileAhead, compile_jobs
from tunedsl.backends.compile_pool import default_workers
from tunedsl.backends.hooks import call_pre_hook, call_user, check_named, check_output, hook_args
from tunedsl.backends.inplace import InPlaceWatch, data_arguments, restore_copies, tuple_members
from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.keys import is_tensor
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


class Guard:
    """Snapshots, restores and zeroes arguments by name; ``watch``: in-place ones too."""

    def __init__(
        self, bound: Mapping[str, Any], req: Any, watch: bool = False, kernel: str = ""
    ) -> None:
        from tunedsl.backends import triton as bt

        info = bt.kernel_info(req.kernel)
        # A site checked these names on its call already (with its place in the message);
        # a tuning asked for without a site gets the same check here.
        check_named(bound, req.settings, info, f"tuning {info.qualname}")
        self.hook_bound = bound  # a descriptor stands for its base here, not for hooks
        bound = data_arguments(bound)
        # A tuple's name stands for the tensors in it; a None (optional buffer) is skipped.
        restore_value = tuple_members(req.settings.restore_value, bound)
        reset_to_zero = tuple_members(req.settings.reset_to_zero, bound)
        self.bt = bt
        self.bound = bound
        self.kernel = kernel
        self.zero_names = [n for n in reset_to_zero if bound[n] is not None]
        self.restore = restore_copies({n: bound[n] for n in restore_value if bound[n] is not None})
        self.verify_snapshot: dict[str, Any] = {}
        self.pre_hook = req.settings.pre_hook
        skip = (*restore_value, *reset_to_zero)
        # Every written argument is put back after tuning: an output the first launches
        # write alike may be added into by a later configuration (split-K's atomics where
        # SPLIT > 1, a store where SPLIT == 1), and a hook may write arguments too.
        settings = req.settings
        self.watch = (
            InPlaceWatch(bound, skip, settings.rtol, settings.atol, not settings.tolerance_given)
            if watch
            else None
        )
        self.on_found: Callable[[], Any] | None = None  # told when in-place writes are found

    def snapshot_all(self) -> None:
        """Each tensor argument's values for ``verify=``, sharing the copies taken already."""
        first = self.watch.original if self.watch and not self.watch.seen else {}
        taken = {**first, **self.restore}
        tensors = ((n, v) for n, v in self.bound.items() if is_tensor(v))
        self.verify_snapshot = {n: taken[n] if n in taken else self.bt.clone(v) for n, v in tensors}

    def observe(self) -> None:
        """Before each launch of the tuning: the in-place watch's turn."""
        if self.watch is not None and not self.watch.done:
            self._found(self.watch.before_launch())

    def _found(self, names: list[str]) -> None:
        if not names or self.watch is None:
            return
        from tunedsl.backends.inplace import warn_in_place
        from tunedsl.warn import warn_once

        for name in names:
            self.restore[name] = self.watch.found[name]
        if not self.watch.unsure:  # else restored without being known to be in place
            warn_in_place(self.kernel, names, warn_once)
        if self.on_found is not None:
            self.on_found()

    def before_rep(self, hook_args: Mapping[str, Any] | None = None) -> None:
        self.observe()
        for name, saved in self.restore.items():
            self.bt.copy_into(self.bound[name], saved)
        for name in self.zero_names:
            self.bt.zero(self.bound[name])
        if self.pre_hook is not None:
            call_pre_hook(self.pre_hook, self.hook_bound if hook_args is None else hook_args)

    def restore_all(self) -> None:
        """Every snapshot back where the kernel changed it (a broadcast input, ``expand``ed
        with stride 0, which it cannot have written, cannot be copied into)."""
        for name, saved in self.verify_snapshot.items():
            if name not in self.restore and not self.bt.equal(self.bound[name], saved):
                self.bt.copy_into(self.bound[name], saved)
        for name, saved in self.restore.items():
            self.bt.copy_into(self.bound[name], saved)
        for name in self.zero_names:
            self.bt.zero(self.bound[name])

    def close(self) -> None:
        """After the tuning's last launch: every argument back to the caller's values."""
        try:
            if self.watch is not None:
                found, written = self.watch.finish()
                self._found(found)
                for name, saved in written.items():
                    self.bt.copy_into(self.bound[name], saved)
            self.restore_all()
        finally:  # the copies go now: a kept exception (a notebook's) keeps this guard
            self.restore, self.verify_snapshot, self.watch = {}, {}, None


class Verifier:
    """Compares each configuration's outputs with a reference (see docs/runtime.md)."""

    def __init__(self, req: Any, guard: Guard) -> None:
        self.req = req
        self.guard = guard
        self.reference: dict[str, Any] | None = None
        verify = req.settings.verify
        tensors = [n for n, v in guard.bound.items() if is_tensor(v)]
        if callable(verify):
            guard.snapshot_all()
            inputs = {n: guard.bt.clone(v) if is_tensor(v) else v for n, v in guard.bound.items()}
            expected = call_user(
                verify, inputs, "verify=fn", "fix it: no configuration was measured"
            )
            if not isinstance(expected, Mapping) or not expected:
                raise UsageError(
                    "verify=fn must return a dict {parameter name: expected tensor}, "
                    f"got {type(expected).__name__}"
                )
            self.outputs = [str(n) for n in expected]
            self.reference = dict(expected)
        elif verify is True:
            self.outputs = tensors
        else:  # a tuple's name stands for its tensors
            self.outputs = tuple_members([str(n) for n in verify], guard.bound)
        for name in self.outputs:
            check_output(name, tensors, self.reference, guard.bound, guard.bt)
        if not guard.verify_snapshot:
            guard.snapshot_all()

    def check(
        self, run: Callable[[], Any], hook_args: Mapping[str, Any] | None = None
    ) -> str | None:
        """Run once from the snapshot (after ``pre_hook``); None when outputs agree."""
        self.guard.observe()
        self.guard.restore_all()
        if self.guard.watch is not None:
            self.guard.watch.fresh_start()
        if self.guard.pre_hook is not None:
            hooked = self.guard.hook_bound if hook_args is None else hook_args
            call_pre_hook(self.guard.pre_hook, hooked)
        run()
        self.guard.bt.synchronize()
        outputs = {n: self.guard.bt.clone(self.guard.bound[n]) for n in self.outputs}
        if self.reference is None:
            self.reference = outputs  # the first configuration that finished successfully
            return None
        for name in self.outputs:
            settings = self.req.settings
            problem = self.guard.bt.allclose(
                outputs[name],
                self.reference[name],
                settings.verify_rtol(self.guard.bt.precision(outputs[name])),
                settings.atol,
                exact_ints=not settings.tolerance_given,
            )
            if problem is not None:
                return f"verify: output {name!r} differs from the reference: {problem}"
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
    ) -> None:
        from tunedsl.backends import graph_timing
        from tunedsl.backends import triton as bt
        from tunedsl.backends.triton_launch import launch_jit

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
            with BENCH_LOCK, self._busy():
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
        with BENCH_LOCK, self._busy():
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

    def close(self) -> None:
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
