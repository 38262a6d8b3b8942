"""A site's miss path (runtime layer): a call key seen for the first time, resolved once.

``Site`` (``site.py``, the hot path) finds no entry for a call key, makes sure one thread
resolves it while the others missing it wait, and hands the call here, described by a
``Call`` (built only on a miss, never per launch). ``resolve`` reads the site's settings,
prunes the candidates and computes the ``Subject`` (kernel facts, readable key,
digest), then decides through the site's memory, the record stores, the default or tuning
(``decide.py``, under ``backends/capture.py`` and ``distributed.py``) and returns the
decision as a ``Resolved``: the site builds the entry, stores it in its table and launches.
This module reads a site only through ``SiteView``.

The candidates and bound variants of a call (precompile's view of it) are here too.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import tunedsl.backends.capture as capture
import tunedsl.backends.triton as bt
import tunedsl.runtime.decide as decide
import tunedsl.runtime.distributed as distributed
import tunedsl.runtime.verified as verified
from tunedsl import knobs
from tunedsl.backends.kernel_source import reads_program_count
from tunedsl.errors import TuningError, UsageError
from tunedsl.frontend import rebinding
from tunedsl.model import keys, prune_closure, prune_keys
from tunedsl.model.config import Config
from tunedsl.model.grid_limits import check_grid
from tunedsl.model.hole import HOLE, ReplaceArgs, fill_holes
from tunedsl.model.key_digest import KeyDigest
from tunedsl.model.prune_key_holds import KeyHolds, key_text
from tunedsl.model.settings import LazyCandidates, Settings, apply_prune
from tunedsl.model.variant import Variant
from tunedsl.runtime import (
    launch_binding,
    launch_effect,
    many_keys,
    mistakes,
    space_records,
    tuning_table,
)
from tunedsl.runtime.call_device import check_call_device
from tunedsl.runtime.prune_args import prune_args
from tunedsl.runtime.result import LaunchResult
from tunedsl.runtime.subject import Subject
from tunedsl.store.rules import rule_digest

if TYPE_CHECKING:
    from tunedsl.runtime.decide import Decision

#: ``bind(config) -> (hole values, configuration-dependent keyword args, grid)``: the
#: expansion's per-configuration part of a call (docs/ARCHITECTURE.md, the contract).
Bind = Callable[[Config], tuple[tuple[Any, ...], dict[str, Any], Any]]
#: ``lazy() -> (non-literal space or None, non-literal hints, non-literal options)``.
Lazy = Callable[[], tuple[Any, Mapping[str, Any] | None, Mapping[str, Any] | None]]


@dataclass(slots=True)  # not frozen: made on every miss, where a frozen init costs twice
class Call:
    """One call of a site, as the expansion makes it: built only on a miss (or by
    precompile), so the hot path never allocates one."""

    kernel: Any  # a @triton.jit function, or anything launched as kernel[grid](...)
    args: tuple[Any, ...]  # positional launch arguments; $-dependent ones are HOLE
    static_kwargs: Mapping[str, Any]  # keyword launch arguments that use no $
    bind: Bind
    key: Any  # the key= value, or None
    lazy: Lazy | None  # the non-literal settings, evaluated when a key is decided

    def positional(self) -> tuple[Any, ...]:
        """The call as the site's arguments, in the expansion contract's order."""
        return (self.kernel, self.args, self.static_kwargs, self.bind, self.key, self.lazy)


class SiteView(Protocol):
    """What resolving a key reads from its site, and the things it tells it."""

    label: str
    site_id: str
    has_key: bool
    placeholders: tuple[tuple[str, int, int], ...]
    prune_reads: frozenset[str]  # arguments prune= has read: their values join the key
    fields_checked: Any  # the candidates whose fields the launch was seen to read
    context_memo: Any  # the process part of its keys' digests (``subject``)
    launch_text: str | None  # the launch's per-configuration text (the DSL's; in the digest)
    kernel_text: str  # the launch's kernel as written; "autotune_launch" for that API's sites

    def settings(self, lazy: Lazy | None) -> Settings:
        """The site's settings, with the non-literal parts ``lazy`` gives."""

    def note_prune_reads(self, prune: Any, read: set[str], not_held: Sequence[str]) -> None:
        """``prune=`` read these arguments: their values join the key from now on
        (``not_held``: those this call shows ``key=`` does not hold, to be warned about)."""

    def decided(self, digest: str) -> tuple[Decision, LaunchResult] | None:
        """The decision (and result) already made in memory for a record digest."""


