"""A site's miss path (runtime layer): a call key seen for the first time, decided once.

``Site.__call__`` (``site.py``, the hot path) finds no entry for a call key and hands the call
here, described by a ``Call`` (built only on a miss, never per launch). ``miss`` makes one
thread resolve the key while the others missing it wait; ``resolve`` reads the site's
settings, prunes the candidates and computes the ``Resolution`` (kernel facts, readable key,
digest), then decides through memory, the record stores, the default or tuning
(``decide.py``, under ``backends/capture.py`` and ``distributed.py``); the entry is stored in
the site's bounded table and launched.

The site's public ``settings`` and ``variants`` (precompile's view of a call) are here too.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.errors import UsageError
from tunedsl.model import keys
from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE, fill_holes
from tunedsl.model.settings import (
    LazyCandidates,
    ReadRecorder,
    Settings,
    apply_prune,
)
from tunedsl.model.settings import (
    resolve as resolve_settings,
)
from tunedsl.model.space import check_placeholders
from tunedsl.model.variant import Variant
from tunedsl.runtime import mistakes
from tunedsl.runtime.result import LaunchResult

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo
    from tunedsl.runtime.decide import Decision
    from tunedsl.runtime.site import Entry, Site

#: ``bind(config) -> (hole values, configuration-dependent keyword args, grid)``: the
#: expansion's per-configuration part of a call (docs/ARCHITECTURE.md, the contract).
Bind = Callable[[Config], tuple[tuple[Any, ...], dict[str, Any], Any]]
#: ``lazy() -> (non-literal space or None, non-literal hints, non-literal options)``.
Lazy = Callable[[], tuple[Any, Mapping[str, Any] | None, Mapping[str, Any] | None]]


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a new key resolved to before deciding: the site, the kernel's facts, the
    settings, the readable key and its digest (with the process context in the digest)."""

    site: Site
    info: KernelInfo
    settings: Settings
    readable: dict[str, Any]
    context: dict[str, Any]
    digest: str


# Sites this thread is resolving (tuning) right now: a call back into one of them from its
# own pre_hook/post_hook/verify would wait forever on its own in-flight key.
_resolving = threading.local()


def _active() -> list[Site]:
    active: list[Site] | None = getattr(_resolving, "sites", None)
    if active is None:
        active = _resolving.sites = []
    return active


def miss(site: Site, call: Call, call_key: Hashable) -> LaunchResult:
    """Decide ``call_key`` (one thread per key; the others wait for it), store the entry in
    the site's table and launch."""
    while True:
        with site._lock:
            entry = site._table.get(call_key)
            if entry is not None:
                break
            event = site._inflight.get(call_key)
            if event is None:
                event = site._inflight[call_key] = threading.Event()
                owner = True
            else:
                owner = False
        if not owner:
            if site in _active():
                raise UsageError(
                    f"{site.label}: the site was called again from its own pre_hook=, "
                    "post_hook=, verify= or prune= while it was deciding this key; launch "
                    "another kernel (or call the kernel directly) from hooks"
                )
            event.wait()  # another thread resolves this key; then look again
            continue
        active = _active()
        if site in active:
            with site._lock:
                site._inflight.pop(call_key, None)
            event.set()
            raise UsageError(
                f"{site.label}: the site was called again from its own pre_hook=, "
                "post_hook=, verify= or prune= while it was deciding a key; launch another "
                "kernel (or call the kernel directly) from hooks"
            )
        active.append(site)
        try:
            entry, first = resolve(site, call)
            # Recomputed: the key may have grown by the arguments prune= reads.
            stored_key = site.call_key(
                call.kernel, call.args, call.static_kwargs, keys.hashable_user_key(call.key)
            )
            with site._lock:
                _store(site, stored_key, entry)
        finally:
            active.remove(site)
            with site._lock:
                site._inflight.pop(call_key, None)
            event.set()
        entry.launch(call.args, call.static_kwargs, call.bind)
        return first
    entry.launch(call.args, call.static_kwargs, call.bind)
    return entry.result


