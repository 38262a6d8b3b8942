"""The tuner: compile candidates in parallel, benchmark each as it finishes, choose honestly.

Pipeline: ``compile_stream`` compiles every variant on worker threads and yields them in
completion order; the caller's thread verifies and measures each finished variant while
the rest still compile. Then the leaders are re-measured (``choose.choose``).

Data safety: arguments named in ``restore_value`` are snapshotted first and copied back
before every repetition; ``reset_to_zero`` arguments are zeroed before every repetition.
With ``verify`` every tensor argument is snapshotted and restored before each
configuration's check run. When tuning ends, all snapshots are restored and the
``reset_to_zero`` arguments zeroed, so the real launch sees the caller's data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedsl.engine import bench, choose
from tunedsl.engine.twins import interpreter_twins
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config
from tunedsl.model.keys import is_tensor, json_safe
from tunedsl.model.variant import Variant
from tunedsl.progress import Progress
from tunedsl.store.records import ConfigResult

# One measurement at a time in this process: two sites tuning on two threads would
# otherwise time each other's kernels.
BENCH_LOCK = threading.RLock()


@dataclass
class TuneRequest:
    kernel: Any
    variants: list[Variant]  # candidates, in space order
    infeasible: dict[Config, str] = field(default_factory=dict)  # dropped before compiling
    previous: dict[Config, ConfigResult] = field(default_factory=dict)  # from a stale record
    restore_value: Sequence[str] = ()
    reset_to_zero: Sequence[str] = ()
    verify: Any = None  # None/False, True, [names], or callable(inputs) -> {name: expected}
    rtol: float = 1e-3
    atol: float = 1e-3
    pre_hook: Callable[[dict[str, Any]], Any] | None = None
    post_hook: Callable[..., Any] | None = None  # post_hook(args, exception=err or None)
    effort: str = "default"
    isolate: bool = False  # measure in a worker process (backends/isolated.py)
    timing: str = "auto"  # timer mode on a GPU: "auto", "graph" or "events"


@dataclass
class TuneOutcome:
    chosen: Config
    results: list[ConfigResult]
    tuning_s: float
    timer: str
    measured: int  # configurations measured in this process (not taken from a record)


def _per_launch_setup(req: TuneRequest) -> bool:
    return bool(req.restore_value or req.reset_to_zero or req.pre_hook)


def _reason(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(err).__name__}: {first}"[:500]


class _Guard:
    """Snapshots, restores and zeroes arguments by parameter name."""

    def __init__(self, bound: Mapping[str, Any], req: TuneRequest) -> None:
        names = set(bound)
        for option in ("restore_value", "reset_to_zero"):
            for name in getattr(req, option):
                if name not in names:
                    raise UsageError(
                        f"{option}: {name!r} is not a parameter of the kernel; its parameters "
                        f"are: {', '.join(bound)}"
                    )
                if bound[name] is not None and not is_tensor(bound[name]):
                    raise UsageError(f"{option}: argument {name!r} is not a tensor")
        from tunedsl.backends import triton as bt

        self.bt = bt
        self.bound = bound
        # An optional buffer passed as None is skipped (as Triton does).
        self.zero_names = [n for n in req.reset_to_zero if bound[n] is not None]
        self.restore = {n: bt.clone(bound[n]) for n in req.restore_value if bound[n] is not None}
        self.verify_snapshot: dict[str, Any] = {}
        self.pre_hook = req.pre_hook

    def snapshot_all(self) -> None:
        self.verify_snapshot = {n: self.bt.clone(v) for n, v in self.bound.items() if is_tensor(v)}

    def before_rep(self) -> None:
        for name, saved in self.restore.items():
            self.bt.copy_into(self.bound[name], saved)
        for name in self.zero_names:
            self.bt.zero(self.bound[name])
        if self.pre_hook is not None:
            self.pre_hook(dict(self.bound))

    def restore_all(self) -> None:
        for name, saved in self.verify_snapshot.items():
            self.bt.copy_into(self.bound[name], saved)
        for name, saved in self.restore.items():
            self.bt.copy_into(self.bound[name], saved)
        for name in self.zero_names:
            self.bt.zero(self.bound[name])


class _Verifier:
    """Compares each configuration's outputs with a reference (see docs/runtime.md)."""

    def __init__(self, req: TuneRequest, guard: _Guard) -> None:
        self.req = req
        self.guard = guard
        self.reference: dict[str, Any] | None = None
        verify = req.verify
        tensors = [n for n, v in guard.bound.items() if is_tensor(v)]
        if callable(verify):
            guard.snapshot_all()
            inputs = {n: guard.bt.clone(v) if is_tensor(v) else v for n, v in guard.bound.items()}
            expected = verify(inputs)
            if not isinstance(expected, Mapping) or not expected:
                raise UsageError(
                    "verify=fn must return a dict {parameter name: expected tensor}, "
                    f"got {type(expected).__name__}"
                )
            self.outputs = [str(n) for n in expected]
            self.reference = dict(expected)
        elif verify is True:
            self.outputs = tensors
        else:
            self.outputs = [str(n) for n in verify]
        for name in self.outputs:
            if name not in tensors:
                raise UsageError(
                    f"verify: {name!r} is not a tensor parameter of the kernel; tensor "
                    f"parameters are: {', '.join(tensors)}"
                )
        if not guard.verify_snapshot:
            guard.snapshot_all()

    def check(self, run: Callable[[], Any]) -> str | None:
        """Run once from the snapshot; None when the outputs agree with the reference."""
        self.guard.restore_all()
        run()
        self.guard.bt.synchronize()
        outputs = {n: self.guard.bt.clone(self.guard.bound[n]) for n in self.outputs}
        if self.reference is None:
            self.reference = outputs  # the first configuration that finished successfully
            return None
        for name in self.outputs:
            problem = self.guard.bt.allclose(
                outputs[name], self.reference[name], self.req.rtol, self.req.atol
            )
            if problem is not None:
                return f"verify: output {name!r} differs from the reference: {problem}"
        return None