@dataclass(slots=True)  # not frozen: made on every miss, where a frozen init costs twice
class Resolved:
    """A new key decided: the decision, the result later calls return (source
    ``memory``), this first call's result, and what it was about (the site's entry reads
    the kernel's facts and the settings; the site keeps the decision by its digest)."""

    decision: Decision
    result: LaunchResult
    first: LaunchResult
    subject: Subject
    spec: tuple[Any, ...] | None = None  # Triton's specialization of the call, where known
    bound: Any = None  # the call's bind(config) (holes, keyword arguments, grid), where made
    tensors: tuple[Any, ...] | None = None  # what a failed pick may write (None: find them)
    reuse: tuple[dict[Any, Any], Any] | None = None  # a plan's launchers, and this call's key


# -- candidates -------------------------------------------------------------------------------


def variants(
    site: SiteView, call: Call, settings: Settings, configs: Sequence[Config] | None = None
) -> tuple[list[Variant], dict[Config, str]]:
    """``configs`` (default: the candidates ``prune=`` keeps) bound to ``call``, with the
    configurations whose launch hints are infeasible here and why."""
    from tunedsl.backends import triton as bt
    from tunedsl.model.hints import InfeasibleConfig, launch_options

    if configs is None:  # precompile's view of a call: what its first call checks, too
        configs = candidates(site, call, settings)
        launch_effect.check_fields_read(site, call.bind, configs, settings.large)
        check_named(site, call, settings)
    target = bt.target_facts()
    out: list[Variant] = []
    first_names: tuple[str, ...] = ()
    infeasible: dict[Config, str] = {}
    for cfg in configs:
        try:
            options = launch_options(cfg, settings.hints, target)
        except InfeasibleConfig as err:
            infeasible[cfg] = str(err)
            continue
        except UsageError as err:  # a static hint of several values, or of a wrong type
            raise UsageError(f"{site.label}: {err}") from None
        try:
            holes, dyn_kwargs, grid = call.bind(cfg)
        except Exception as err:  # the user's expression, raising under this configuration
            launch_effect.note_bind_failed(err, cfg, site.label)
            raise
        if not out:  # checked in full once; a later one where its keywords differ
            launch_binding.check_first(call, settings, cfg, holes, dyn_kwargs, site)
            first_names = tuple(dyn_kwargs)
        else:
            launch_binding.check_later(
                call, settings, cfg, holes, dyn_kwargs, first_names, site.label
            )
        kwargs = {**call.static_kwargs, **dyn_kwargs}
        grid = mistakes.grid_dims(grid, site.label, grid_arg(site), site.launch_text)
        check_grid(grid, site.label, grid_arg(site), target.backend)  # what CUDA launches
        out.append(
            Variant(
                config=cfg,
                args=fill_holes(call.args, holes) if holes else tuple(call.args),
                kwargs=kwargs,
                grid=grid,
                options=bt.heuristic_launch_options(call.kernel, options, kwargs),
            )
        )
    if out:  # the launch as it runs: a field that never reaches the kernel, empty grids
        launch_effect.check_fields_passed(out, bt.kernel_info(call.kernel).arg_names, site.label)
        launch_effect.warn_grid_only(out, lambda: reads_program_count(call.kernel), site.label)
        out, empty = launch_effect.drop_empty_grids(out, site.label)
        infeasible.update(empty)
    return out, infeasible


def grid_arg(site: SiteView) -> str:
    """The argument the user wrote the grid in: ``grid=`` of ``autotune_launch``, else ``blocks=``."""
    return "grid=" if site.kernel_text == "autotune_launch" else "blocks="


