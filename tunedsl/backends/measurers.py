"""Which measurer tunes a site (backends layer): the one place that picks a ``Measurer``.

``make_measurer`` returns the in-process measurer (``inprocess.py``) or, with
``isolate=True``, the worker-process one (``isolated.py``) behind the same seam, with two
extras the tuner uses: ``timer_kind`` (recorded with the decision) and ``settle()`` (the
auto timer's switch to graph timing after the first batch). A measurer spreading
configurations over several devices is added here, and nowhere else.
"""

from __future__ import annotations

import contextlib
import statistics
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from tunedsl.engine.seams import MeasureFailure, Measurer, Prepared
from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant
from tunedsl.progress import Progress


class TunerMeasurer(Measurer, Protocol):
    """A ``Measurer`` with what the tuner records and the auto timer's settle step."""

    @property
    def timer_kind(self) -> str: ...

    def settle(self) -> None: ...


__all__ = ["PLAN_BUDGET", "TunerMeasurer", "WorkerSeam", "make_measurer", "maybe_multi_device",
           "plan_budget", "space_size"]  # fmt: skip

#: ``budget_s``'s default: the budget the tuner's search of ``req`` runs under (``plan_budget``).
PLAN_BUDGET = object()


def make_measurer(
    req: Any,
    variant_for: Callable[[Config], Variant],
    first: Variant,
    progress: Progress | None = None,
    budget_s: object = PLAN_BUDGET,
) -> TunerMeasurer:
    """The measurer for ``req`` (a ``TuneRequest``): on every GPU of the caller's model
    when ``TUNEDSL_TUNE_DEVICES`` allows it and ``device_plan`` expects it to pay
    (``multi_device.py``), else in a worker when ``req.settings.isolate``, else in this
    process. ``budget_s``: the budget the search runs under (None: none; by default the
    tuner's rule, ``plan_budget``), which the plan weighs. Not isolated, a tuning whose key
    an earlier process died launching in its own process measures as ``_after_a_death``
    says, on the caller's GPU alone: spread over several, the caller's share of them would
    be launched in this process too."""
    from tunedsl.backends.inprocess import InProcessMeasurer
    from tunedsl.store.inflight import died_in_launch

    isolate = req.settings.isolate
    died: list[dict[str, Any]] = []
    if req.key_digest and not isolate:  # ranks read them before spreading the tuning
        died = died_in_launch(req.key_digest) if req.died is None else list(req.died)
    if died:
        return _after_a_death(req, died, variant_for, first, progress)
    if req.settings.space is None:  # a listed space: the workers get every input up front
        multi = maybe_multi_device(req, budget_s)
        if multi is not None:
            return WorkerSeam(req, multi, progress)
    if isolate:
        from tunedsl.backends.isolated import IsolatedMeasurer

        return WorkerSeam(req, IsolatedMeasurer(req, req.settings.timing), progress)
    return InProcessMeasurer(req, variant_for, first, progress)