def _compile_jobs(req: TuneRequest, todo: list[Variant]) -> Iterator[tuple[Variant, Any]]:
    """(variant, handle or exception) in completion order, through the shared compile pool."""
    from tunedsl.backends.triton import interpreting

    if interpreting():  # nothing to compile ahead: the interpreter runs the Python source
        for v in todo:
            yield v, None
        return
    from tunedsl.backends.triton_compile import compile_variant
    from tunedsl.engine.compile_pool import CompileJob, compile_stream

    by_id: dict[int, Variant] = {}
    jobs = []
    for v in todo:

        def compile_one(v: Variant = v) -> object:
            return compile_variant(req.kernel, v.args, v.kwargs, v.options)

        job = CompileJob(v.config, compile_one)
        by_id[id(job)] = v
        jobs.append(job)
    for job, result in compile_stream(jobs):
        yield by_id[id(job)], result


def constexpr_values(variant: Variant, constexpr_names: frozenset[str]) -> dict[str, Any]:
    return {n: json_safe(v) for n, v in variant.kwargs.items() if n in constexpr_names}


def check_choice(req: TuneRequest) -> str | None:
    """Verify one decision this process did not tune: run ``req.variants[-1]`` (after the
    reference ``req.variants[0]`` unless verify= is a function) from the same inputs and
    compare; None when it agrees. The caller's data is restored afterwards."""
    from tunedsl.backends import triton as bt
    from tunedsl.backends.triton_launch import launch_jit

    info = bt.kernel_info(req.kernel)
    first_variant = req.variants[0]
    bound = bt.bind_arguments(info, first_variant.args, first_variant.kwargs)
    with BENCH_LOCK:
        guard = _Guard(bound, req)
        verifier = _Verifier(req, guard)
        problem: str | None = None
        try:
            for v in req.variants:
                options = {**v.kwargs, **v.options}
                error: BaseException | None = None

                def run(v: Variant = v, options: dict[str, Any] = options) -> Any:
                    return launch_jit(req.kernel, v.grid, v.args, options)

                try:
                    problem = verifier.check(run)
                except UsageError:
                    raise
                except Exception as err:
                    error = err
                    problem = "run: " + _reason(err)
                finally:
                    if req.post_hook is not None:
                        req.post_hook(bound, exception=error)
                if problem is not None:
                    break
        finally:
            guard.restore_all()
            bt.synchronize()
    return problem


