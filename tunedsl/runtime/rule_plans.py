"""A site's misses that a rule decides, made once per argument layout.

A serving loop meets a new size on every call for a while: each is a miss that a shipped rule
decides (``runtime/ruled.py``), and each goes the general way through ``miss.resolve``: the
settings, the candidates, the readable key and its digest, the records, the rule found and
chosen, the key's features walked, the pick checked. Calls of one argument layout (the same
classes, dtypes, stride patterns, int classes, alignment and constexpr values) differ only in
their shapes, so after the general way has decided a layout's first such miss, the site keeps
a *plan* for the layout: a reader made for it (``model/key_reader.py``) gives the readable key,
its text and the rule's features in one call, and the plan holds what the general way worked
out once (the settings, the process context; for each rule measured on this GPU model and
toolchain, in path order, its family's range test and pick for the layout's features and the
configurations the site's space keeps; where the layout's tensors are) and what the keys
launching one configuration share (the decision, the result's fields, the launchers). As on
the general way, the first of those rules whose range holds a key decides it: one
directory's rule for small sizes and another's for large ones are both planned.

A plan decides exactly what the general way would, or leaves the miss to it. It is used only
where nothing it skips can apply: no ``prune=``, ``verify=``, ``restore_value=``,
``reset_to_zero=``, ``key=``, non-literal settings or positional argument written with ``$``;
no process group of ranks; outside a sweep; the same settings, environment, device and rule
file as when it was made. Each new key still has its records looked up (a record decides
before a rule) and its pick checked against the rule's range and the site's space; anything
else (a record, a size outside every rule's range, a decision already made under another call
key, a call whose pick's grid is empty, which may be ``"empty"``) goes the general way.

``RulePlans.first_launch`` launches every new key's entry: a rule's pick or a record's choice
whose first launch fails there (a configuration that cannot run at a size between swept ones,
or no longer builds: a kernel's state its identity does not cover) is refused for that key
(``ruled.FAILED_PICKS``, which plans and record look-ups read too) and the call decided again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import TYPE_CHECKING, Any

import tunedsl.backends.triton as bt
from tunedsl.backends import compat
from tunedsl.backends.shared_launchers import specialization
from tunedsl.environ import environ_snapshot, environ_unchanged
from tunedsl.model.hole import HOLE
from tunedsl.model.key_reader import Reader, make_reader
from tunedsl.model.rule_features import key_features
from tunedsl.runtime import distributed, miss
from tunedsl.runtime.call_device import check_call_device
from tunedsl.runtime.decide import Decision, decision_options, record_stores
from tunedsl.runtime.entry import zero_unlaunched
from tunedsl.runtime.result import LaunchResult
from tunedsl.runtime.space_records import own_tail, space_digest
from tunedsl.runtime.subject import Subject
from tunedsl.store.rules import find_rules, rules_decide, unchanged_check

if TYPE_CHECKING:
    from tunedsl.model.config import Config
    from tunedsl.model.rule import Rule
    from tunedsl.model.settings import Settings

#: Plans a site keeps (layouts); and the plans it tries to make, made or not (a layout no
#: reader reads is tried no more than this, whatever its sizes).
MAX_PLANS = 8
MAX_TRIES = 16


@dataclass(slots=True)
class _Plan:
    kernel: Any
    read: Reader
    settings: Settings
    part: Any  # miss.process_part's answer it was made under
    environ: object  # the environment then (environ_snapshot)
    rules_unchanged: Callable[[], bool]  # whether find_rules still answers the rules found
    # The current rules (measured on this GPU model and toolchain) in path order: the first
    # whose range holds a key decides it (``ruled.covering_rule``).
    ways: tuple[_Way, ...]
    spec: tuple[Any, ...] | None  # Triton's specialization, where the reader tests all of it
    absent: Callable[[str, str], bool] | None  # no record file for two digests (None: ask)
    # A key's record of the settings' space may be under the space's own digest: the key's
    # digest and this, hashed (``space_records.own_digest``).
    own: str
    result: LaunchResult  # the first key's result: later keys' are copies of it
    failed: Mapping[tuple[str, Config], str]  # ruled.FAILED_PICKS
    # A call's tensors' alignment (where ``spec`` is None) and, under the interpreter (the
    # device facts say so: they are the plan's), the tensors a failed pick's launch may have
    # written: None where neither is asked.
    locate: Callable[[Any, Any], tuple[tuple[bool, ...], tuple[Any, ...]]] | None
    # Where the reader leaves a tensor's alignment untested (``spec`` None): the call's
    # specialization by its tensors' alignment, the rest being the layout's.
    specs: dict[tuple[bool, ...], tuple[Any, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class _Way:
    """One current rule of a plan, for the plan's layout."""

    rule: Rule
    judge: Callable[[Mapping[str, float]], int | None]  # its family's pick, if in range
    # Its configurations the site's space keeps, by index: none where its sweep never timed
    # one the space keeps (``ruled.unswept``: such a key is tuned, the general way says why).
    allowed: frozenset[int]
    picks: dict[int, _Pick] = field(default_factory=dict)  # one a configuration