def _after_a_death(
    req: Any,
    died: list[dict[str, Any]],
    variant_for: Callable[[Config], Variant],
    first: Variant,
    progress: Progress | None,
) -> TunerMeasurer:
    """An earlier process died launching ``died``'s configurations of this key in its own
    process (a crash there takes the process down, and so does a kill): this tuning
    measures in a worker process, where such a crash fails the configuration alone. Where
    no worker can take the tuning (a space too large to list, arguments that do not
    pickle), or where every configuration crashes the worker (the tuner then asks
    ``in_process_instead``), it measures in its own process (``_in_process``): one death
    is no proof of a crash, so a configuration a process died launching once is measured
    again, and one processes died launching twice is left out, failed."""
    from tunedsl.backends.inprocess import InProcessMeasurer
    from tunedsl.warn import warn_once

    deaths = _deaths(died)
    if not deaths:
        return InProcessMeasurer(req, variant_for, first, progress)
    name = getattr(getattr(req.kernel, "fn", req.kernel), "__qualname__", "kernel")
    pids = ", ".join(sorted({str(entry.get("pid")) for entry in died}))
    launching = []  # what the dead processes were launching (not the deaths they carried)
    for entry in died:
        with contextlib.suppress(Exception):
            launching.append(str(Config.from_json(entry["config"])))
    what = f"an earlier tuning of this key of {name} (pid {pids}) died " + (
        f"while launching {', '.join(dict.fromkeys(launching))} in its own process (a crash "
        "there, or a kill)"
        if launching
        else f"between launches, knowing of deaths launching {', '.join(map(str, deaths))}"
    )
    if req.settings.space is None:
        from tunedsl.backends.isolated import IsolatedMeasurer

        try:
            inner = IsolatedMeasurer(req, req.settings.timing)
        except UsageError:
            inner = None
        if inner is not None:
            warn_once(
                f"died:{req.key_digest}",
                f"{what}; this tuning measures in a worker process, where a crash fails the "
                "configuration alone (isolate=True does so always)",
                RuntimeWarning,
                stacklevel="user",
            )
            seam = WorkerSeam(req, inner, progress)
            # A kernel that reads addresses stored in a tensor (the pointer arrays of a
            # grouped GEMM) crashes the worker with every configuration: those addresses are
            # this process's. The tuner then measures here, by the same rule.
            seam.in_process_instead = lambda: _in_process(
                req, variant_for, first, progress, deaths, pids,
                f"{what}; in a worker process every configuration crashed it (a kernel that "
                "reads addresses stored in a tensor reads nowhere there), so this tuning "
                "measures in its own process",
            )  # fmt: skip
            return seam
    return _in_process(
        req, variant_for, first, progress, deaths, pids,
        f"{what}; a worker process cannot take this tuning (its space is too large to list, "
        "or its arguments or hooks do not pickle), so it measures in its own process",
    )  # fmt: skip


def _deaths(died: list[dict[str, Any]]) -> dict[Config, int]:
    """How many processes died launching each configuration ``died`` names (in-flight
    entries, ``store/inflight.py``): the dead process's own configuration counts its
    earlier deaths and this one (deaths of several processes on one add up), and the
    earlier deaths it carried count as written (the largest, where several carry one)."""
    from tunedsl.store.inflight import death_count

    dying: dict[Config, int] = {}
    known: dict[Config, int] = {}
    for entry in died:
        with contextlib.suppress(Exception):  # a file of another tunedsl version, say
            config = Config.from_json(entry["config"])
            dying[config] = dying.get(config, 0) + death_count(entry.get("deaths")) + 1
        for earlier in entry.get("earlier") or ():
            with contextlib.suppress(Exception):
                config, count = Config.from_json(earlier["config"]), death_count(earlier["deaths"])
                if count > 0:
                    known[config] = max(known.get(config, 0), count)
    return {c: max(dying.get(c, 0), known.get(c, 0)) for c in [*dying, *known]}


def _in_process(
    req: Any,
    variant_for: Callable[[Config], Variant],
    first: Variant,
    progress: Progress | None,
    deaths: dict[Config, int],
    pids: str,
    said: str,
) -> TunerMeasurer:
    """The in-process measurer after ``said``: the configurations processes died launching
    twice (``deaths``) failed, never launched; those one died launching once measured
    again, their in-flight entry saying so (a second death leaves them out)."""
    from tunedsl.backends.inprocess import InProcessMeasurer
    from tunedsl.warn import warn_once

    again = [str(c) for c, n in deaths.items() if n < 2]
    twice = [str(c) for c, n in deaths.items() if n >= 2]
    if again:
        warn_once(
            f"died-again:{req.key_digest}",
            f"{said}: it measures {', '.join(again)} again (a process died launching it "
            "once, which a kill does too); a second death in its launch leaves it out, as "
            "failed",
            RuntimeWarning,
            stacklevel="user",
        )
    if twice:
        warn_once(
            f"died-left-out:{req.key_digest}",
            f"{said}: processes died launching {', '.join(twice)} twice, so this tuning "
            "leaves them out, as failed (`tunedsl cache clear` lets a later tuning measure "
            "them again)",
            RuntimeWarning,
            stacklevel="user",
        )
    reason = f"the process measuring it died in its launch, twice (pid {pids})"
    left_out = {c: reason for c, n in deaths.items() if n >= 2}
    return InProcessMeasurer(req, variant_for, first, progress, left_out=left_out, deaths=deaths)