def _store(site: Site, call_key: Hashable, entry: Entry) -> None:
    """Put ``entry`` in the site's table (the caller holds the site's lock)."""
    table = site._table
    if len(table) >= site._max_entries:
        # Bounded: drop an eighth, the least recently used (a dropped key that comes back
        # is decided again from its record, not re-tuned).
        evict(table, max(1, len(table) // 8))
        by_digest = site._by_digest
        if len(by_digest) >= site._max_entries:
            for old in list(by_digest)[: max(1, len(by_digest) // 8)]:
                del by_digest[old]
    table[call_key] = entry


def evict(table: dict[Any, Entry], count: int) -> None:
    """Drop ``count`` entries, least recently used first, by the clock ("second chance")
    approximation of LRU: in insertion order, an entry hit since the last sweep (``used``)
    is spared and moved to the back; the first ``count`` not hit are dropped. It costs the
    hot path one attribute store, where exact LRU would reorder the table on every hit."""
    dropped = 0
    for key in list(table):
        entry = table.pop(key)
        if entry.used:
            entry.used = False
            table[key] = entry  # to the back: the most recently used end
            continue
        dropped += 1
        if dropped == count:
            return
    for key in list(table)[: count - dropped]:  # every entry was in use: the oldest go
        del table[key]


# -- settings and candidates -----------------------------------------------------------------


def settings(site: Site, lazy: Lazy | None) -> Settings:
    """The site's settings: its literal parts, updated by the ``lazy`` thunk's. Literal
    settings are resolved once per value of the knobs they read (a literal space is not
    expanded again for every new key)."""
    if lazy is None:
        knob_values = (
            knobs.autotune_mode(),
            knobs.effort(),
            knobs.search(),
            knobs.budget_s(),
            knobs.isolate(),
            knobs.timing(),
        )
        memo = site._settings_memo
        if memo is not None and memo[0] == knob_values:
            return memo[1]  # type: ignore[no-any-return]
        out = _settings(site, None)
        site._settings_memo = (knob_values, out)
        return out
    return _settings(site, lazy)


def _settings(site: Site, lazy: Lazy | None) -> Settings:
    space, hints, options = (
        site.literal_space,
        dict(site.literal_hints),
        dict(site.literal_options),
    )
    if lazy is not None:
        lazy_space, lazy_hints, lazy_options = lazy()
        if lazy_space is not None:
            space = lazy_space
        hints.update(lazy_hints or {})
        options.update(lazy_options or {})
    out = resolve_settings(space, hints, options, site.label)
    if out.name is not None and out.name != site.site_id:
        site.site_id = out.name  # a computed name= (evaluated on the first call)
    if not site._placeholders_checked:
        if site.literal_space is None:
            check_placeholders(site.placeholders, out.configs or (out.default,), site.filename)
        site._placeholders_checked = True
    return out


def variants(
    site: Site, call: Call, settings: Settings, configs: Sequence[Config] | None = None
) -> tuple[list[Variant], dict[Config, str]]:
    """``configs`` (default: the candidates ``prune=`` keeps) bound to ``call``, with the
    configurations whose launch hints are infeasible here and why."""
    from tunedsl.backends import triton as bt
    from tunedsl.model.hints import InfeasibleConfig, launch_options

    if configs is None:
        configs = candidates(site, call, settings)
    target = bt.target_facts()
    out: list[Variant] = []
    infeasible: dict[Config, str] = {}
    for cfg in configs:
        try:
            options = launch_options(cfg, settings.hints, target)
        except InfeasibleConfig as err:
            infeasible[cfg] = str(err)
            continue
        holes, dyn_kwargs, grid = call.bind(cfg)
        if not out:  # the launch binds the same way for every configuration
            mistakes.check_launch(
                call.kernel,
                bt.kernel_info(call.kernel),
                fill_holes(call.args, holes) if holes else call.args,
                {**call.static_kwargs, **dyn_kwargs},
                site.label,
            )
        out.append(
            Variant(
                config=cfg,
                args=fill_holes(call.args, holes) if holes else tuple(call.args),
                kwargs={**call.static_kwargs, **dyn_kwargs},
                grid=mistakes.grid_dims(grid),  # checks, with the fix in the message
                options=options,
            )
        )
    return out, infeasible


def candidates(site: Site, call: Call, settings: Settings) -> Sequence[Config]:
    """The configurations ``prune`` keeps for this call (all without prune=), noting which
    arguments it read. A space too large to list gives ``LazyCandidates`` (membership per
    point; prune= runs on each proposed batch)."""
    if settings.prune is None and not settings.large:
        return settings.configs
    from tunedsl.backends import triton as bt

    info = bt.kernel_info(call.kernel)
    plain = {n: a for n, a in zip(info.arg_names, call.args, strict=False) if a is not HOLE}
    recorder = ReadRecorder({**plain, **call.static_kwargs})
    if settings.large:
        lazy = LazyCandidates(settings, recorder)
        if settings.prune is not None:  # learn which arguments it reads (for the key)
            settings.prune([settings.default], recorder)
            _note_prune_reads(site, settings.prune, recorder.read)
        return lazy  # type: ignore[return-value]
    configs = apply_prune(settings, recorder)
    _note_prune_reads(site, settings.prune, recorder.read)
    return configs


def _note_prune_reads(site: Site, prune: Any, read: set[str]) -> None:
    """``prune=`` read these arguments: from now on their values are part of the key."""
    names = frozenset(n for n in read if isinstance(n, str))
    if names <= site._prune_reads:
        return
    if site.has_key:
        mistakes.warn_prune_splits_key(site.label, prune, sorted(names - site._prune_reads))
    with site._lock:
        site._prune_reads = site._prune_reads | names
        # Entries keyed without these values can never match again: drop them.
        site._forget_all()
        if site._kernel is not None and site._base_key_fn is not None:
            from tunedsl.backends.triton import kernel_info

            site._install_key(kernel_info(site._kernel))


# -- resolving a key -------------------------------------------------------------------------


def resolution(site: Site, call: Call, settings: Settings) -> Resolution:
    """The readable key and digest of ``call`` (after ``candidates``: prune= may have
    grown the key by the arguments it reads)."""
    from tunedsl.backends import triton as bt
    from tunedsl.runtime import decide

    info = bt.kernel_info(call.kernel)
    user_key = keys.hashable_user_key(call.key) if site.has_key else None
    # The numbers a kwargs= function returns alike for every configuration are call values
    # for prune= (below, when it reads them), not part of the record key: records keep the
    # key they had before such values reached prune=.
    fixed = site.kwargs_fixed or ()
    keyed = {k: v for k, v in call.static_kwargs.items() if k not in fixed or keys.is_tensor(v)}
    readable = keys.readable_key(
        info.arg_names, call.args, keyed, user_key, info.constexpr_names, HOLE
    )
    if site.has_key and user_key is None:
        readable["user_key"] = None
    if site._prune_reads:
        readable["prune"] = keys.readable_prune(
            info.arg_names, call.args, call.static_kwargs, site._prune_reads
        )
    context = decide.context(info, settings)
    digest = keys.digest(site.site_id, readable, context)
    return Resolution(site, info, settings, readable, context, digest)


def resolve(site: Site, call: Call) -> tuple[Entry, LaunchResult]:
    """Decide the configuration for a new call key: memory, records, default or tuning.
    Returns the entry to store and the first call's result (its ``source`` says which)."""
    from tunedsl.backends import capture
    from tunedsl.runtime import decide, distributed

    chosen_settings = settings(site, call.lazy)
    kept = candidates(site, call, chosen_settings)
    # A lazy space is not listed: its fields are not probed. The same candidates (no
    # prune=, literal settings) are probed once: each call binds them the same way.
    if not chosen_settings.large and kept is not site._fields_checked:
        mistakes.check_fields_read(
            call.bind, kept, {name for name, _, _ in site.placeholders}, site.label
        )
        site._fields_checked = kept
    res = resolution(site, call, chosen_settings)
    known = site._by_digest.get(res.digest)
    if known is not None:
        # Decided under another call key with the same record key (keyword order, other
        # strides of one pattern, another alignment). The entry is new all the same: its
        # launcher must capture its own Triton specialization.
        decision, result = known
        return site._entry(call, res, decision, result), result

    def decide_with(settings: Settings) -> Decision:
        subject = decide.Subject(
            site.site_id, call.kernel, res.info, settings, res.readable, res.context, res.digest
        )
        return distributed.decider(decide.decide)(
            subject,
            lambda configs: variants(site, call, settings, kept if configs is None else configs),
            kept,
            lambda cfg: check(site, call, settings, kept, cfg),
        )

    # Under CUDA-graph capture a key is never tuned (backends/capture.py).
    decision = capture.decide_on_miss(chosen_settings, site.label, res.readable, decide_with)
    result = LaunchResult(
        config=decision.config,
        source="memory",
        key=res.readable,
        digest=res.digest,
        site=site.site_id,
        record=decision.record,
        space=chosen_settings.configs,
    )
    site._by_digest[res.digest] = (decision, result)
    first = result.with_source(decision.source)
    if decision.source == "tuned" and knobs.print_autotuning():
        decide.print_table(site.label, first, sys.stdout)
    return site._entry(call, res, decision, result), first


def check(
    site: Site, call: Call, settings: Settings, candidates: Sequence[Config], chosen: Config
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
    return check_choice(
        TuneRequest(
            kernel=call.kernel,
            variants=bound,
            restore_value=settings.restore_value,
            reset_to_zero=settings.reset_to_zero,
            verify=settings.verify,
            rtol=settings.rtol,
            atol=settings.atol,
            pre_hook=settings.pre_hook,
            post_hook=settings.post_hook,
        )
    )