@dataclass(slots=True)
class _Pick:
    """What a plan's keys launching one of the rule's configurations share."""

    decision: Decision
    result: dict[str, Any]  # the plan's result's fields, with the configuration
    # Its launchers, by specialization, holes and configuration-dependent keyword arguments
    # (``SharedLaunchers``' key but for the kernel, configuration and options: the pick's).
    launchers: dict[Any, Any] = field(default_factory=dict)


class RulePlans:
    """The plans of one site, and its ``resolve``: a plan's decision, else the general way's
    (from which a plan for the layout is made when a rule decided it)."""

    __slots__ = ("_plans", "_tries")

    def __init__(self) -> None:
        self._plans: list[_Plan] = []
        self._tries = 0

    def decide(self, site: Any, call: miss.Call) -> miss.Resolved | None:
        """A plan's decision for ``call``, a miss; None where no plan decides it."""
        for plan in self._plans:
            if call.kernel is plan.kernel:
                read = plan.read(call.args, call.static_kwargs)
                if read is not None:
                    # What the general way works out from the environment (the settings,
                    # the knobs, Triton's variables, where records are: the one comparison
                    # of the environment a planned miss makes), from the device and from the
                    # kernel is as it was when the plan was made, and the site's process
                    # context is still the plan's (another kernel's or device's miss
                    # replaces it).
                    part, device = plan.part, bt.device_facts()
                    if (
                        site.context_memo is part
                        and environ_unchanged(plan.environ)
                        and (device is part.device or device == part.device)
                        and bt.kernel_info(call.kernel) is part.info
                    ):
                        return _decide(plan, site, call, *read)
                    # Made under another environment, context, device or kernel: the
                    # general way decides, and leaves a plan of the layout as it is now.
                    self._plans = [p for p in self._plans if p is not plan]
                    break
        return None

    def resolve(self, site: Any, call: miss.Call) -> miss.Resolved:
        """``miss.resolve``, and a plan for the layout of a key a rule decided."""
        resolved = miss.resolve(site, call)
        if resolved.first.source == "empty":  # nothing launches: reset_to_zero= still zeroes
            zero_unlaunched(call, resolved)
        if resolved.first.source == "rule" and self._tries < MAX_TRIES:
            self._learn(site, call, resolved)
        return resolved

    def first_launch(
        self, site: Any, entry: Any, call: miss.Call, resolved: miss.Resolved
    ) -> LaunchResult:
        """Launch a new key's entry. A rule's pick that fails to build there (it cannot
        compile or run at the key's sizes, though it ran on the swept ones), or a record's
        choice (the kernel reads state its identity does not cover, changed since), is
        forgotten, refused for the key (``ruled.note_failed``) and the call made again: the
        key is tuned where tuning may run, else launched with the rule's next configuration
        that does not fail. Where the call fails again whatever it launches, the pick was
        not at fault: it stands, and the first error is raised. Under the interpreter a
        failed launch may have written its arguments before failing (a
        ``tl.static_assert`` after a store): its tensors are copied before the pick's launch
        and put back before the call is made again."""
        source = resolved.first.source
        redone = source in ("rule", "disk")
        saved = _in_place(call, resolved) if redone and resolved.tensors != () else []
        digest, chosen = resolved.result.digest, resolved.decision.config
        try:
            entry.launch(call.args, call.static_kwargs, call.bind)
            return resolved.first
        except Exception as err:
            if not redone or saved is None or not compat.is_build_failure(err):
                raise  # not the configuration's (an error a signal handler raised): the call's
            check_call_device(
                call.kernel, call.args, call.static_kwargs, site.label
            )  # a tensor on another GPU: not the pick's fault
            from tunedsl.runtime.ruled import forget_failed, note_failed

            note_failed(digest, chosen, err)
            failure = err
            for tensor, copy in saved:
                bt.copy_into(tensor, copy)
            saved = []  # the redo makes its own copies: not one set held per failed pick
        site.forget_decision(digest)
        c = call
        try:
            redone_result = site.launch(
                c.kernel, c.args, dict(c.static_kwargs), c.bind, c.key, c.lazy
            )
        except Exception:
            # The call fails whatever is launched (a heuristic or an assertion refusing the
            # input): the record's choice or rule's pick was not what failed, so it stands
            # (a pick redone in turn is unrefused as this unwinds), and the caller gets the
            # first error, not a tuning's "every configuration failed".
            forget_failed(digest, chosen)
            site.forget_decision(digest)
            raise failure from None
        record = resolved.decision.record
        if source == "disk" and record is not None:
            from tunedsl.warn import warn_once

            warn_once(
                f"failed-record:{record.id}",
                f"{site.label}: tuning record {record.id} chose {record.chosen}, which "
                f"fails on its first launch here ({type(failure).__name__}: {failure}"[:400]
                + f"); decided again: {redone_result.config} ({redone_result.source})",
                stacklevel="user",
            )
        return redone_result

    def _learn(self, site: Any, call: miss.Call, resolved: miss.Resolved) -> None:
        about = resolved.subject
        settings = about.settings
        if (
            call.lazy is not None
            or site.has_key
            or site.prune_reads
            or settings.prune is not None
            or settings.large
            or settings.verify not in (None, False)
            or settings.restore_value
            or settings.reset_to_zero
            or list(about.readable) != ["args"]
            or any(a is HOLE for a in call.args)  # a `$` tensor is keyed by what it gives
            or not about.rule_digest
            or distributed.active() is not None
            or site.context_memo is None
        ):
            return
        self._tries += 1
        # Taken before the rules are found: a change of the environment after it (the rule
        # directories named anew) drops the plan at its next miss.
        environ = environ_snapshot()
        from tunedsl.runtime.ruled import (  # (imported by the rule's miss)
            FAILED_PICKS,
            current_rules,
            unswept,
        )

        rules = find_rules(about.rule_digest)
        if not rules:
            return
        current = current_rules(rules, about.context)  # the first is the chosen rule
        family = key_features(about.readable)[0]
        if all(r.family_of(family) is None for r in current):  # (also: every rule stale)
            return
        info = about.info
        with_align = miss.keyed_by_alignment(info)
        read = make_reader(
            info.arg_names,
            call.args,
            call.static_kwargs,
            info.value_keyed,
            info.defaults,
            HOLE,
            with_align,
        )
        if read is None:
            return
        # The reader tests each part of the specialization (a tensor's alignment only where
        # the key has it): the same for every call it reads.
        spec = specialization(info, call.args, call.static_kwargs) if with_align else None
        kept = frozenset(settings.configs)
        names = tuple(read(call.args, call.static_kwargs)[2])  # type: ignore[index]
        ways = tuple(
            _Way(
                r,
                fam.judge(names) if fam is not None else _never,
                frozenset()
                if r.swept is not None and unswept(r.swept, settings.configs) is not None
                else frozenset(i for i, c in enumerate(r.configs) if c in kept),
            )
            for r in current
            for fam in (r.family_of(family),)
        )
        plan = _Plan(
            call.kernel,
            read,
            settings,
            site.context_memo,
            environ,
            unchanged_check(about.rule_digest, rules),
            ways,
            spec,
            record_stores().absence_check(),
            own_tail(space_digest(settings)),
            resolved.result,
            FAILED_PICKS,
            _locator(call, info, spec is None, bt.interpreting()),
        )
        others = [  # a plan for this layout made before (under another context) goes
            p
            for p in self._plans
            if p.kernel is not call.kernel or p.read(call.args, call.static_kwargs) is None
        ]
        self._plans = [*others[-(MAX_PLANS - 1) :], plan]


