"""``Site``: one autotuned launch location. The hot path lives here.

A call is: build the call key (``keys.py``), one dict lookup, ``bind`` the chosen
configuration, launch, return the entry's precomputed ``LaunchResult``. Everything else
(settings, records, tuning) happens on a miss, in ``_resolve``, once per key: several
threads missing the same key wait for the one that resolves it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from types import FunctionType
from typing import Any

from tunedsl import knobs
from tunedsl.errors import UsageError
from tunedsl.model import identity, keys
from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE, fill_holes
from tunedsl.model.settings import (
    LazyCandidates,
    ReadRecorder,
    Settings,
    apply_prune,
    resolve,
)
from tunedsl.model.space import Space, check_placeholders
from tunedsl.model.variant import Variant
from tunedsl.runtime import mistakes
from tunedsl.runtime.result import LaunchResult


class _KernelToken:
    """Prefix of the call keys of a site's second, third... kernel (the first has none)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<kernel {self.index}>"


class Entry:
    """The decision for one call key: configuration, launcher, results. Immutable in use,
    but for ``used``: set by every hit, cleared by the table's eviction sweep (``_evict``)."""

    __slots__ = (
        "config",
        "launcher",
        "repeat",
        "result",
        "used",
        "zero_kw",
        "zero_pos",
        "zeroing",
    )

    def __init__(
        self,
        config: Config,
        launcher: Callable[..., Any],
        result: LaunchResult,
        zero_pos: tuple[int, ...],
        zero_kw: tuple[str, ...],
    ) -> None:
        self.config = config
        # The bound __call__ of a launcher object: calling it skips the type-slot lookup
        # of calling the instance (about 0.1 us per call).
        defined = type(launcher).__dict__.get("__call__")
        self.launcher = launcher.__call__ if isinstance(defined, FunctionType) else launcher  # type: ignore[operator]
        self.result = result
        self.zero_pos = zero_pos
        self.zero_kw = zero_kw
        self.zeroing = bool(zero_pos or zero_kw)
        self.used = False
        # The repeat check (keys.make_repeat_check) of this entry's argument layout: built
        # at its first hit; _no_repeat where the layout has none or the entry was dropped.
        self.repeat: Callable[[Sequence[Any], Mapping[str, Any]], bool] | None = None

    def launch(
        self, args: Sequence[Any], static_kwargs: Mapping[str, Any], bind: Callable[[Config], Any]
    ) -> None:
        holes, dyn_kwargs, grid = bind(self.config)
        if holes:
            args = fill_holes(args, holes)
        if self.zeroing:
            self.zero(args, static_kwargs, dyn_kwargs)
        self.launcher(grid, args, static_kwargs, dyn_kwargs, holes)

    def zero(
        self, args: Sequence[Any], static_kwargs: Mapping[str, Any], dyn_kwargs: Mapping[str, Any]
    ) -> None:
        # An optional buffer passed as None is skipped (as Triton does).
        for i in self.zero_pos:
            if args[i] is not None:
                args[i].zero_()
        for name in self.zero_kw:
            value = static_kwargs.get(name) if name in static_kwargs else dyn_kwargs.get(name)
            if value is not None:
                value.zero_()


# Sites this thread is resolving (tuning) right now: a call back into one of them from its
# own pre_hook/post_hook/verify would wait forever on its own in-flight key.
_resolving = threading.local()


