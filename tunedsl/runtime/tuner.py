"""The tuner (tuning layer): a site's miss, tuned through the search engine.

``tune`` runs ``engine.driver.run_search``: the strategy (``search=``: exhaustive with racing
on small spaces by default) proposes batches, the measurer (``backends/measurers.py``: in
this process, or a worker with ``isolate=True``) compiles, verifies and times them, racing
spends repetitions only where they can change the choice, and the observations become the
record's results (with the round each was measured in, and the strategy, seed and budget).
A stored record's results are the search's history: what failed is never tried again, what
was measured is measured again only as a leader, and a larger budget continues the search.

The measurer owns data safety (``restore_value``, ``reset_to_zero``, ``verify``, hooks:
``backends/inprocess.py``); this module is orchestration only.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.engine.driver import SearchEvent, SearchOutcome, run_search
from tunedsl.engine.effort import search_budget, search_effort
from tunedsl.engine.history import observations_from_results, results_from_observations
from tunedsl.engine.racing import RaceSettings
from tunedsl.engine.request import TuneRequest
from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.engine.search import make_strategy
from tunedsl.engine.twins import interpreter_twins, options_reach_kernel
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config
from tunedsl.model.keys import readable_constexpr
from tunedsl.model.space import ListSpace
from tunedsl.model.variant import Variant
from tunedsl.progress import Progress
from tunedsl.runtime import mistakes
from tunedsl.store.records import ConfigResult

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo
    from tunedsl.engine.seams import SearchSpace

# Under the interpreter a launch takes milliseconds of CPU: a race of 1 + 1 up to 3 reps.
INTERPRETER_RACE = RaceSettings(first_reps=1, more_reps=1, max_reps=3, reopen_within=0.0)


@dataclass
class TuneOutcome:
    chosen: Config
    results: list[ConfigResult]
    tuning_s: float
    timer: str
    measured: int  # configurations measured in this process (not taken from a record)
    strategy: str = "exhaustive"  # as resolved ("auto:exhaustive")
    seed: int = 0
    budget_s: float | None = None
    compiled: int = 0  # configurations prepared (compiled) in this process


def constexpr_values(
    kernel: Any, variant: Variant, constexpr_names: frozenset[str]
) -> dict[str, Any]:
    """A configuration's constexprs for its record, with those ``@triton.heuristics``
    compute for it: a replay compiles the configuration from them alone."""
    from tunedsl.backends.compat import with_heuristics

    kwargs = variant.kwargs
    try:
        kwargs = with_heuristics(kernel, variant.args, kwargs, variant.options, variant.grid)
    except Exception:  # the launch raises it too: the configuration failed
        pass
    # A Triton function (an epilogue) by name and digest, as the key has it: replay finds it
    # again in the kernel's module (its repr is an address).
    return {n: readable_constexpr(v) for n, v in kwargs.items() if n in constexpr_names}


def recorded_options(variant: Variant) -> dict[str, Any]:
    """A configuration's launch options for its record: its hints, and a keyword argument
    named like a Triton option (tutorial 02's ``num_stages=`` for a parameter of that name),
    which Triton's launch compiles with as well; replay compiles with what this holds."""
    from tunedsl.backends.compat import launch_option_names

    names = launch_option_names()
    passed = {
        k: v
        for k, v in variant.kwargs.items()
        if k in names and isinstance(v, bool | int | float | str)
    }
    return {**passed, **variant.options}


def check_choice(req: TuneRequest) -> str | None:
    """Verify one decision this process did not tune: run ``req.variants[-1]`` (after the
    reference ``req.variants[0]`` unless verify= is a function) from the same inputs and
    compare; None when it agrees. The caller's data is restored afterwards."""
    from tunedsl.backends import triton as bt
    from tunedsl.backends.compile_temporaries import keep_temporaries_private
    from tunedsl.backends.guard import Guard, Verifier
    from tunedsl.backends.hooks import hook_args
    from tunedsl.backends.inprocess import BENCH_LOCK, reason
    from tunedsl.backends.triton_launch import launch_jit

    info = bt.kernel_info(req.kernel)
    first_variant = req.variants[0]
    bound = bt.bind_arguments(info, first_variant.args, first_variant.kwargs)
    with BENCH_LOCK:
        guard = Guard(bound, req)
        verifier = Verifier(req, guard)
        problem: str | None = None
        try:
            for v in req.variants:
                options = {**v.kwargs, **v.options}
                args = hook_args(info, v, req.settings.hints)
                error: BaseException | None = None

                def run(v: Variant = v, options: dict[str, Any] = options) -> object:
                    keep_temporaries_private()  # compiled here, by the launch
                    return launch_jit(req.kernel, v.grid, v.args, options)

                try:
                    problem = verifier.check(run, args)
                except UsageError:
                    raise
                except Exception as err:
                    error = err
                    problem = "run: " + reason(err)
                finally:
                    if req.settings.post_hook is not None:
                        req.settings.post_hook(args, exception=error)
                if problem is not None:
                    break
        except BaseException as err:
            _cleanup(guard.restore_after_tuning, err)
            raise
        guard.restore_after_tuning()
        bt.synchronize()
    return problem


def _cleanup(step: Callable[[], object], leaving: BaseException) -> None:
    """A cleanup ``step`` while ``leaving`` is on its way out: a failing cleanup is added
    to it as a note, never raised in its place (it would hide the real error)."""
    from tunedsl.backends.inprocess import reason

    try:
        step()
    except Exception as err:
        note = f"tunedsl: restoring the arguments afterwards failed too: {reason(err)}"
        add_note = getattr(leaving, "add_note", None)  # Python 3.11+
        if add_note is not None:
            add_note(note)
        else:
            leaving.__notes__ = [*getattr(leaving, "__notes__", ()), note]  # type: ignore[attr-defined]


def _race(req: TuneRequest) -> RaceSettings:
    from tunedsl.backends import triton as bt

    return INTERPRETER_RACE if bt.interpreting() else search_effort(req.settings.effort).race


def _budget(req: TuneRequest, size: int) -> float | None:
    return search_budget(req.settings.budget_s, req.settings.search, req.settings.effort, size)


def tune(req: TuneRequest) -> TuneOutcome:
    from tunedsl.backends import triton as bt

    start = time.perf_counter()
    info = bt.kernel_info(req.kernel)
    if req.settings.space is not None:
        return _tune_lazy(req, info, start)
    if not req.variants:
        raise TuningError(
            "nothing to tune: every configuration was dropped",
            {repr(c): why for c, why in req.infeasible.items()},
        )
    by_config = {v.config: v for v in req.variants}
    todo = [v for v in req.variants if v.config not in req.previous]
    twins: dict[Config, Config] = {}
    if bt.interpreting() and not options_reach_kernel(req.kernel):
        # launch hints change nothing there: measure each twin once
        _, twins = interpreter_twins(todo)
    space = ListSpace([v.config for v in req.variants if v.config not in twins])
    outcome, timer = _search(req, info, space, by_config.__getitem__, req.variants[0],
                             len(todo) - len(twins))  # fmt: skip
    return _tune_outcome(outcome, timer, _results(req, info, outcome, twins), start)


def _tune_lazy(req: TuneRequest, info: KernelInfo, start: float) -> TuneOutcome:
    """A space never listed: variants are built as the strategy proposes configurations."""
    space, make = req.settings.space, req.variant_for
    assert space is not None and make is not None
    if req.settings.isolate:
        raise UsageError(
            "isolate=True needs a space of at most a few thousand configurations (the "
            "worker gets every variant up front); tune this space with isolate=False"
        )
    cache: dict[Config, Variant] = {}

    def variant_for(config: Config) -> Variant:
        v = cache.get(config)
        if v is None:
            v = cache[config] = make(config)
        return v

    first = space.first_valid()  # bounded: a constraint rejecting everything is an error
    outcome, timer = _search(req, info, space, variant_for, variant_for(first), 0)

    def extras(config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
        v = variant_for(config)
        return recorded_options(v), constexpr_values(req.kernel, v, info.constexpr_names)

    results = [
        _with_round(r, outcome)
        for r in results_from_observations(outcome.observations, extras, req.previous.values())
    ]
    return _tune_outcome(outcome, timer, results, start)


def _tune_outcome(
    outcome: SearchOutcome, timer: str, results: list[ConfigResult], start: float
) -> TuneOutcome:
    return TuneOutcome(
        chosen=outcome.chosen,
        results=results,
        tuning_s=time.perf_counter() - start,
        timer=timer,
        measured=outcome.measured,
        strategy=outcome.strategy,
        seed=outcome.seed,
        budget_s=outcome.budget_s,
        compiled=outcome.compiled,
    )


def _with_round(r: ConfigResult, outcome: SearchOutcome) -> ConfigResult:
    o = next(o for o in outcome.observations if o.config == r.config)
    return dataclasses.replace(r, round=o.round if o.samples or o.status != "ok" else r.round)


def _search(
    req: TuneRequest,
    info: KernelInfo,
    space: SearchSpace,
    variant_for: Callable[[Config], Variant],
    first: Variant,
    total: int,
) -> tuple[SearchOutcome, str]:
    """run_search through the request's measurer, under BENCH_LOCK, with progress."""
    from tunedsl.backends import triton as bt
    from tunedsl.backends.hooks import reset_only_pre_hook
    from tunedsl.backends.inprocess import BENCH_LOCK
    from tunedsl.backends.measurers import make_measurer

    history = observations_from_results(r for c, r in req.previous.items() if c in space)
    effort = search_effort(req.settings.effort)
    race = INTERPRETER_RACE if bt.interpreting() else effort.race
    size = space.size_hint()
    budget = _budget(req, size)
    strategy = make_strategy(req.settings.search, req.settings.seed)
    points = None if isinstance(space, ListSpace) else size
    progress = Progress(info.qualname, total, points=points)
    chosen: tuple[Config, float | None] | None = None  # for the progress summary
    prune = req.keep
    # Log records are handed to logging once BENCH_LOCK is released: a handler may wait
    # for another thread's tuning, which needs that lock.
    with progress.held(), BENCH_LOCK:
        measurer = make_measurer(req, variant_for, first, progress, budget_s=budget)
        fields = mistakes.runtime_fields(info, req.variants)

        def explain(cfg: Config, why: str) -> Exception:
            return mistakes.runtime_field_error(info, fields, cfg, why)

        if fields:  # a failure is then most likely that mistake: say so at the first one
            measurer = _StopAtFirstFailure(measurer, explain)

        def on_event(event: SearchEvent) -> None:
            progress.searching(event.strategy, event.remaining_s)
            if event.kind == "raced":
                measurer.settle()  # timing="auto": graph-time short kernels from now on

        def search(strategy: Any) -> SearchOutcome:
            return run_search(
                space,
                strategy,
                measurer,
                budget_s=budget,
                race_settings=race,
                history=history,
                on_event=on_event,
                final_leaders=effort.final_leaders,
                prune=prune,
                first=(req.settings.default,) if req.settings.default else (),
            )

        try:
            try:
                try:
                    outcome = search(strategy)
                except TuningError as err:
                    instead = _in_process_instead(measurer, err)
                    if instead is None:
                        raise
                    measurer.close()
                    measurer = instead if not fields else _StopAtFirstFailure(instead, explain)
                    outcome = search(make_strategy(req.settings.search, req.settings.seed))
            except TuningError as err:
                _every_failed(info.qualname, req, err)
                raise
            best = next(o for o in outcome.observations if o.config == outcome.chosen)
            chosen = (outcome.chosen, best.median_ms)
        except BaseException as err:
            progress.finish(None, None)
            _cleanup(measurer.close, err)
            raise
        progress.finish(*chosen)
        measurer.close()
        reset_only_pre_hook(req.settings, info, variant_for(outcome.chosen))
    _warn_unfinished(info.qualname, space, outcome, prune)  # outside BENCH_LOCK: a handler
    return outcome, measurer.timer_kind


def _warn_unfinished(
    qualname: str,
    space: SearchSpace,
    outcome: SearchOutcome,
    prune: Callable[[list[Config]], Sequence[Config]] | None,
) -> None:
    """An exhaustive search its budget stopped before every candidate was measured says
    so: its choice is the best of those it reached, and its record decides later calls."""
    if outcome.strategy.split(":")[-1] != "exhaustive" or outcome.exhausted:
        return
    if outcome.budget_s is None:
        return
    seen = {o.config for o in outcome.observations}
    if isinstance(space, ListSpace):
        left = [c for c in space.iter_valid() if c not in seen]
        if left and prune is not None:
            left = list(prune(left))
        if not left:
            return  # the budget ran out just as the last batch was measured
        of = f"{len(seen)} of its {len(seen) + len(left)} configurations"
    else:
        of = f"{len(seen)} of up to {space.size_hint():,} configurations"
    from tunedsl.warn import warn_once

    chosen_by_auto = outcome.strategy.startswith("auto")  # a space small enough to list
    what = "the search (auto: exhaustive)" if chosen_by_auto else "search='exhaustive'"
    # Where the settings came from the environment, the fix is there too.
    budget = "budget= (or TUNEDSL_BUDGET)" if knobs.budget_s() is not None else "budget="
    leave = "search= out and unset TUNEDSL_SEARCH" if knobs.search() != "auto" else "search= out"
    fix = "" if chosen_by_auto else f", or leave {leave} (auto searches a large space by a model)"
    warn_once(
        f"unfinished-exhaustive:{qualname}:{outcome.budget_s}",
        f"{what} of {qualname} measured {of} before its budget of {outcome.budget_s:g} s ran "
        "out; the choice is the best of those, and the record decides later calls with this "
        f"budget. Give a larger {budget} to measure them all{fix}",
        UserWarning,
        stacklevel="user",
    )


class _StopAtFirstFailure:
    """A measurer that raises ``explain``'s error when a configuration fails before any
    was measured, instead of trying every configuration into the same failure."""

    def __init__(self, inner: Any, explain: Callable[[Config, str], Exception]) -> None:
        self.inner = inner
        self.explain = explain
        self.measured = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        for prep in self.inner.prepare(configs):
            if (prep.status != "ok" or prep.error is not None) and not self.measured:
                raise self.explain(prep.config, prep.error or prep.status)
            yield prep

    def sample(self, config: Config, reps: int) -> list[float]:
        try:
            times: list[float] = self.inner.sample(config, reps)
        except MeasureFailure as err:
            if not self.measured:
                raise self.explain(config, str(err)) from None
            raise
        self.measured = True
        return times


def _every_failed(qualname: str, req: TuneRequest, err: TuningError) -> None:
    """No configuration could be measured: the error names the kernel, with a hint when
    every failure says why (no GPU driver: run under the interpreter)."""
    from tunedsl.autointerp import no_driver_message
    from tunedsl.backends.hooks import descriptor_hook_hint

    details = dict(err.failures)
    if not err.message.startswith("no configuration could be measured"):
        return
    for cfg, why in req.infeasible.items():
        details.setdefault(repr(cfg), why)
    reasons = [str(why) for why in details.values()]
    hint = (
        no_driver_message(reasons, req.kernel)
        or _every_crash_hint(reasons)
        or _zero_dim_hint(reasons, req)
        or descriptor_hook_hint(req.settings, req.variants[0].args if req.variants else ())
    )
    raise TuningError(
        f"every configuration of {qualname} failed" + (f": {hint}" if hint else ""), details
    ) from err


def _in_process_instead(measurer: Any, err: TuningError) -> Any:
    """The measurer to tune with in this process instead, where ``measurer`` measured in a
    worker after a death in a launch (``measurers._after_a_death``) and every configuration
    crashed the worker; else None."""
    instead = getattr(measurer, "in_process_instead", None)
    if instead is None or not err.message.startswith("no configuration could be measured"):
        return None
    return instead() if _every_crash_hint([str(w) for w in err.failures.values()]) else None


def _every_crash_hint(reasons: list[str]) -> str | None:
    # Every configuration killed the isolated worker: the kernel's own bug, or addresses
    # the caller stored in a tensor, which point nowhere in the worker's memory.
    if not reasons or not all("crashed: worker killed" in why for why in reasons):
        return None
    return (
        "each one crashed the worker process that isolate=True measures in. If the kernel "
        "reads tensors through addresses stored in a tensor (the pointer arrays of a "
        "grouped GEMM), those are addresses in your process, not in the worker's: measure "
        "it in your process (isolate=False, or TUNEDSL_ISOLATE=0)"
    )


def _zero_dim_hint(reasons: list[str], req: TuneRequest) -> str | None:
    # Every failure is Triton's about a pointer where a number was meant, and the call
    # passes a 0-d tensor (torch.tensor(2.0), x.max()): Triton passes it as a pointer.
    if not req.variants or not reasons or not all("pointer<" in why for why in reasons):
        return None
    from tunedsl.backends.triton import kernel_info
    from tunedsl.model.keys import is_tensor

    names = kernel_info(req.kernel).arg_names
    args = zip(names, req.variants[0].args, strict=False)
    zero_dim = [name for name, arg in args if is_tensor(arg) and arg.dim() == 0]
    if not zero_dim:
        return None
    return (
        f"`{zero_dim[0]}` is a 0-d tensor, which Triton passes as a pointer; where the kernel "
        f"uses `{zero_dim[0]}` as a number, pass a Python number (the tensor's .item())"
    )


def _results(
    req: TuneRequest, info: KernelInfo, outcome: SearchOutcome, twins: Mapping[Config, Config]
) -> list[ConfigResult]:
    """The record's results in space order: every observation with its round, twins as
    their representative (noted), then what was dropped before compiling."""
    by_config = {v.config: v for v in req.variants}

    def extras(config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
        v = by_config[config]
        return recorded_options(v), constexpr_values(req.kernel, v, info.constexpr_names)

    observed = {o.config: o for o in outcome.observations}
    fresh = results_from_observations(outcome.observations, extras, req.previous.values())
    by_result: dict[Config, ConfigResult] = {}
    for r in fresh:
        o = observed[r.config]
        note = r.reason
        # Kept in memory only (records store reasons of failures): the printed table marks
        # the configurations the race measured beyond their opening repetitions.
        if r.status == "ok" and o.samples and len(o.samples) > _race(req).first_reps:
            note = "re-measured"
        by_result[r.config] = dataclasses.replace(
            r, reason=note, round=o.round if o.samples or o.status != "ok" else r.round
        )
    results = []
    for v in req.variants:
        found = by_result.get(v.config)
        if found is None and v.config in twins and twins[v.config] in by_result:
            rep = by_result[twins[v.config]]
            options, cexpr = extras(v.config)
            note = f"interpreter: timed as {twins[v.config]}" if rep.status == "ok" else rep.reason
            found = dataclasses.replace(
                rep, config=v.config, reason=note, options=options, constexprs=cexpr
            )
        if found is not None:
            results.append(found)
    for cfg, why in req.infeasible.items():
        if not any(r.config == cfg for r in results):
            results.append(ConfigResult(cfg, "failed", reason=why))
    return results
