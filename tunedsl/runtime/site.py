"""``Site``: one autotuned launch location. The hot path lives here.

A call is: build the call key (``keys.py``), one dict lookup, ``bind`` the chosen
configuration, launch (``Entry.launch``), return the entry's precomputed ``LaunchResult``.
A call that repeats the last call's argument layout skips the key (the entry's repeat
check); where the C extension is installed, such a call is one C call, the entry's fused
launch (``fused.py``), which hands any other call back to this generic path. Everything else
(settings, records, tuning) happens on a miss, once per key: one thread of the process
resolves the key (``miss.py`` decides; a child forked meanwhile resolves it itself) while
the others missing it wait, then stores the new entry (``entry.py``) in its bounded table.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.backends import torch_compile
from tunedsl.backends.shared_launchers import SharedLaunchers
from tunedsl.errors import TunedslSyntaxError, TuningError, UsageError, at_site
from tunedsl.model import identity, keys, prune_keys, repeat_check
from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE
from tunedsl.model.settings import Settings
from tunedsl.model.variant import Variant
from tunedsl.runtime import (
    call_reset,
    call_values,
    key_mistakes,
    launch_effect,
    miss,
    mistakes,
    proving,
    rule_plans,
    site_settings,
    site_wrap,
    verified,
)
from tunedsl.runtime import entry as entries
from tunedsl.runtime.entry import Entry, Fused, drop_kernel, no_repeat, repeat_factory, store
from tunedsl.runtime.fused import fuse_entry, takes_whole_call
from tunedsl.runtime.result import LaunchResult

if TYPE_CHECKING:
    from tunedsl.runtime.decide import Decision

#: Call keys one site keeps decided in memory; beyond it the oldest-decided are dropped and
#: decided again (from the record, when there is one) if they come back.
MAX_DECISIONS = 4096
#: Kernels one site keeps besides its first (a kernel defined per call is a new one each time).
MAX_OTHER_KERNELS = 32


# Sites this thread resolves now: a call back into one from its hooks waits on its own key.
_resolving = threading.local()


def _active() -> list[Site]:
    return _resolving.__dict__.setdefault("sites", [])  # type: ignore[no-any-return]


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
        launch: str | None = None,
    ) -> None:
        self.filename = filename
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.kernel_text = kernel_text
        self.literal_space = space
        self.literal_hints = dict(static_hints)
        self.literal_options = dict(options)
        self.placeholders: tuple[tuple[str, int, int], ...] = tuple(placeholders)
        self.has_key = has_key
        self.launch_text = launch  # the expansion's per-configuration text (in the digest)
        self.site_id = identity.site_id(
            filename, line, col, kernel_text, self.literal_options.get("name")
        )
        self.label = f"{filename}:{line}:{col + 1} ({kernel_text})"
        # Hot-path state: the first kernel seen, its key function, the table.
        self._kernel: Any = None
        self._key_fn: Callable[..., tuple[Any, ...]] | None = None
        self._table: dict[Any, Entry] = {}
        self._max_entries = MAX_DECISIONS
        self.prune_reads: frozenset[str] = frozenset()  # by prune=: their values join the key
        self._base_key_fn: Callable[..., tuple[Any, ...]] | None = None
        self._per_device = False  # a host with mixed GPU models: the device joins the key
        # The last call's entry, when its repeat check tells a call of its key unbuilt.
        self._last: Entry | None = None
        self._fast: Fused | None = None  # the last entry's fused launch, if it has one
        self._seen: Entry | None = None  # last entry: a repeat check once its key comes twice
        # What the expansion calls: the last entry's fused launch where it takes the whole
        # call (one C call for a repeat; ``_call`` for a call it turns down), else ``_call``.
        self.launch: Callable[..., LaunchResult] = self._call
        self.launch_held = False  # traced by torch.compile, whose guards check launch: keep it
        self._repeat_factory: Callable[[Sequence[Any], Mapping[str, Any]], Any] | None = None
        self._other_kernels: dict[int, tuple[Any, keys.KernelToken, Callable[..., Any]]] = {}
        self._by_digest: dict[str, tuple[Any, LaunchResult]] = {}
        self.placeholders_checked = False
        self.reset_computed = self.verify_computed = False  # reset_to_zero=, verify= per call
        self.hints_computed = self.space_computed = False  # read per call, joined to the key
        self.keys_per_call = self.reads_per_call = False  # either; any: no repeat check
        self.named = "name" in self.literal_options  # name= gave the identity (site_id)
        # Literal settings with their environment, candidates whose fields the launch reads.
        self.settings_memo: tuple[tuple[Any, ...], Settings, object] | None = None
        self.fields_checked: Any = None
        self.context_memo: Any = None  # the process part of its keys' digests (miss.py)
        self._lock = threading.Lock()
        self._inflight: dict[Any, Any] = {}  # (pid, key) -> the lock its resolver holds meanwhile
        self._flight = proving.Flight(self._lock, self._inflight, self._table)  # and launches
        self._launchers: Any = None  # SharedLaunchers: one per specialization and config
        self._rule_plans = rule_plans.RulePlans()  # new sizes of a layout a rule decides

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
        """The call of ``autotune_launch`` and of expansions cached before ``launch``."""
        try:
            return self.launch(kernel, args, static_kwargs, bind, key, lazy)
        except (UsageError, TunedslSyntaxError) as err:  # the user's: the last frame is this
            __tracebackhide__ = True  # IPython and pytest hide this frame
            raise mistakes.at_user_frame(err) from None

    def _call(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: Callable[[Config], Any],
        key: Any,
        lazy: Callable[[], Any] | None,
    ) -> LaunchResult:
        # A repeat of the last call's layout: no key (_remember); else a key and a lookup.
        # Options read per call: the call's thunk evaluated once (call_values.once).
        entry, lazy = None, call_values.once(lazy) if self.reads_per_call and lazy else lazy
        try:
            fast = self._fast
            if fast is not None:
                result = fast(kernel, args, static_kwargs, bind)
                if result is not None:
                    return result  # type: ignore[no-any-return]
                entry = None  # another layout (the fused check is the repeat check): key it
            else:
                entry = self._last
            if (
                entry is None or kernel is not self._kernel or not entry.repeat(args, static_kwargs)  # type: ignore[misc]
            ):
                if kernel is self._kernel:
                    call_key = self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
                else:
                    call_key = self.call_key(kernel, args, static_kwargs, key)
                if self.keys_per_call:  # another hint or space given: another key
                    call_key = call_values.joined(call_key, lazy, self)
                try:
                    entry = self._table.get(call_key)
                except TypeError:  # an unhashable key= value (a list): use its tuple form
                    key_mistakes.check_key(key, self.label)
                    user_key = keys.hashable_user_key(key)
                    call_key = self.call_key(kernel, args, static_kwargs, user_key)
                    call_key = call_values.joined(call_key, lazy, self)
                    entry = self._table.get(call_key)
                if self.verify_computed:  # None where not checked under this call's verify=
                    entry = verified.hit_for_call(self, entry, verified.verify_of(lazy))
                if entry is None:
                    try:
                        return self._miss(kernel, args, static_kwargs, bind, key, lazy, call_key)
                    except UsageError as err:  # placed at the site (below: at the user's frame)
                        raise at_site(err, self.label) from None
                    except (TuningError, KeyboardInterrupt) as err:  # the user's frames only
                        __tracebackhide__ = True
                        raise mistakes.user_frames_only(at_site(err, self.label))  # noqa: B904 (-X dev: all frames)
                if entry.repeat is not no_repeat and kernel is self._kernel:
                    self._remember(entry, args, static_kwargs)
            if self.reset_computed:  # the entry zeroing what this call's reset_to_zero= names
                entry = call_reset.for_call(entry, kernel, args, lazy, self.label)
            entry.used = True  # one store: the bounded table keeps what is in use (entry.evict)
            entry.launch(args, static_kwargs, bind)
        except (UsageError, TunedslSyntaxError) as err:  # the user's: their line, not ours
            __tracebackhide__ = True  # IPython and pytest hide this frame
            raise mistakes.at_user_frame(err) from None
        except Exception as err:
            if self._flight and self._flight.refused_meanwhile(entry, self.forget_decision):
                return self._call(kernel, args, static_kwargs, bind, key, lazy)  # redone
            if isinstance(err, RuntimeError | TypeError) and torch_compile.traced_without_dynamo(self, kernel, args, static_kwargs, bind, key, lazy):  # fmt: skip
                return None  # type: ignore[return-value]  # fake tensors: as Dynamo traces
            mine = launch_effect.from_expression(err, self.filename)  # the user's blocks= raised
            if mine is None:
                raise
            __tracebackhide__ = True  # IPython and pytest hide this frame
            raise mine from None
        return entry.result

    def _remember(self, entry: Entry, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Make ``entry`` the one the next call checks first (a hit of another entry than the
        last). Only for the first kernel's plain call key (shapes keyed, no key=, prune, device)."""
        if self.reads_per_call:  # no repeat check: each call reads its values
            return
        if entry.repeat is None:
            if self._seen is not entry:  # not a repeat of the last call's key: not yet
                self._seen = entry
                return
            factory = self._repeat_factory
            usable = factory is not None and self._key_fn is self._base_key_fn and not self.has_key
            code = factory(args, kwargs) if usable else None  # type: ignore[misc]
            if code is None:
                entry.repeat = no_repeat
            else:
                fused = fuse_entry(self._kernel, entry, code, args, kwargs, self._call)
                entry.fused = fused
                entry.repeat = repeat_check.compile_repeat_check(code)
        with self._lock:  # an entry dropped meanwhile (clear, prune reads) has no_repeat;
            # read_per_call may have run since the check above: it wins
            if entry.repeat is not no_repeat and not self.reads_per_call:
                self._last = entry
                self._fast = entry.fused
                if not self.launch_held:
                    whole = takes_whole_call(entry.fused)
                    self.launch = entry.fused if whole else self._call  # type: ignore[assignment]

    def call_key(
        self, kernel: Any, args: Sequence[Any], static_kwargs: Mapping[str, Any], key: Any
    ) -> tuple[Any, ...]:
        """The call key (slow path: also registers a kernel seen for the first time)."""
        if kernel is self._kernel:
            return self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
        from tunedsl.backends.triton import kernel_info, mixed_device_models

        mistakes.check_kernel(kernel, self.label, self.kernel_text)
        info = kernel_info(kernel)
        self._per_device = mixed_device_models()
        key_fn = keys.make_call_key_fn(
            info.constexpr_positions,
            info.value_keyed,
            not self.has_key,
            HOLE,
            with_align=miss.keyed_by_alignment(info),
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
                    info.value_keyed,
                    not self.has_key,
                    HOLE,
                    with_align=miss.keyed_by_alignment(info),
                )
                self._repeat_factory = repeat_factory(info, HOLE)
                self._kernel = kernel
                if self.prune_reads or self._per_device:
                    self._install_key(info)
                    return self._key_fn(args, static_kwargs, key)  # type: ignore[misc]
                return result
            other = self._other_kernels.get(id(kernel))
            if other is None or other[0] is not kernel:
                if len(self._other_kernels) >= MAX_OTHER_KERNELS:  # the oldest and its entries go
                    dropped, token, _ = self._other_kernels.pop(next(iter(self._other_kernels)))
                    drop_kernel(self._table, self._launchers, dropped, token)
                other = (kernel, keys.KernelToken(len(self._other_kernels) + 1), key_fn)
                self._other_kernels[id(kernel)] = other
        out = (other[1], *other[2](args, static_kwargs, key))
        if self.prune_reads:
            part = prune_keys.make_prune_part(info.arg_names, self.prune_reads)
            out += (part(args, static_kwargs),)
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
        reads = self.prune_reads
        prune = prune_keys.make_prune_part(info.arg_names, reads) if reads else None
        per_device = self._per_device
        if prune is None and not per_device:
            self._key_fn = base
            return
        from tunedsl.backends.triton import current_device_index

        def key_fn(args: Sequence[Any], kwargs: Mapping[str, Any], key: Any) -> tuple[Any, ...]:
            out = base(args, kwargs, key)
            if prune is not None:
                out = (*out, prune(args, kwargs))
            return (*out, ("device", current_device_index())) if per_device else out

        self._key_fn = key_fn

    # -- misses: the site's decision table ----------------------------------------------
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
        """No entry for ``call_key``: the plan for its layout decides it (``rule_plans``), else
        one thread resolves it (``miss.resolve``; the call is described only now) while the
        others wait; the site stores the entry and launches."""
        if torch_compile.traced_without_dynamo(self, kernel, args, static_kwargs, bind, key, lazy):
            return None  # type: ignore[return-value]  # never tune on a trace's fake tensors
        if self.has_key:  # on a miss only: a hit costs nothing more
            key_mistakes.check_key(key, self.label)
        if (precompiling := site_wrap.miss_hook()) is not None:  # this thread's precompile
            return precompiling(self, kernel, args, static_kwargs, bind, key, lazy)  # type: ignore[no-any-return]
        call = miss.Call(kernel, args, static_kwargs, bind, key, lazy)
        planned = self._rule_plans.decide(self, call)  # a new size of a layout a rule decides
        if planned is not None:  # at once, running no user code: no other thread need wait
            return self._rule_plans.first_launch(
                self, self._add(call, call_key, planned), call, planned
            )
        active = _active()
        resolving = (os.getpid(), call_key)  # not a key a parent's thread was resolving
        while True:
            hinted = self.keys_per_call  # only ever turns on
            if hinted:  # a key built before the site knew its hints are computed lacks them
                call_key = self.call_key(kernel, args, static_kwargs, keys.hashable_user_key(key))
                call_key = call_values.joined(call_key, lazy, self)
                resolving = (os.getpid(), call_key)
            with self._lock:
                entry = self._table.get(call_key)
                busy = self._inflight.get(resolving)
                if entry is None and busy is None and self not in active:
                    busy = self._inflight[resolving] = threading.Lock()  # not an Event: cheaper
                    busy.acquire()
                    break  # this thread resolves the key
            if self.verify_computed and entry is not None:  # resolved meanwhile: checked?
                if verified.hit_for_call(self, entry, verified.verify_of(lazy)) is None:
                    continue  # not under this call's verify=: forgotten, resolved under it
            if entry is not None:
                if self.reset_computed:
                    entry = call_reset.for_call(entry, kernel, args, lazy, self.label)
                entry.launch(args, static_kwargs, bind)
                return entry.result
            if self in active:  # waiting on its own key would wait forever
                raise mistakes.reentered(self.label, busy is not None)
            assert busy is not None
            with busy:  # another thread resolves this key: wait for it, then look again
                pass
        active.append(self)
        knobs.environ_checks(True)  # the environment compared once for the whole decision
        entry = None
        try:
            reads, stored_key = self.prune_reads, call_key
            resolved = self._rule_plans.resolve(self, call)  # miss.resolve, then a plan
            if resolved.first.source == "empty":
                return resolved.first  # no program under any configuration: nothing kept
            if self.prune_reads is not reads or self.keys_per_call != hinted:  # the key grew
                stored_key = self.call_key(kernel, args, static_kwargs, keys.hashable_user_key(key))
                stored_key = call_values.joined(stored_key, lazy, self)
            entry = self._add(call, stored_key, resolved)
        finally:
            knobs.environ_checks(False)
            active.remove(self)
            if entry is None:  # failed, or nothing kept: the waiters look again now
                self._flight.release(resolving, busy)
        with self._flight.first_launch(entry, resolving, busy):  # the key's waiters wait on
            return self._rule_plans.first_launch(self, entry, call, resolved)

    def forget_decision(self, digest: str) -> None:
        """Drop the in-memory entries and the decision of ``digest`` (a rule's failed pick)."""
        with self._lock:
            self._forget_all()
            self._by_digest.pop(digest, None)

    def _add(self, call: miss.Call, call_key: Any, resolved: miss.Resolved) -> Entry:
        """Keep the decision by its digest and a new entry for ``call_key`` (not launched)."""
        shared = self._launchers = self._launchers or SharedLaunchers()
        entry = entries.new_entry(shared, call, resolved, (self.label, miss.grid_arg(self)))
        with self._lock:
            self._by_digest[resolved.result.digest] = (resolved.decision, resolved.result)
            store(self._table, self._by_digest, self._max_entries, call_key, entry)
        self._seen = entry  # the key's next call, if it comes next, builds its check
        return entry

    def decided(self, digest: str) -> tuple[Decision, LaunchResult] | None:
        """The decision made in memory for a record digest (under another call key)."""
        return self._by_digest.get(digest)

    def note_prune_reads(self, prune: Any, read: set[str], not_held: Sequence[str]) -> None:
        """``prune=`` read these arguments: their values join the key (``not_held``: those
        this call shows key= does not hold, each named once: ``prune_key_holds.py``)."""
        names = frozenset(n for n in read if isinstance(n, str))
        if self.has_key and not_held:
            mistakes.warn_prune_splits_key(self.label, prune, not_held)
        if names <= self.prune_reads:
            return
        with self._lock:
            self.prune_reads = self.prune_reads | names
            # Entries keyed without these values can never match again: drop them.
            self._forget_all()
            if self._kernel is not None and self._base_key_fn is not None:
                from tunedsl.backends.triton import kernel_info

                self._install_key(kernel_info(self._kernel))

    def settings(self, lazy: miss.Lazy | None) -> Settings:
        """The site's settings for a key being decided (``site_settings.py``)."""
        return site_settings.settings(self, lazy)

    def read_per_call(self, what: str, first_space: Any = None) -> None:
        """Read ``what`` on every call from now on: ``"reset"``, ``"verify"`` (``call_reset.py``,
        ``verified.py``), ``"hints"`` or ``"space"`` (joined to the key, ``call_values.py``;
        ``first_space``: what decided so far); no call takes the repeat check or fused launch."""
        with self._lock:
            self.reset_computed |= what == "reset"
            self.verify_computed |= what == "verify"
            self.hints_computed |= what == "hints"
            self.space_computed |= what == "space"
            self.keys_per_call = self.hints_computed or self.space_computed
            self.reads_per_call = True
            if not call_values.rekeyed(self._table, what, first_space):
                self._forget_all()  # entries keyed without the value never match again
            self._last = self._fast = self._seen = None
            self.launch = self._call

    def variants(
        self,
        kernel: Any,
        args: tuple[Any, ...],
        static_kwargs: dict[str, Any],
        bind: miss.Bind,
        key: Any,
        lazy: miss.Lazy | None,
    ) -> tuple[tuple[Any, ...], list[Variant]]:
        """The call key and every feasible variant of the (pruned) space for this call."""
        call = miss.Call(kernel, args, static_kwargs, bind, key, lazy)
        bound, _ = miss.variants(self, call, self.settings(lazy))
        call_key = self.call_key(kernel, args, static_kwargs, keys.hashable_user_key(key))
        return call_values.joined(call_key, lazy, self), bound

    # -- introspection -----------------------------------------------------------------
    def table(self) -> dict[Any, LaunchResult]:
        """The in-memory decisions: call key -> result."""
        with self._lock:
            return {k: e.result for k, e in self._table.items()}

    def clear(self) -> None:
        """Forget in-memory decisions and what was built for them (records on disk stay)."""
        with self._lock:
            self._forget_all()
            self._by_digest.clear()
            self._launchers = self.context_memo = None

    def kernels(self) -> list[Any]:
        """The kernels launched here and kept: the first (None before any), then the others."""
        return [self._kernel, *(other[0] for other in self._other_kernels.values())]

    def hold_launch(self) -> None:
        """Keep ``launch`` the site's own call from now on (torch.compile's guards read it)."""
        with self._lock:  # _remember sets launch under it
            self.launch_held = True
            self.launch = self._call

    def _forget_all(self) -> None:
        """Drop every decision in memory; caller holds the lock. A thread about to make a
        dropped entry the last one (``_remember``) sees its repeat check gone."""
        for entry in self._table.values():
            entry.repeat = no_repeat  # callable: a thread may be about to call it
        self._last = self._fast = self._seen = None
        self.launch = self._call
        self._table.clear()