def candidates(site: SiteView, call: Call, settings: Settings) -> Sequence[Config]:
    """The configurations ``prune`` keeps for this call (all without prune=), noting which
    arguments it read. A space too large to list gives ``LazyCandidates`` (membership per
    point; prune= runs on each proposed batch)."""
    if settings.prune is None and not settings.large:
        return settings.configs
    from tunedsl.backends import triton as bt

    info = bt.kernel_info(call.kernel)
    plain_api = site.kernel_text == "autotune_launch"  # whose args= may be a function
    recorder = prune_args(info.arg_names, call, settings, plain_api)
    given = dict(dict.items(recorder))  # its own items() would mark every name read
    data_read: dict[str, str] = {}  # tensors whose data prune reads: no key holds it
    watch = contextlib.nullcontext()
    if call.key is None and settings.prune is not None:
        from tunedsl.backends.tensor_reads import data_reads

        watch = data_reads(given, data_read)  # type: ignore[assignment]
    with watch:
        if settings.large:
            found: Sequence[Config] = LazyCandidates(settings, recorder)  # type: ignore[assignment]
            if settings.prune is None:
                return found
            settings.prune([settings.default], recorder)  # learn which arguments it reads
        else:
            found = apply_prune(settings, recorder)
    if data_read:
        _tensor_data_read(site.label, settings.prune, data_read)
    site.note_prune_reads(settings.prune, recorder.read, _not_held(site, recorder, call.key))
    alone = site.kernel_text != "autotune_launch" or settings.name is None
    prune_closure.check(
        settings.prune, site.label, call.key, info.arg_names, call.args, rebinding, call.lazy,
        alone, _holds(site, "closure"),
    )  # fmt: skip
    return found


def _tensor_data_read(label: str, prune: Any, data_read: Mapping[str, str]) -> None:
    """A ``UsageError``: ``prune`` read the data of a tensor argument, which no key holds."""
    from tunedsl.backends.tensor_reads import described
    from tunedsl.errors import callable_name

    name, method = next(iter(data_read.items()))
    raise UsageError(
        f"{label}: prune={callable_name(prune)} reads {described(name, method)}, which joins "
        "no key (a tensor's is its dtype, shape and strides), so the decision made for one call "
        "would be reused for a call that differs there, launching a configuration its prune "
        "drops. Pass the value prune needs to the kernel as a number of its own, read as "
        'args["..."], whose value then joins the key, or put it in key= '
        f"(key=int({name}.max()), key=({name}.shape, {name}.requires_grad), say)"
    )


def _not_held(site: SiteView, recorder: Any, key: Any) -> list[str]:
    """The arguments ``prune=`` read that this call shows the ``key=`` value does not hold,
    not named before (``prune_key_holds.py``: judged over every call the site decides, so a
    value that equals a key item on one call by coincidence hides nothing)."""
    if not site.has_key:
        return []
    read = {n: v for n, v in dict.items(recorder) if n in recorder.read}  # no read marked
    return _holds(site, "args").not_held(read, key)


def _holds(site: SiteView, reads: str) -> KeyHolds:
    """The site's one record of what its key held on the calls so far, of the arguments
    prune reads (``"args"``) or of the caller's values it reads (``"closure"``): made once
    even where threads tuning other keys of the site miss at once."""
    with _holds_lock:
        per_site = _key_holds.setdefault(site, {})
        if reads not in per_site:
            per_site[reads] = KeyHolds(key_text(site.launch_text or ""))
        return per_site[reads]


_key_holds: weakref.WeakKeyDictionary[Any, dict[str, KeyHolds]] = weakref.WeakKeyDictionary()
_holds_lock = threading.Lock()


# -- resolving a key -------------------------------------------------------------------------


def keyed_by_alignment(info: Any) -> bool:
    """Whether a tensor's 16-byte alignment is in the call and record keys of this kernel's
    calls: for a ``JITFunction`` (one the direct launch may launch; Triton compiles an
    unaligned tensor's kernel apart), whether launches bypass its dispatcher or not. It
    never follows ``TUNEDSL_SAFE``: a site keeps the key function it made, and a direct
    launcher made after the direct launch was turned back on must find alignment in it."""
    return bool(info.jit)