class WorkerSeam:
    """A worker-process measurer (``IsolatedMeasurer``, or ``MultiDeviceMeasurer``: one
    worker per GPU) with progress, ``timer_kind`` and ``settle()``. Its variants are those
    of the request: the workers get every input once, up front."""

    def __init__(self, req: Any, inner: Any, progress: Progress | None) -> None:
        from tunedsl.backends import triton as bt

        self.gpu = bt.device_facts()["type"] in ("cuda", "hip")
        self.timing = req.settings.timing
        self.kind = (
            "wall"
            if not self.gpu
            else {"events": "cuda-events", "graph": "cuda-graph"}.get(
                req.settings.timing, "cuda-events"
            )
        )
        self.inner = inner
        if hasattr(inner, "final_on_caller"):  # the driver re-races leaders on the caller
            self.final_on_caller = inner.final_on_caller
        if hasattr(inner, "prefetch"):  # the driver announces its next batch
            self.prefetch = inner.prefetch
        if hasattr(inner, "lookahead"):  # ... that many batches ahead
            self.lookahead = inner.lookahead
        if hasattr(inner, "sample_round"):  # a race round's samples, side by side on the GPUs
            self.sample_round = self._sample_round
        self.progress = progress
        self.first_ms: dict[Config, float] = {}
        self.settled = False
        # After a death in a launch (``_after_a_death``): the measurer the tuner takes when
        # every configuration crashed the worker.
        self.in_process_instead: Callable[[], TunerMeasurer] | None = None

    @property
    def compile_workers(self) -> int:
        """How many configurations compile at once: the host's pool compiles for the workers."""
        from tunedsl.backends.compile_pool import default_workers

        return default_workers()

    @property
    def timer_kind(self) -> str:
        local = getattr(self.inner, "local", None)  # the caller's GPU, measured here: its timer
        return str(local.measurer.timer_kind) if local is not None else self.kind

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        for prep in self.inner.prepare(configs):
            if self.progress is not None:
                if prep.status == "ok" and prep.error is None:
                    self.progress.compiled(prep.config)
                else:
                    self.progress.failed(prep.config, prep.error or prep.status)
            yield prep

    def sample(self, config: Config, reps: int) -> list[float]:
        try:
            samples = self.inner.sample(config, reps)
        except MeasureFailure as err:  # the race adds "run: " itself
            raise MeasureFailure(str(err).removeprefix("run: ")) from None
        self._first(config, samples)
        return samples

    def _first(self, config: Config, samples: list[float]) -> None:
        if config not in self.first_ms and samples:
            self.first_ms[config] = statistics.median(samples)
            if self.progress is not None:
                self.progress.measured(config, self.first_ms[config])

    def _sample_round(self, asked: Sequence[tuple[Config, int]]) -> list[Any]:
        out = []
        for (config, _), fresh in zip(asked, self.inner.sample_round(asked), strict=True):
            if isinstance(fresh, MeasureFailure):  # the race adds "run: " itself
                out.append(MeasureFailure(str(fresh).removeprefix("run: ")))
                continue
            self._first(config, fresh)
            out.append(fresh)
        return out

    def settle(self) -> None:
        if self.gpu and self.timing == "auto" and not self.settled and self.first_ms:
            from tunedsl.engine.bench import Timing

            self.settled = True
            first = {c: Timing(ms, 0.0, 1, ms) for c, ms in self.first_ms.items()}
            settle = getattr(self.inner, "settle", None)
            if settle is not None:  # the multi-device measurer settles on the caller itself
                try:
                    self.kind = settle(first)
                except MeasureFailure:
                    # The worker left after a configuration's sticky CUDA error; the next
                    # sample starts a fresh one, which chooses its timer on its own.
                    pass

    def close(self) -> None:
        self.inner.close()