def _never(features: Mapping[str, float]) -> int | None:
    """The judge of a rule that swept no key of the plan's family."""
    return None


def _in_place(call: miss.Call, resolved: miss.Resolved) -> list[tuple[Any, Any]] | None:
    """Under the interpreter, the call's tensors, each with a copy (None where no copy could
    be made: a failed pick is not redone then). The interpreter runs a kernel's programs as
    it goes, so a launch that fails may have written any of them, named in
    ``restore_value=`` or not (the redo is tunedsl's own, not a tuning the user declared
    in-place arguments for). Elsewhere []: on a GPU a launch that raises (a compile error,
    too few resources) has run nothing, and a copy would cost every new key (and be recorded
    into a CUDA graph being captured)."""
    tensors = resolved.tensors  # a plan's: the layout's (() where not interpreting)
    if tensors == ():
        return []
    if tensors is None:
        if not bt.interpreting():
            return []
        from tunedsl.backends.inplace import data_arguments
        from tunedsl.model.keys import is_tensor

        bound = bt.bind_arguments(resolved.subject.info, call.args, call.static_kwargs)
        tensors = tuple(t for t in data_arguments(bound).values() if is_tensor(t))
    try:
        return [(t, bt.clone(t)) for t in tensors]
    except RuntimeError:  # out of memory for the copies
        return None