def subject(site: SiteView, call: Call, settings: Settings) -> Subject:
    """What deciding ``call`` is about: the kernel's facts, the readable key and the digest
    (after ``candidates``: prune= may have grown the key by the arguments it reads)."""
    info = bt.kernel_info(call.kernel)
    user_key = keys.hashable_user_key(call.key) if site.has_key else None
    # What a kwargs= function returns alike for every configuration is keyed as a
    # positional argument is (a tensor by layout, an int by Triton's class, a constexpr by
    # value): it is in the call key, and a record key without it would merge the kernels
    # Triton compiles apart (n % 16 == 0 or not, a stride of 1 or not) under one key=.
    # A tensor's alignment is in the call key where launches bypass Triton's dispatcher
    # (site.call_key); an unaligned one is another Triton kernel, so its record is another.
    readable = keys.readable_key(
        info.arg_names,
        _tensor_holes_filled(call, settings),
        call.static_kwargs,
        user_key,
        info.value_keyed,
        HOLE,
        info.defaults,
        with_align=keyed_by_alignment(info),
    )
    if site.has_key and user_key is None:
        readable["user_key"] = None
    if site.prune_reads:
        readable["prune"] = prune_keys.readable_prune(
            info.arg_names, call.args, call.static_kwargs, site.prune_reads
        )
    part = process_part(site, info, settings)
    try:
        digest = part.digest(readable)
    except ValueError as err:  # an int past the digits Python writes as text (4300)
        raise UsageError(
            f"{site.label}: this call's key cannot be written ({err}). Fix: key= a value of "
            "fewer digits (a bucket, or the int's bit length)"
        ) from None
    return Subject(
        site.site_id,
        call.kernel,
        info,
        settings,
        readable,
        part.context,
        digest,
        part.rule_digest,
        part.target,
    )


def _tensor_holes_filled(call: Call, settings: Settings) -> tuple[Any, ...]:
    """The call's positional arguments for its record key: a ``$`` argument that gives a
    tensor (a buffer picked per configuration, ``scratch[$split]``) keyed by the tensor it
    gives under the default configuration, since its dtype and layout change the kernel
    Triton compiles and so the best choice, and may follow what the rest of the key does
    not hold; any other ``$`` argument (a number of the configuration) stays ``"$"``.
    ``Entry`` checks that later calls of the key give tensors of the same dtype and layout."""
    if not any(a is HOLE for a in call.args):
        return call.args
    try:
        holes = call.bind(settings.default)[0]
    except Exception:  # the expression fails under the default: the candidates' binding says
        return call.args
    if isinstance(holes, ReplaceArgs):  # the plain API keys args= by the default already
        return call.args
    filled = iter(holes)
    out = []
    for a in call.args:
        value = next(filled, HOLE) if a is HOLE else a
        out.append(value if a is not HOLE or keys.is_tensor(value) else HOLE)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _ProcessPart:
    """What every key of a site shares in its digest, and what it was worked out under."""

    site_id: str
    info: Any
    settings: Settings
    environ: object  # knobs.environ_snapshot(): Triton's variables are read from it
    device: Mapping[str, Any]
    context: dict[str, Any]
    digest: KeyDigest
    rule_digest: str
    target: Any  # the device's launch-option facts (model.hints.TargetFacts)


def process_part(site: SiteView, info: Any, settings: Settings) -> _ProcessPart:
    """The context, the digest of its keys and the rule name of a site's key: worked out
    again only when the site's name, kernel or settings, the current device's facts or the
    environment (Triton's cache-invalidating variables) changed since the last key."""
    device = bt.device_facts()
    memo: _ProcessPart | None = site.context_memo
    if (
        memo is not None
        and memo.info is info
        and memo.settings is settings
        and memo.site_id == site.site_id
        and (memo.device is device or memo.device == device)
        and knobs.environ_unchanged(memo.environ)
    ):
        return memo
    environ = knobs.environ_snapshot()
    context = decide.context(info, settings, device, bt.triton_env(), site.launch_text)
    rule = rule_digest(site.site_id, context["kernel"], context["hints"], context["env"])
    memo = _ProcessPart(
        site.site_id,
        info,
        settings,
        environ,
        device,
        context,
        KeyDigest(site.site_id, context),
        rule,
        bt.target_of(device),
    )
    site.context_memo = memo
    return memo