def tune(req: TuneRequest) -> TuneOutcome:
    from tunedsl.backends import triton as bt
    from tunedsl.backends.triton_launch import launch_jit

    start = time.perf_counter()
    info = bt.kernel_info(req.kernel)
    if not req.variants:
        raise TuningError(
            "nothing to tune: every configuration was dropped",
            {repr(c): why for c, why in req.infeasible.items()},
        )
    if req.isolate:  # a worker process measures; a crash or hang there fails one config
        from tunedsl.backends.isolated import tune_isolated

        with BENCH_LOCK:
            winner, final, failed, kind, measured = tune_isolated(req)
        return _outcome(req, info, winner, final, failed, kind, start, measured)
    first_variant = req.variants[0]
    bound = bt.bind_arguments(info, first_variant.args, first_variant.kwargs)
    from tunedsl.backends import graph_timing

    with BENCH_LOCK:
        timer = graph_timing.make_timer(req.timing, _per_launch_setup(req))
        effort = bench.effort_for(req.effort, timer.kind)
        guard = _Guard(bound, req)
        verifier = _Verifier(req, guard) if req.verify not in (None, False) else None

        def runner(v: Variant) -> Callable[[], Any]:
            options = {**v.kwargs, **v.options}
            return lambda: launch_jit(req.kernel, v.grid, v.args, options)

        def sampler(v: Variant) -> choose.Sampler:
            run = runner(v)
            return lambda reps: timer.sample(run, guard.before_rep, reps)

        failures: dict[Config, tuple[str, str]] = {
            c: ("failed", r) for c, r in req.infeasible.items()
        }
        first: dict[Config, bench.Timing] = {}
        samplers: dict[Config, choose.Sampler] = {}
        todo: list[Variant] = []
        for v in req.variants:
            old = req.previous.get(v.config)
            if old is None:
                todo.append(v)
            elif old.status == "ok":
                assert old.median_ms is not None
                first[v.config] = bench.Timing(
                    old.median_ms, old.spread or 0.0, old.reps or 0, old.min_ms or old.median_ms
                )
                samplers[v.config] = sampler(v)  # compiled by the JIT on first use
            else:
                failures[v.config] = (old.status, old.reason or "failed earlier")
        twins: dict[Config, Config] = {}
        if bt.interpreting():  # launch hints change nothing there: measure each twin once
            todo, twins = interpreter_twins(todo)
        progress = Progress(info.qualname, len(todo))
        chosen: tuple[Config, float] | None = None  # for the progress summary
        try:
            for v, handle in _compile_jobs(req, todo):
                if isinstance(handle, BaseException):
                    if isinstance(handle, KeyboardInterrupt):
                        raise handle
                    failures[v.config] = ("failed", "compile: " + _reason(handle))
                    progress.failed(v.config, failures[v.config][1])
                    continue
                progress.compiled(v.config)
                run = runner(v)
                error: BaseException | None = None
                try:
                    if verifier is not None:
                        problem = verifier.check(run)
                        if problem is not None:
                            failures[v.config] = ("rejected", problem)
                            progress.failed(v.config, problem)
                            continue
                    first[v.config], _ = bench.measure(run, guard.before_rep, timer, effort)
                    samplers[v.config] = sampler(v)
                    progress.measured(v.config, first[v.config].median_ms)
                except UsageError:  # a mistake in the call (or a hook), not in a configuration
                    raise
                except Exception as err:  # a configuration may fail at run time
                    error = err
                    failures[v.config] = ("failed", "run: " + _reason(err))
                    progress.failed(v.config, failures[v.config][1])
                finally:
                    if req.post_hook is not None:
                        req.post_hook(bound, exception=error)  # Triton's hook signature
            if not first:
                from tunedsl.autointerp import no_driver_message

                hint = no_driver_message([why for _, why in failures.values()])
                raise TuningError(
                    f"every configuration of {info.qualname} failed"
                    + (f": {hint}" if hint else ""),
                    {repr(c): why for c, (_, why) in failures.items()},
                )
            settle = getattr(timer, "settle", None)
            if settle is not None:  # timing="auto": graph-time the leaders of a short kernel
                settle([t.median_ms for t in first.values()])
            winner, final = choose.choose(first, samplers, effort)
            chosen = (winner, final[winner].median_ms)
            remeasured = {c for c, t in final.items() if t is not first.get(c)}
            for twin, representative in twins.items():
                if representative in final:
                    final[twin] = final[representative]
                elif representative in failures:
                    failures[twin] = failures[representative]
        finally:
            progress.finish(*(chosen or (None, None)))
            guard.restore_all()
            bt.synchronize()
    return _outcome(
        req, info, winner, final, failures, timer.kind, start, len(todo), remeasured, twins
    )


def _outcome(
    req: TuneRequest,
    info: Any,
    winner: Config,
    final: Mapping[Config, bench.Timing],
    failures: Mapping[Config, tuple[str, str]],
    timer_kind: str,
    start: float,
    measured: int,
    remeasured: set[Config] | frozenset[Config] = frozenset(),
    twins: Mapping[Config, Config] | None = None,
) -> TuneOutcome:
    twins = twins or {}
    results = []
    for v in req.variants:
        cexpr = constexpr_values(v, info.constexpr_names)
        if v.config in final:
            t = final[v.config]
            results.append(
                ConfigResult(
                    v.config,
                    "ok",
                    t.median_ms,
                    t.spread,
                    t.reps,
                    t.min_ms,
                    # Kept in memory only (records store reasons of failures): lets the
                    # printed table mark the leaders whose time is a re-measurement.
                    reason=(
                        "re-measured"
                        if v.config in remeasured
                        else (
                            f"interpreter: timed as {twins[v.config]}"
                            if v.config in twins
                            else None
                        )
                    ),
                    options=dict(v.options),
                    constexprs=cexpr,
                )
            )
        elif v.config in failures:
            status, why = failures[v.config]
            results.append(
                ConfigResult(
                    v.config, status, reason=why, options=dict(v.options), constexprs=cexpr
                )
            )
    for cfg, why in req.infeasible.items():
        if not any(r.config == cfg for r in results):
            results.append(ConfigResult(cfg, "failed", reason=why))
    return TuneOutcome(
        chosen=winner,
        results=results,
        tuning_s=time.perf_counter() - start,
        timer=timer_kind,
        measured=measured,
    )