def _locator(
    call: miss.Call, info: Any, aligned: bool, interpreted: bool
) -> Callable[[Any, Any], tuple[tuple[bool, ...], tuple[Any, ...]]] | None:
    """A function of a call of this layout: its tensors' 16-byte alignment (where
    ``aligned``: the specialization's part the reader leaves untested) and the tensors a
    failed pick may have written (where ``interpreted``: ``_in_place`` copies them), each ()
    where not asked; None where neither is. The tensors are the layout's positions and
    keyword names that hold one, and the kernel's defaults that are (a layout's calls have
    the same classes in each place, and no tuple or descriptor: ``key_reader``)."""
    from tunedsl.model.keys import is_tensor

    if not aligned and not interpreted:
        return None
    at = [f"args[{i}]" for i, a in enumerate(call.args) if is_tensor(a)]
    at += [f"kwargs[{n!r}]" for n, v in call.static_kwargs.items() if is_tensor(v)]
    given = set(info.arg_names[: len(call.args)]) | set(call.static_kwargs)
    defaults = tuple(v for n, v in info.defaults.items() if n not in given and is_tensor(v))
    align = "".join(f"{t}.data_ptr() % 16 == 0, " for t in at) if aligned else ""
    tensors = f"({''.join(t + ', ' for t in at)}*DEFAULTS,)" if interpreted else "()"
    code = f"lambda args, kwargs: (({align}), {tensors})"
    return eval(code, {"DEFAULTS": defaults})  # type: ignore[no-any-return]


def _decide(
    plan: _Plan,
    site: Any,
    call: miss.Call,
    readable: dict[str, Any],
    text: str,
    features: Mapping[str, float],
) -> miss.Resolved | None:
    """The plan's decision for a new key of its layout, or None (the general way decides)."""
    # Nothing calls for the general way now (a sweep, ranks, arguments prune= reads).
    part = plan.part
    if (
        call.lazy is not None
        or site.prune_reads
        or not rules_decide()
        or distributed.active() is not None
    ):
        return None
    digest = part.digest.of_text(text)
    if site.decided(digest) is not None:
        return None
    # A record decides before a rule: where there may be one, the general way reads it (under
    # the key's digest, or under its space's own where another space's record held that).
    absent, own = plan.absent, sha256((digest + plan.own).encode()).hexdigest()
    if absent is None:
        stores = record_stores()
        if stores.get(digest) is not None or stores.get(own) is not None:
            return None
    elif not absent(digest, own):
        return None
    # The environment is the plan's (decide): the rule directories are, and only the files'
    # signatures are compared.
    if not plan.rules_unchanged():
        return None
    for way in plan.ways:
        index = way.judge(features)
        if index is not None:
            break
    else:
        return None  # in no rule's range: tuned, or the nearest pick with a warning
    if index not in way.allowed:
        return None
    pick = way.picks.get(index)
    if pick is None:
        config = way.rule.configs[index]
        options = decision_options(config, plan.settings, part.target)
        fields = {**plan.result.__dict__, "config": config}
        pick = way.picks[index] = _Pick(Decision(config, options, "rule", None), fields)
    decision = pick.decision
    config = decision.config
    if plan.failed and (digest, config) in plan.failed:
        return None  # it failed on this key's first launch: the general way refuses it
    # A grid with a zero dimension (an empty tensor) is decided the general way, which says
    # "empty" where every configuration's grid is empty and never asks a rule for it; a grid
    # that fails to bind (or holds a tensor): the general way says why.
    try:
        bound = call.bind(config)
        grid = bound[2]
        if grid == 0 if isinstance(grid, int) else isinstance(grid, tuple) and 0 in grid:
            return None
    except Exception:
        return None
    about = Subject(
        site.site_id,
        call.kernel,
        part.info,
        plan.settings,
        readable,
        part.context,
        digest,
        part.rule_digest,
        part.target,
    )
    result = object.__new__(LaunchResult)  # as LaunchResult.replaced, of the pick's fields
    result.__dict__.update(pick.result, key=readable, digest=digest)
    first = object.__new__(LaunchResult)  # this call's
    first.__dict__.update(pick.result, key=readable, digest=digest, source="rule")
    spec, tensors = plan.spec, ()
    if plan.locate is not None:
        aligned, tensors = plan.locate(call.args, call.static_kwargs)
        if spec is None:
            spec = plan.specs.get(aligned)
            if spec is None:
                spec = plan.specs[aligned] = specialization(
                    part.info, call.args, call.static_kwargs
                )
    # The launcher's key among the pick's: the configuration-dependent keyword arguments
    # with their values' classes (EVEN=True is not EVEN=1), as ``SharedLaunchers`` keys them.
    holes, dyn, _ = bound
    reuse = (
        pick.launchers,
        (spec, bool(holes), tuple(dyn.items()), tuple(map(type, dyn.values()))),
    )
    return miss.Resolved(decision, result, first, about, spec, bound, tensors, reuse)
