"""Deciding a new key's configuration: default, stored record, or tuning (then a record).

Order (``mode`` from ``mode=`` or ``TUNEDSL_AUTOTUNE``):

- one configuration left after ``prune=``: it, never measured (``source="default"``; on a
  site with ``verify=`` checked once per process first, as every default is);
- ``off``: the site's ``default=`` configuration when ``prune=`` keeps it, else the first
  configuration prune keeps (both ``source="empty"`` for a call that launches nothing);
- a valid record of this space (``runtime/space_records.py``: a key keeps one per space)
  whose choice is one of the configurations ``prune=`` keeps for this call and which
  measured every one of them: use it (``source="disk"``); ``verify=`` checks it once first;
- a call whose grid is empty under every configuration launches nothing, decided nowhere
  (``source="empty"``: a tune would time nothing, and its pick would decide the bucket),
  when no record decides it; it asks no rule, and ``cached`` gives it no default;
- a shipped rule (``runtime/ruled.py``) for a key no record decides (``source="rule"``),
  asked before the records of the site's older identities (``legacy_records.py``);
- ``cached``: a record whose choice prune keeps (even if the space grew), else the
  default as for ``off``;
- ``on``: take the key's cross-process lock, look for a record again (another process may
  just have written it), else tune and write the record (``source="tuned"``). A record
  that chose a configuration no longer in the space, or that lacks configurations added
  since, still provides its timings: only new configurations and the leaders are measured.
  Its failures are not reused (they are measured again): a record from elsewhere cannot
  make every configuration fail, and a choice outside the space is never launched.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.environ import unknown_settings
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config
from tunedsl.model.hints import InfeasibleConfig
from tunedsl.model.identity import file_identity, location
from tunedsl.model.keys import json_safe
from tunedsl.model.record_identity import checker
from tunedsl.model.settings import LazyCandidates, Settings
from tunedsl.model.variant import Kernel, Variant
from tunedsl.runtime import launch_effect, space_records, timeouts, verdicts, verified
from tunedsl.runtime.subject import Subject
from tunedsl.store import paths
from tunedsl.store import records as store
from tunedsl.store.layered import default_layered
from tunedsl.warn import warn_once

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo
    from tunedsl.engine.request import TuneRequest
    from tunedsl.runtime.tuner import TuneOutcome
    from tunedsl.store.layered import LayeredStore

#: The call's variants of some configurations (None: every candidate), and the
#: configurations infeasible here with why.
VariantsFor = Callable[[Sequence[Config] | None], tuple[list[Variant], dict[Config, str]]]
#: verify= for a stored decision: None when ``config`` agrees, else why not.
Check = Callable[[Config], str | None]


@dataclass(frozen=True)
class Decision:
    config: Config
    options: dict[str, Any]
    source: str  # "tuned", "disk", "rule", "default" or "empty"
    record: store.Record | None


def context(
    info: KernelInfo,
    settings: Settings,
    device: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    launch: str | None = None,
) -> dict[str, Any]:
    """Process constants that belong in the digest (never in the per-call key);
    ``device``/``env``: ``device_facts()`` and ``triton_env()`` when the caller has them;
    ``launch``: the site's per-configuration launch text (the DSL's ``blocks=`` and the
    arguments written with ``$``), so an edit of it is a new key, as an edit of the kernel is."""
    from tunedsl.backends import triton as bt

    device = bt.device_facts() if device is None else device
    kernel = {
        # The kernel's file, never its module name: that depends on how the file was
        # loaded (``__main__``, the stem, the dotted name), and one kernel has one record.
        "qualname": info.qualname,
        "file": file_identity(info.file),
        "source_hash": info.source_hash,
    }
    if launch is not None:  # absent for the plain API, whose grid and args are functions
        kernel["launch"] = launch
    return {
        "kernel": kernel,
        "hints": json_safe(settings.hints),
        "device": {k: device.get(k) for k in ("type", "name", "capability", "arch")},
        "toolchain": store.keyed_toolchain(bt.toolchain()),  # not torch's, not tunedsl's
        "env": bt.triton_env() if env is None else dict(env),
    }


def launch_of(kernel: Mapping[str, Any]) -> dict[str, Any]:
    """``{"launch": text}`` of a context's (or record's) kernel part, ``{}`` without one."""
    return {"launch": kernel["launch"]} if kernel.get("launch") is not None else {}


def decision_options(config: Config, settings: Settings, target: Any = None) -> dict[str, Any]:
    """The launch options of ``config`` on this GPU (its hints made concrete; ``target``:
    its ``target_facts()`` where the caller has them), worked out once per configuration
    for the same settings and device (every key a rule decides asks for one of its picks)."""
    global _options
    if target is None:
        from tunedsl.backends.triton import target_facts

        target = target_facts()
    memo = _options
    if memo is None or memo[0] is not settings or memo[1] is not target:
        memo = _options = (settings, target, {})
    known = memo[2].get(config)
    if known is None:
        from tunedsl.model.hints import launch_options

        known = launch_options(config, settings.hints, target)  # may raise: never kept
        if len(memo[2]) < _MAX_OPTIONS:
            memo[2][config] = known
    return dict(known)


# The settings and device facts of the last decision, with its configurations' options.
_options: tuple[Settings, Any, dict[Config, dict[str, Any]]] | None = None
_MAX_OPTIONS = 256


def _usable(
    record: store.Record | None, settings: Settings, candidates: Sequence[Config]
) -> tuple[bool, dict[Config, store.ConfigResult]]:
    """Whether ``record`` decides this key as is, and the timings it can contribute:
    it does when its choice is one of ``candidates`` (what prune= keeps for this key, the
    whole space without prune=) and it has a result for every one of them."""
    if record is None:
        return False, {}
    lazy = settings.large
    space = candidates if lazy else set(candidates)  # a large space is tested per point
    measured = {r.config for r in record.results if r.config in space}
    # Failures this user measured are verdicts (never compiled again for the key). Failures
    # from anywhere else (a bundle, Redis, a shipped directory, another user, or forged)
    # are hints: only the record's successful timings are reused, a configuration it lists
    # as failed is measured again, and the new record holds only what this user saw fail.
    own = record.measured_by == store.this_user()
    previous = {
        r.config: r for r in record.results if r.config in space and (r.status == "ok" or own)
    }
    if record.chosen not in space:
        outside = record.chosen not in (settings.space if lazy else settings.configs)
        where = "is not in the current " + ("space of this site" if outside else "pruned space")
        if outside and settings.prune is not None and not lazy:  # prune= may add its own
            where = (
                "is neither in this site's space nor among those prune= returns for this key "
                "(a prune= that rewrites configurations returned it, or the space held it)"
            )
        text = f"tuning record {record.id} chose {record.chosen}, which {where}"
        reused = "its other timings are reused" if previous else "it timed none of this space"
        then = f"tuning again ({reused})" if settings.mode == "on" else "not used"
        warn_once(f"space:{record.digest}", f"{text}; {then}", stacklevel="user")
        return False, previous
    if lazy:  # a record of a large space never lists it: it decides by its budget
        return _searched_enough(record, settings, settings.space.size_hint()), previous
    missing = set(space) - measured
    return not missing or _searched_enough(record, settings, len(space)), previous


def _searched_enough(record: store.Record, settings: Settings, size: int) -> bool:
    """A budgeted search's record need not cover every candidate: it decides the key while
    this site asks for the same strategy and no larger budget (none, a small space: all)."""
    if record.budget_s is None or record.strategy is None:
        return False
    if record.strategy.split(":")[0] != settings.search:
        return False
    from tunedsl.engine.effort import search_budget

    budget = search_budget(settings.budget_s, settings.search, settings.effort, size)
    return budget is not None and budget <= record.budget_s


def fallback(
    settings: Settings, candidates: Sequence[Config], record: store.Record | None
) -> Config:
    """``cached``/``off`` without a usable record: the site's default when prune= keeps it
    (and no record saw verify= reject it), else the first such configuration."""
    rejected = {r.config for r in record.results if r.status == "rejected"} if record else set()
    if settings.large:  # never listed: the default (or the space's first valid point)
        return settings.default
    for cfg in (settings.default, *candidates):
        if cfg in candidates and cfg not in rejected:
            return cfg
    return candidates[0]


# runtime.ruled, once a miss has asked a rule.
_ruled: Any = None


def lookup(
    subject: Subject,
    candidates: Sequence[Config],
    check: Check | None = None,
    *,
    again: bool = False,
    nothing: Callable[[], bool] | None = None,
    stated: list[Any] | None = None,
) -> tuple[Decision | None, dict[Config, store.ConfigResult]]:
    """A decision that needs no tuning (the default, or a stored record's choice), else None
    and the timings a stale record can contribute. ``again``: the second look, under the
    key's lock (no legacy migration; timings this process did not verify are dropped).
    ``nothing``: whether the call launches nothing under any candidate (asked where no record
    decides, before a rule or ``cached``'s default would decide: ``source="empty"``)."""
    settings, digest = subject.settings, subject.digest

    def empty() -> Decision | None:
        if nothing is None or settings.large or not nothing():
            return None
        cfg = fallback(settings, candidates, None)
        return Decision(cfg, decision_options(cfg, settings, subject.target), "empty", None)

    def default(record: store.Record | None = None, only: bool = False) -> Decision:
        cfg = fallback(settings, candidates, record)
        if check is not None and verified.needs_check(digest, settings.verify, cfg):
            # Launched without measuring, but a site with verify= checks what it launches.
            problem = check(cfg)
            if problem is not None:
                why = verdicts.default_fails(cfg, problem, settings, record, only)
                raise TuningError(why, {repr(cfg): problem})
            verified.note(digest, cfg, settings.verify)
        return Decision(cfg, decision_options(cfg, settings, subject.target), "default", None)

    if settings.mode == "off" or len(candidates) == 1:
        # One configuration (after pruning) has nothing to compare: launched, never measured
        # (a call that launches nothing under any configuration is "empty" here too).
        return (empty() or default(only=True)), {}
    if knobs.force_retune():
        return ((empty() or default()) if settings.mode == "cached" else None), {}

    def stands(record: store.Record | None, usable: bool) -> bool:
        """A record's choice is used when it decides the key (``cached``: when it is still
        a candidate) and, on a site with verify=, passes verify once in this process."""
        if record is None or record.chosen not in candidates:
            return False
        if not usable and settings.mode != "cached":
            return False
        if check is None or not verified.needs_check(digest, settings.verify, record.chosen):
            return True
        problem = check(record.chosen)
        if problem is None:
            verified.note(digest, record.chosen, settings.verify)
            return True
        warn_once(
            f"verify:{digest}",
            f"tuning record {record.id} chose {record.chosen}, which fails verify= here "
            f"({problem}); not using it",
            stacklevel="user",
        )
        return False

    def ruled() -> Decision | None:
        global _ruled
        launches_none = empty()  # no rule is asked for a call that launches nothing
        if launches_none is not None:
            return launches_none
        if _ruled is None:  # on the first miss no record decides (a warm hit never needs it)
            import tunedsl.runtime.ruled as _ruled

        verify = check if settings.verify not in (None, False) else None
        picked = _ruled.rule_pick(subject, candidates, verify, tuning_allowed=settings.mode == "on")
        return (
            None
            if picked is None
            else Decision(picked, decision_options(picked, settings, subject.target), "rule", None)
        )

    stores = record_stores()
    # A record under this digest that states another device, kernel, Triton or key (an
    # edited file, bundle or Redis value) is a miss, with one warning.
    expect = checker(subject.context, subject.readable)
    # Another space's record leaves this space's own, if any (``runtime/space_records.py``).
    record, foreign = space_records.find(stores, subject, stores.get(digest, expect), expect)
    asked_rule = False
    if record is None and not again:
        # A key with no record: a shipped rule decides before the records of the site's older
        # identities are looked for (six more look-ups, each a digest and a stat a store).
        asked_rule = True
        by_rule = ruled()
        if by_rule is not None:
            return by_rule, {}
        from tunedsl.runtime.legacy_records import migrate

        record = migrate(subject, stores)
    record = timeouts.current(verdicts.current(record, settings), settings.isolate, stated)
    noted = sys.modules.get("tunedsl.runtime.ruled")  # imported by a failed first launch
    if record is not None and noted is not None and (digest, record.chosen) in noted.FAILED_PICKS:
        record = None  # its choice failed on its first launch here: its kernel is not this one
    usable, previous = _usable(record, settings, candidates)
    usable = usable and not foreign  # another space's choice: its timings count, not it
    if stands(record, usable) and record is not None:
        return Decision(
            record.chosen, decision_options(record.chosen, settings, subject.target), "disk", record
        ), {}
    if not again and not asked_rule:
        by_rule = ruled()
        if by_rule is not None:
            return by_rule, previous
    if settings.mode == "cached":
        return (empty() or default(record)), {}
    if again and verified.needs_check(digest, settings.verify):
        # On a site with verify=, timings this process did not verify are not reused: each
        # configuration is checked against one reference (the first one run) again.
        previous = {}
    return None, previous


def decide(
    subject: Subject,
    variants_for: VariantsFor,
    candidates: Sequence[Config] | None = None,
    check: Check | None = None,
) -> Decision:
    settings = subject.settings
    candidates = settings.configs if candidates is None else candidates
    if not settings.large:
        candidates = tuple(candidates)
    said: list[bool] = []

    def nothing() -> bool:  # bound once for this call, whoever asks first
        if not said:
            said.append(launch_effect.launches_nothing(variants_for, candidates))
        return said[0]

    found, previous = lookup(subject, candidates, check, nothing=nothing)
    if found is not None:
        return found
    if not settings.large and nothing():
        cfg = fallback(settings, candidates, None)
        return Decision(cfg, decision_options(cfg, settings, subject.target), "empty", None)
    from tunedsl.backends.isolated_worker import in_worker

    if in_worker():  # the parent holds this key's lock, or tunes it: fail, never wait
        raise UsageError(
            f"{subject.site_id}: a tune ran inside tunedsl's measurement worker, which imports "
            "the kernel's module and so runs its top-level code again; move module-level "
            'tuning under `if __name__ == "__main__":` or into a function, or use isolate=False'
        )
    with record_stores().lock(subject.digest, knobs.lock_timeout_s()):
        stated: list[Any] = []
        found, previous = lookup(subject, candidates, check, again=True, stated=stated)
        if found is not None:
            return found
        kept = timeouts.noted(stated[0] if stated else None, previous.values())
        record = tune_and_record(subject, variants_for, previous, candidates, note=kept)
    return Decision(record.chosen, decision_options(record.chosen, settings), "tuned", record)


@knobs.per_environ
def _settings_read() -> None:
    """Every ``TUNEDSL_*`` setting read once before a tuning (again when the environment
    changes): a bad value is a ``UsageError`` naming it on every machine, not only on one
    whose tuning reads it (a GPU's compiles, several GPUs, a ``torch.distributed`` job);
    a misspelt name (``AUTOTUNING`` for ``AUTOTUNE``) is one warning naming the setting meant."""
    for read in knobs.SETTINGS.values():
        read()
    for name, meant in unknown_settings(knobs.SETTINGS):
        if meant is not None:  # a variable near no setting may be another tool's
            warn_once(f"setting:{name}", f"environment variable {name} is not a tunedsl "
                      f"setting and changes nothing: did you mean {meant}?", stacklevel="user")  # fmt: skip


def tune_and_record(
    subject: Subject,
    variants_for: VariantsFor,
    previous: Mapping[Config, store.ConfigResult],
    candidates: Sequence[Config] | None = None,
    *,
    tune: Callable[[TuneRequest], TuneOutcome] | None = None,
    note: Mapping[str, Any] | None = None,
) -> store.Record:
    """Tune this key (reusing ``previous`` timings) and persist the record. ``tune``: the
    tuner (``runtime.tuner.tune``; ranks that agree pass one that shares the measuring);
    ``note``: more entries for the record's ``context``."""
    settings, kernel, info, ctx = subject.settings, subject.kernel, subject.info, subject.context
    _settings_read()
    from tunedsl.backends import triton as bt
    from tunedsl.engine.request import TuneRequest
    from tunedsl.runtime.tuner import tune as lone

    run_tuner = lone if tune is None else tune

    variants: list[Variant] = []
    infeasible: dict[Config, str] = {}
    variant_for: Callable[[Config], Variant] | None = None
    keep: Callable[[list[Config]], Sequence[Config]] | None = None
    if settings.large:  # never listed: each proposed configuration is bound when measured
        if not isinstance(candidates, LazyCandidates):
            raise TuningError("internal: a large space is tuned with its lazy candidates")

        def variant_for(config: Config) -> Variant:
            bound, dropped = variants_for([config])
            if not bound:
                raise InfeasibleConfig(dropped.get(config, "dropped by its launch hints"))
            return bound[0]

        keep = candidates.keep
    else:
        variants, infeasible = variants_for(None)
    outcome = run_tuner(
        TuneRequest(
            kernel=kernel,
            variants=variants,
            infeasible=infeasible,
            previous=dict(previous),
            settings=settings,
            variant_for=variant_for,
            keep=keep,
            key_digest=subject.digest,
        )
    )
    first = variants[0] if variants else (variant_for(outcome.chosen) if variant_for else None)
    signature = replay_signature(kernel, info, first) if first else {}
    stores = record_stores()
    record = store.Record(
        site=subject.site_id,
        digest=subject.digest,  # in a store holding another space's record there: its own
        key=subject.readable,
        chosen=outcome.chosen,
        results=tuple(outcome.results),
        kernel={**info.describe(), **launch_of(ctx["kernel"])},
        signature=signature,
        device=bt.device_facts(),
        versions=bt.toolchain(),
        context={"hints": ctx["hints"], "env": ctx["env"], "timer": outcome.timer}
        | space_records.noted(subject, candidates)
        | verdicts.noted(settings)
        | timeouts.noted()
        | dict(note or {}),
        tuning_s=outcome.tuning_s,
        timestamp=store.now(),
        effort=settings.effort,
        location=location(subject.site_id),
        strategy=outcome.strategy,
        seed=outcome.seed,
        budget_s=outcome.budget_s,
        measured_by=store.this_user(),
    )
    record = space_records.put_beside(stores, record, checker(ctx, subject.readable))
    verified.tuned(subject.digest, record.chosen, settings.verify)
    return record


def replay_signature(kernel: Kernel, info: KernelInfo, variant: Variant) -> dict[str, Any]:
    """Each argument's Triton type and specialization (``"*fp16:D"``): replay rebuilds a
    launch's binary (under the interpreter, one on ``cuda:90``); else the plain types."""
    from tunedsl.backends import triton as bt

    if info.jit or bt.interpreting():
        try:
            from tunedsl.backends.triton_compile import triton_specialization

            v = variant  # the heuristics see the launch options and grid, as at its launch
            return triton_specialization(kernel, v.args, v.kwargs, options=v.options, grid=v.grid)
        except Exception:  # an unexpected argument kind: the plain types still replay
            pass
    return bt.triton_signature(info, bt.bind_arguments(info, variant.args, variant.kwargs))


def record_stores() -> LayeredStore:
    """Where decisions are looked up and kept (``store/layered.py``): the cache's record
    files, the read-only ``TUNEDSL_RECORDS_PATH`` directories, then Redis when configured
    (a hit in a later store is written through to the earlier writable ones); built again
    when the knobs naming them change; one per sweep task's ``paths.records_kept_in``."""
    kept = _stores.get(apart := paths.records_kept_apart())  # a sweep task's: its files alone
    if kept is not None and knobs.environ_unchanged(kept[2]):
        return kept[1]  # no variable changed (asked on every miss)
    environ = knobs.environ_snapshot()
    named = (tuple(knobs.records_path()), knobs.redis_url(), os.environ.get("HOME"), apart)
    if kept is not None and kept[0] == named:
        _stores[apart] = (named, kept[1], environ)
        return kept[1]
    stores = default_layered(memory=False)
    if len(_stores) >= 8:  # sweep tasks that ended: their directories are gone
        _stores.pop(next((k for k in list(_stores) if k is not None), None), None)
    _stores[apart] = (named, stores, environ)
    return stores


_stores: dict[Any, tuple[tuple[Any, ...], LayeredStore, object]] = {}