def maybe_multi_device(req: Any, budget_s: object = PLAN_BUDGET) -> Any:
    """A ``MultiDeviceMeasurer`` when this tuning should use several GPUs, else None (the
    caller then measures as before): on a GPU, with ``TUNEDSL_TUNE_DEVICES`` naming more than
    the caller's device, ``plan_devices`` expecting them to pay off under ``budget_s`` (the
    search's budget; by default ``plan_budget(req)``), and a kernel and arguments that can be
    sent to a worker (otherwise one warning, and None)."""
    from tunedsl import knobs
    from tunedsl.backends import triton as bt
    from tunedsl.backends.device_choice import tune_devices

    if bt.device_facts()["type"] not in ("cuda", "hip") or req.settings.space is not None:
        return None  # a space too large to list is searched in this process (make_measurer)
    import torch

    visible = list(range(torch.cuda.device_count()))
    caller = int(torch.cuda.current_device())
    models = {d: _model(d) for d in visible}
    devices = tune_devices(knobs.tune_devices(), visible, caller, models)
    if len(devices) < 2:
        return None
    from tunedsl.backends.compile_pool import default_workers
    from tunedsl.backends.device_plan import costs_for, plan_devices
    from tunedsl.backends.multi_device import MultiDeviceMeasurer, workers_warm

    budget = plan_budget(req) if budget_s is PLAN_BUDGET else budget_s
    assert budget is None or isinstance(budget, (int, float))
    # Not isolated: the caller's GPU measures in this process (no worker to start) and the
    # other GPUs' workers join it; isolated, every GPU measures in a worker.
    isolate = req.settings.isolate
    costs = costs_for(
        models[caller],
        warm=workers_warm(devices if isolate else devices[1:]),
        isolate=isolate,
        cores=default_workers(),
    )
    used = plan_devices(space_size(req), len(devices), costs, budget)
    if used < 2:
        return None
    try:
        return MultiDeviceMeasurer(
            req,
            devices[:used],
            caller=caller,
            timing=req.settings.timing,
            opening_reps=_opening_reps(req.settings.effort),
            model=models[caller],
            local=not isolate,
        )
    except UsageError as err:  # not picklable: tune in this process, on the caller's GPU
        warnings.warn(f"tuning on one GPU: {err}", RuntimeWarning, stacklevel=2)
        return None


def plan_budget(req: Any) -> float | None:
    """The budget the tuner searches ``req``'s listed space under (``search_budget``)."""
    from tunedsl.engine.effort import search_budget

    settings = req.settings
    return search_budget(settings.budget_s, settings.search, settings.effort, space_size(req))


def space_size(req: Any) -> int:
    """The configurations ``req``'s search is over: its variants, or the points of a space
    too large to list (``settings.space``, whose variants are built as they are proposed:
    ``req.variants`` is empty), as the tuner counts them."""
    space = req.settings.space
    return len(getattr(req, "variants", ())) if space is None else int(space.size_hint())


def _model(device: int) -> str:
    from tunedsl.backends import triton as bt
    from tunedsl.backends.device_plan import model_name

    return model_name(bt.device_facts_at(device))


def _opening_reps(effort: str) -> int:
    from tunedsl.engine.effort import SEARCH_EFFORTS
    from tunedsl.engine.racing import DEFAULT_RACE

    found = SEARCH_EFFORTS.get(effort)
    return found.race.first_reps if found is not None else DEFAULT_RACE.first_reps