def resolve(site: SiteView, call: Call) -> Resolved:
    """Decide the configuration for a new call key: memory, records, default or tuning.
    The site stores what it returns (its ``first.source`` says where it came from)."""
    check_call_device(call.kernel, call.args, call.static_kwargs, site.label)
    chosen_settings = site.settings(call.lazy)
    kept = candidates(site, call, chosen_settings)
    launch_effect.check_fields_read(site, call.bind, kept, chosen_settings.large)
    about = subject(site, call, chosen_settings)
    check_named(site, call, chosen_settings)
    known = site.decided(about.digest)
    if known is not None and not space_records.made_in(known[0].record, chosen_settings):
        known = None  # another lazy space's (neither lists its configurations: both are ())
    if known is not None and verified.result_needs_check(known[1], chosen_settings.verify):
        known = None  # decided without this verify= check: checked as a record is (decide.py)
    if known is not None and known[1].space == chosen_settings.configs and known[0].config in kept:
        # Decided under another call key of this record key (keyword order, other strides of
        # one pattern, an alignment it does not keep), in this space (a space read per call
        # may give another), and kept by prune= here (which may read what it leaves out:
        # strides). The entry is new: its launcher captures its own spec.
        decision, result = known
        return Resolved(decision, result, result, about)

    def decide_with(settings: Settings) -> Decision:
        # Under capture, with the mode the capture allows.
        this = about if settings is chosen_settings else replace(about, settings=settings)
        return distributed.decider(decide.decide)(
            this,
            lambda configs: variants(site, call, settings, kept if configs is None else configs),
            kept,
            lambda cfg: check(site, call, settings, kept, cfg),
        )

    # Under CUDA-graph capture a key is never tuned (backends/capture.py).
    try:
        decision = capture.decide_on_miss(chosen_settings, site.label, about.readable, decide_with)
    except TuningError as err:  # which key failed, for a caller running many (a sweep)
        if err.key is None:
            err.key = about.readable
        raise
    verified.note(about.digest, decision.config, chosen_settings.verify, decision.source)
    result = LaunchResult(
        config=decision.config,
        source="memory",
        key=about.readable,
        digest=about.digest,
        site=site.site_id,
        record=decision.record,
        space=chosen_settings.configs,
    )
    first = result.with_source(decision.source)
    if decision.source == "tuned":
        many_keys.note_tuned(site.site_id, about.digest, about.readable, site.label, site.has_key)
        if knobs.print_autotuning():
            tuning_table.print_table(site.label, first, sys.stdout)
    return Resolved(decision, result, first, about)


def check_named(site: SiteView, call: Call, settings: Settings) -> None:
    """``restore_value=``, ``reset_to_zero=`` and ``verify=[...]`` name tensor parameters:
    checked on every new key, however it is decided (a record or a rule decides without
    tuning, and a misspelled ``reset_to_zero`` would go unnoticed on every hit)."""
    verify = settings.verify
    if not (settings.restore_value or settings.reset_to_zero or isinstance(verify, list | tuple)):
        return
    from tunedsl.backends import hooks
    from tunedsl.backends import triton as bt

    holes, dyn_kwargs, _ = call.bind(settings.default)
    args = fill_holes(call.args, holes) if holes else call.args
    info = bt.kernel_info(call.kernel)
    bound = bt.bind_arguments(info, args, {**call.static_kwargs, **dyn_kwargs})
    hooks.check_named(bound, settings, info, site.label)


def check(
    site: SiteView, call: Call, settings: Settings, candidates: Sequence[Config], chosen: Config
) -> str | None:
    """verify= for a decision this process did not tune: ``chosen`` against the reference
    (verify=fn) or the first candidate; None when it agrees."""
    from tunedsl.engine.request import TuneRequest
    from tunedsl.runtime.tuner import check_choice

    reference = None if callable(settings.verify) else candidates[0]
    if reference == chosen:  # verify=True/[names] compares configurations: here, none
        return None
    configs = [chosen] if reference is None else [reference, chosen]
    bound, infeasible = variants(site, call, settings, configs)
    if infeasible:
        return "infeasible here: " + "; ".join(infeasible.values())
    return check_choice(TuneRequest(kernel=call.kernel, variants=bound, settings=settings))