class Site:
    """One autotune site. ``site(kernel, args, static_kwargs, bind, key, lazy)`` launches."""

    def __init__(
        self,
        filename: str,
        line: int,
        col: int,
        kernel_text: str,
        space: Any,
        static_hints: Mapping[str, Any],
        options: Mapping[str, Any],
        placeholders: Sequence[tuple[str, int, int]] = (),
        has_key: bool = False,
        end_line: int | None = None,
        end_col: int | None = None,
    ) -> None:
        self.filename = filename
        self.line = line
        self.col = col
        self.end_line = end_line
        self.end_col = end_col
        self.kernel_text = kernel_text
        self.literal_space = space
        self.literal_hints = dict(static_hints)
        self.literal_options = dict(options)
        self.placeholders = tuple(placeholders)
        self.has_key = has_key
        self.site_id = identity.site_id(
            filename, line, col, kernel_text, self.literal_options.get("name")
        )
        self.label = f"{filename}:{line}:{col + 1} ({kernel_text})"
        # Hot-path state: the first kernel seen, its key function, the table.
        self._kernel: Any = None
        self._key_fn: Callable[..., tuple[Any, ...]] | None = None
        self._table: dict[Any, Entry] = {}
        self._max_entries = knobs.max_decisions()
        # Arguments the site's prune= has read (their values join the call key).
        self._prune_reads: frozenset[str] = frozenset()
        self._base_key_fn: Callable[..., tuple[Any, ...]] | None = None
        self._per_device = False  # a host with mixed GPU models: the device joins the key
        # The entry of the last call, when its repeat check can tell a call with the same
        # key without building the key (the serving loop: same layout every step).
        self._last: Entry | None = None
        self._repeat_factory: Callable[[Sequence[Any]], Any] | None = None
        # Slow-path state.
        self._other_kernels: dict[int, tuple[Any, _KernelToken, Callable[..., Any]]] = {}
        self._by_digest: dict[str, tuple[Any, LaunchResult]] = {}
        self._placeholders_checked = False
        self._key_config: Config | None = None
        self.kwargs_tensors: tuple[str, ...] | None = None  # plain API: kwargs= tensors
        self._lock = threading.Lock()
        self._inflight: dict[Any, threading.Event] = {}

    def __repr__(self) -> str:
        return f"<tunedsl site {self.label}>"

    # -- the hot path -------------------------------------------------------------------
    def __call__(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: Callable[[Config], Any],
        key: Any,
        lazy: Callable[[], Any] | None,
    ) -> LaunchResult:
        # The last call's entry when this call repeats its key (checked without building
        # the key: see _remember), else the key and a table lookup.
        entry = self._last
        if (
            entry is None or kernel is not self._kernel or not entry.repeat(args, static_kwargs)  # type: ignore[misc]
        ):
            if kernel is self._kernel:
                call_key = self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
            else:
                try:
                    call_key = self.call_key(kernel, args, static_kwargs, key)
                except UsageError as err:  # the user's mistake: show the user's line, not ours
                    __tracebackhide__ = True  # IPython and pytest hide this frame
                    raise mistakes.at_user_frame(err) from None
            try:
                entry = self._table.get(call_key)
            except TypeError:  # an unhashable key= value (a list): use its tuple form
                call_key = self.call_key(kernel, args, static_kwargs, keys.hashable_user_key(key))
                entry = self._table.get(call_key)
            if entry is None:
                try:
                    return self._miss(kernel, args, static_kwargs, bind, key, lazy, call_key)
                except UsageError as err:
                    __tracebackhide__ = True
                    raise mistakes.at_user_frame(err) from None
            if entry.repeat is not _no_repeat and kernel is self._kernel:
                self._remember(entry, args, static_kwargs)
        # Entry.launch, inlined: this is the hot path.
        entry.used = True  # one store: the bounded table keeps what is in use (_evict)
        holes, dyn_kwargs, grid = bind(entry.config)
        if holes:
            args = fill_holes(args, holes)
        if entry.zeroing:
            entry.zero(args, static_kwargs, dyn_kwargs)
        entry.launcher(grid, args, static_kwargs, dyn_kwargs, holes)
        return entry.result

    def _remember(
        self, entry: Entry, args: Sequence[Any], static_kwargs: Mapping[str, Any]
    ) -> None:
        """Make ``entry`` the one the next call checks first (a hit of another entry than
        the last). Only for the first kernel's plain call key: shapes keyed, no ``key=``,
        no argument values of prune, no device part, no keyword arguments."""
        if entry.repeat is None:
            factory = self._repeat_factory
            usable = (
                factory is not None
                and not static_kwargs
                and self._key_fn is self._base_key_fn
                and not self.has_key
            )
            entry.repeat = (factory(args) if usable else None) or _no_repeat  # type: ignore[misc]
        with self._lock:  # an entry dropped meanwhile (clear, prune reads) has _no_repeat
            if entry.repeat is not _no_repeat:
                self._last = entry

    def call_key(
        self, kernel: Any, args: Sequence[Any], static_kwargs: Mapping[str, Any], key: Any
    ) -> tuple[Any, ...]:
        """The call key (slow path: also registers a kernel seen for the first time)."""
        if kernel is self._kernel:
            return self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
        from tunedsl.backends.triton import kernel_info, mixed_device_models
        from tunedsl.backends.triton_launch import direct_launch_enabled

        mistakes.check_kernel(kernel, self.label, self.kernel_text)
        info = kernel_info(kernel)
        self._per_device = mixed_device_models()
        key_fn = keys.make_call_key_fn(
            info.constexpr_positions,
            info.constexpr_names,
            not self.has_key,
            HOLE,
            with_align=info.jit and direct_launch_enabled(),
        )
        with self._lock:
            if self._kernel is kernel:  # another thread registered it meanwhile
                return self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
            if self._kernel is None:
                result = key_fn(args, static_kwargs, key)  # registers tensor classes first
                self._base_key_fn = self._key_fn = keys.specialize_call_key_fn(
                    key_fn,
                    args,
                    static_kwargs,
                    info.constexpr_positions,
                    info.constexpr_names,
                    not self.has_key,
                    HOLE,
                    with_align=info.jit and direct_launch_enabled(),
                )
                self._repeat_factory = _repeat_factory(info, HOLE)
                self._kernel = kernel
                if self._prune_reads or self._per_device:
                    self._install_key(info)
                    return self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
                return result
            other = self._other_kernels.get(id(kernel))
            if other is None or other[0] is not kernel:
                other = (kernel, _KernelToken(len(self._other_kernels) + 1), key_fn)
                self._other_kernels[id(kernel)] = other
        out = (other[1], *other[2](args, static_kwargs, key))
        if self._prune_reads:
            out += (keys.make_prune_part(info.arg_names, self._prune_reads)(args, static_kwargs),)
        if self._per_device:
            from tunedsl.backends.triton import current_device_index

            out += (("device", current_device_index()),)
        return out

    def _install_key(self, info: Any) -> None:
        """Key the first kernel's calls on the values of the arguments prune reads, and on
        the current device on a host with mixed GPU models; only such sites pay for it
        (every other site keeps the generated key function). Caller holds the lock."""
        base = self._base_key_fn
        assert base is not None
        if self._prune_reads:
            part = keys.make_prune_part(info.arg_names, self._prune_reads)
            if self._per_device:
                from tunedsl.backends.triton import current_device_index as device

                def key_fn(
                    args: Sequence[Any], kwargs: Mapping[str, Any], key: Any
                ) -> tuple[Any, ...]:
                    return (*base(args, kwargs, key), part(args, kwargs), ("device", device()))

            else:

                def key_fn(
                    args: Sequence[Any], kwargs: Mapping[str, Any], key: Any
                ) -> tuple[Any, ...]:
                    return (*base(args, kwargs, key), part(args, kwargs))

        elif self._per_device:
            from tunedsl.backends.triton import current_device_index as device

            def key_fn(args: Sequence[Any], kwargs: Mapping[str, Any], key: Any) -> tuple[Any, ...]:
                return (*base(args, kwargs, key), ("device", device()))

        else:
            key_fn = base
        self._key_fn = key_fn

    def _note_prune_reads(self, kernel: Any, info: Any, read: set[str]) -> None:
        names = frozenset(n for n in read if isinstance(n, str))
        if names <= self._prune_reads:
            return
        with self._lock:
            self._prune_reads = self._prune_reads | names
            # Entries keyed without these values can never match again: drop them.
            self._forget_all()
            if self._kernel is not None and self._base_key_fn is not None:
                from tunedsl.backends.triton import kernel_info

                self._install_key(kernel_info(self._kernel))

    # -- misses -------------------------------------------------------------------------
    def _miss(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: Callable[[Config], Any],
        key: Any,
        lazy: Callable[[], Any] | None,
        call_key: Any,
    ) -> LaunchResult:
        while True:
            with self._lock:
                entry = self._table.get(call_key)
                if entry is not None:
                    break
                event = self._inflight.get(call_key)
                if event is None:
                    event = self._inflight[call_key] = threading.Event()
                    owner = True
                else:
                    owner = False
            if not owner:
                if self in _active():
                    raise UsageError(
                        f"{self.label}: the site was called again from its own pre_hook=, "
                        "post_hook=, verify= or prune= while it was deciding this key; launch "
                        "another kernel (or call the kernel directly) from hooks"
                    )
                event.wait()  # another thread resolves this key; then look again
                continue
            active = _active()
            if self in active:
                with self._lock:
                    self._inflight.pop(call_key, None)
                event.set()
                raise UsageError(
                    f"{self.label}: the site was called again from its own pre_hook=, "
                    "post_hook=, verify= or prune= while it was deciding a key; launch another "
                    "kernel (or call the kernel directly) from hooks"
                )
            active.append(self)
            try:
                entry, first = self._resolve(kernel, args, static_kwargs, bind, key, lazy)
                # Recomputed: the key may have grown by the arguments prune= reads.
                stored_key = self.call_key(kernel, args, static_kwargs, keys.hashable_user_key(key))
                with self._lock:
                    table = self._table
                    if len(table) >= self._max_entries:
                        # Bounded: drop an eighth, the least recently used (a dropped key
                        # that comes back is decided again from its record, not re-tuned).
                        _evict(table, max(1, len(table) // 8))
                        if len(self._by_digest) >= self._max_entries:
                            for old in list(self._by_digest)[: max(1, len(self._by_digest) // 8)]:
                                del self._by_digest[old]
                    table[stored_key] = entry
            finally:
                active.remove(self)
                with self._lock:
                    self._inflight.pop(call_key, None)
                event.set()
            entry.launch(args, static_kwargs, bind)
            return first
        entry.launch(args, static_kwargs, bind)
        return entry.result

    def settings(self, lazy: Callable[[], Any] | None) -> Settings:
        space, hints, options = (
            self.literal_space,
            dict(self.literal_hints),
            dict(self.literal_options),
        )
        if lazy is not None:
            lazy_space, lazy_hints, lazy_options = lazy()
            if lazy_space is not None:
                space = lazy_space
            hints.update(lazy_hints or {})
            options.update(lazy_options or {})
        settings = resolve(space, hints, options, self.label)
        if settings.name is not None and settings.name != self.site_id:
            self.site_id = settings.name  # a computed name= (evaluated on the first call)
        if not self._placeholders_checked:
            if self.literal_space is None:
                check_placeholders(
                    self.placeholders, settings.configs or (settings.default,), self.filename
                )
            self._placeholders_checked = True
        return settings

    def variants(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: Callable[[Config], Any],
        key: Any,
        lazy: Callable[[], Any] | None,
    ) -> tuple[Any, list[Variant]]:
        """The call key and every feasible variant of the (pruned) space for this call."""
        call_key = self.call_key(kernel, args, static_kwargs, keys.hashable_user_key(key))
        settings = self.settings(lazy)
        variants, _ = self._variants(kernel, args, static_kwargs, bind, settings)
        return call_key, variants

    def _variants(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: Mapping[str, Any],
        bind: Callable[[Config], Any],
        settings: Settings,
        configs: Sequence[Config] | None = None,
    ) -> tuple[list[Variant], dict[Config, str]]:
        from tunedsl.backends import triton as bt
        from tunedsl.model.hints import InfeasibleConfig, launch_options

        if configs is None:
            configs = self._prune(kernel, args, static_kwargs, settings)
        target = bt.target_facts()
        variants: list[Variant] = []
        infeasible: dict[Config, str] = {}
        for cfg in configs:
            try:
                options = launch_options(cfg, settings.hints, target)
            except InfeasibleConfig as err:
                infeasible[cfg] = str(err)
                continue
            holes, dyn_kwargs, grid = bind(cfg)
            variants.append(
                Variant(
                    config=cfg,
                    args=fill_holes(args, holes) if holes else tuple(args),
                    kwargs={**static_kwargs, **dyn_kwargs},
                    grid=_grid(grid),
                    options=options,
                )
            )
        return variants, infeasible

    def _prune(
        self,
        kernel: Any,
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        settings: Settings,
    ) -> tuple[Config, ...]:
        """The configurations ``prune`` keeps for this call (all without prune=), noting
        which arguments it read. A space too large to list gives ``LazyCandidates``
        (membership per point; prune= runs on each proposed batch)."""
        if settings.prune is None and not settings.large:
            return settings.configs
        from tunedsl.backends import triton as bt

        info = bt.kernel_info(kernel)
        plain = {n: a for n, a in zip(info.arg_names, args, strict=False) if a is not HOLE}
        recorder = ReadRecorder({**plain, **static_kwargs})
        if settings.large:
            lazy = LazyCandidates(settings, recorder)
            if settings.prune is not None:  # learn which arguments it reads (for the key)
                settings.prune([settings.default], recorder)
                self._note_prune_reads(kernel, info, recorder.read)
            return lazy  # type: ignore[return-value]
        configs = apply_prune(settings, recorder)
        self._note_prune_reads(kernel, info, recorder.read)
        return configs

    def _resolve(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: Callable[[Config], Any],
        key: Any,
        lazy: Callable[[], Any] | None,
    ) -> tuple[Entry, LaunchResult]:
        """Decide the configuration for a new call key: memory, disk, default or tuning."""
        from tunedsl.backends import capture
        from tunedsl.backends import triton as bt
        from tunedsl.runtime import decide, distributed

        settings = self.settings(lazy)
        info = bt.kernel_info(kernel)
        candidates = self._prune(kernel, args, static_kwargs, settings)
        user_key = keys.hashable_user_key(key) if self.has_key else None
        readable = keys.readable_key(
            info.arg_names,
            args,
            static_kwargs,
            user_key if self.has_key else None,
            info.constexpr_names,
            HOLE,
        )
        if self.has_key and user_key is None:
            readable["user_key"] = None
        if self._prune_reads:
            readable["prune"] = keys.readable_prune(
                info.arg_names, args, static_kwargs, self._prune_reads
            )
        context = decide.context(info, settings)
        digest = keys.digest(self.site_id, readable, context)
        known = self._by_digest.get(digest)
        if known is not None:
            # Decided under another call key with the same record key (keyword order,
            # other strides of one pattern, another alignment). The entry is new all the
            # same: its launcher must capture its own Triton specialization.
            decision, result = known
            return self._entry(
                kernel, info, args, static_kwargs, settings, decision, result
            ), result
        # Under CUDA-graph capture a key is never tuned (backends/capture.py).
        decision = capture.decide_on_miss(
            settings,
            self.label,
            readable,
            lambda settings: distributed.decider(decide.decide)(
                self.site_id,
                kernel,
                info,
                settings,
                readable,
                context,
                digest,
                lambda configs: self._variants(
                    kernel,
                    args,
                    static_kwargs,
                    bind,
                    settings,
                    candidates if configs is None else configs,
                ),
                candidates,
                lambda cfg: self._check(
                    kernel, args, static_kwargs, bind, settings, candidates, cfg
                ),
            ),
        )
        result = LaunchResult(
            config=decision.config,
            source="memory",
            key=readable,
            digest=digest,
            site=self.site_id,
            record=decision.record,
            space=settings.configs,
        )
        self._by_digest[digest] = (decision, result)
        first = result.with_source(decision.source)
        if decision.source == "tuned" and knobs.print_autotuning():
            decide.print_table(self.label, first, sys.stdout)
        return self._entry(kernel, info, args, static_kwargs, settings, decision, result), first

    def _check(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: Callable[[Config], Any],
        settings: Settings,
        candidates: Sequence[Config],
        chosen: Config,
    ) -> str | None:
        """verify= for a decision this process did not tune: ``chosen`` against the
        reference (verify=fn) or the first candidate; None when it agrees."""
        from tunedsl.engine.request import TuneRequest
        from tunedsl.runtime.tuner import check_choice

        reference = None if callable(settings.verify) else candidates[0]
        if reference == chosen:
            return None
        configs = [chosen] if reference is None else [reference, chosen]
        variants, infeasible = self._variants(kernel, args, static_kwargs, bind, settings, configs)
        if infeasible:
            return "infeasible here: " + "; ".join(infeasible.values())
        return check_choice(
            TuneRequest(
                kernel=kernel,
                variants=variants,
                restore_value=settings.restore_value,
                reset_to_zero=settings.reset_to_zero,
                verify=settings.verify,
                rtol=settings.rtol,
                atol=settings.atol,
                pre_hook=settings.pre_hook,
                post_hook=settings.post_hook,
            )
        )

    def _entry(
        self,
        kernel: Any,
        info: Any,
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        settings: Settings,
        decision: Any,
        result: LaunchResult,
    ) -> Entry:
        from tunedsl.backends.triton_launch import make_launcher

        positional = info.arg_names[: len(args)]
        zero_pos = tuple(i for i, n in enumerate(positional) if n in settings.reset_to_zero)
        zero_kw = tuple(n for n in settings.reset_to_zero if n not in positional)
        # Decisions from tuning or a record launch the same variant in every process: its
        # binary is stored by the first process and loaded (not compiled) by later ones.
        stored = decision.source in ("tuned", "disk")
        launcher = make_launcher(kernel, decision.options, args, static_kwargs, stored)
        return Entry(decision.config, launcher, result, zero_pos, zero_kw)

    def key_config(self, space: Any, default: Any) -> Config:
        """The configuration whose arguments key a plain-API call with ``args=fn``."""
        cfg = self._key_config
        if cfg is None:
            from tunedsl.model.config import as_config
            from tunedsl.model.space import expand_space, search_space

            if default is not None:
                cfg = as_config(default, "default=")
            elif isinstance(space, Mapping | Space):  # the first valid point, never listing
                cfg = next(iter(search_space(space).iter_valid()), None) or expand_space(space)[0]
            else:
                cfg = expand_space(space)[0]
            self._key_config = cfg
        return cfg

    # -- introspection -----------------------------------------------------------------
    def table(self) -> dict[Any, LaunchResult]:
        """The in-memory decisions: call key -> result."""
        with self._lock:
            return {k: e.result for k, e in self._table.items()}

    def clear(self) -> None:
        """Forget in-memory decisions (records on disk stay)."""
        with self._lock:
            self._forget_all()
            self._by_digest.clear()

    def _forget_all(self) -> None:
        """Drop every decision in memory; caller holds the lock. A thread about to make a
        dropped entry the last one (``_remember``) sees its repeat check gone."""
        for entry in self._table.values():
            entry.repeat = _no_repeat  # callable: a thread may be about to call it
        self._last = None
        self._table.clear()


def _active() -> list[Site]:
    active: list[Site] | None = getattr(_resolving, "sites", None)
    if active is None:
        active = _resolving.sites = []
    return active


def _no_repeat(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """The repeat check of an entry that has none: never a repeat."""
    return False


def _repeat_factory(info: Any, hole: object) -> Callable[[Sequence[Any]], Any] | None:
    """The builder of repeat checks for a kernel's calls (``keys.make_repeat_check`` with
    the backend's tensor layout check), or None when tunedsl's repeat checks are off."""
    if not knobs.repeat_check():
        return None
    from tunedsl.backends.compat import layout_check
    from tunedsl.backends.triton_launch import direct_launch_enabled

    with_align = info.jit and direct_launch_enabled()

    def factory(args: Sequence[Any]) -> Any:
        return keys.make_repeat_check(
            args, info.constexpr_positions, hole, with_align, layout_check
        )

    return factory


def _grid(grid: Any) -> tuple[int, ...]:
    return mistakes.grid_dims(grid)  # checks, with the fix in the message


def _evict(table: dict[Any, Entry], count: int) -> None:
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
