"""``Entry``: the decision for one call key of a site, and the bounded table's eviction.

A site (``site.py``) keeps one entry per call key it has decided: the configuration, the
launcher that captured the key's Triton specialization (``backends/triton_launch.py``), the
result a call returns, and the per-layout repeat check and fused launch (``fused.py``) its
hits build. ``Entry.launch`` is the generic path's launch; the fused launch, where there is
one, is its C fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import FunctionType
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.model import repeat_check
from tunedsl.model.config import Config
from tunedsl.model.hole import ReplaceArgs, fill_holes
from tunedsl.model.keys import is_tensor, is_tensor_descriptor, readable_value
from tunedsl.runtime.result import LaunchResult

if TYPE_CHECKING:
    from tunedsl.backends.shared_launchers import SharedLaunchers
    from tunedsl.runtime.miss import Call, Resolved

#: The launchers a plan keeps per pick (a bound on a pick whose calls' configuration-dependent
#: keyword arguments are always new).
MAX_REUSED = 64

#: ``fused(kernel, args, static_kwargs, bind) -> LaunchResult | None`` (``fused.py``)
Fused = Callable[[Any, tuple[Any, ...], Mapping[str, Any], Callable[..., Any]], Any]


class Entry:
    """The decision for one call key: configuration, launcher, results. Immutable in use,
    but for ``used``: set by every hit, cleared by the table's eviction sweep (``evict``)."""

    __slots__ = (
        "config",
        "fused",
        "hole_layouts",
        "launcher",
        "launcher_object",
        "repeat",
        "result",
        "siblings",
        "used",
        "where",
        "zero_kw",
        "zero_names",
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
        zero_names: tuple[str, ...] = (),
        where: tuple[str, str] = ("", "blocks="),
    ) -> None:
        self.config = config
        self.where = where  # the site's place, and the argument its grid is written in
        # The bound __call__ of a launcher object: calling it skips the type-slot lookup
        # of calling the instance (about 0.1 us per call).
        self.launcher_object = launcher
        defined = type(launcher).__dict__.get("__call__")
        self.launcher = launcher.__call__ if isinstance(defined, FunctionType) else launcher  # type: ignore[operator]
        self.result = result
        self.zero_pos = zero_pos
        self.zero_kw = zero_kw
        self.zeroing = bool(zero_pos or zero_kw)
        self.zero_names = zero_names  # the reset_to_zero= names the positions come from
        # The entries launching this decision for calls whose reset_to_zero= names others
        # (a computed one, read per call: call_reset.py), by those names.
        self.siblings: dict[tuple[str, ...], Entry] | None = None
        self.used = False
        # The repeat check (repeat_check.compile_repeat_check) of this entry's argument
        # layout: built at its first hit; no_repeat where the layout has none or the entry
        # was dropped.
        self.repeat: Callable[[Sequence[Any], Mapping[str, Any]], bool] | None = None
        # The C fused launch (runtime/fused.py) of this entry's layout, built with ``repeat``
        # where it can be had.
        self.fused: Fused | None = None
        # The dtype and layout of each tensor a `$` argument gave on the first launch.
        self.hole_layouts: tuple[Any, ...] | None = None

    def launch(
        self, args: Sequence[Any], static_kwargs: Mapping[str, Any], bind: Callable[[Config], Any]
    ) -> None:
        """Launch this entry's configuration for a call (``bind`` gives its holes, keyword
        arguments and grid): fill the holes, zero the ``reset_to_zero`` buffers, launch."""
        holes, dyn_kwargs, grid = bind(self.config)
        if holes:
            if not isinstance(holes, ReplaceArgs):
                self.check_holes(holes)
            args = fill_holes(args, holes)
        if self.zeroing:
            self.zero(args, static_kwargs, dyn_kwargs)
        try:
            self.launcher(grid, args, static_kwargs, dyn_kwargs, holes)
        except Exception as err:  # a grid past CUDA's limits: the driver's error names nothing
            within_limits(grid, self.where, err)
            raise

    def check_holes(self, holes: Sequence[Any]) -> None:
        """The tensors the `$` arguments give must have the dtype and layout they had when
        this key was decided (the record key holds them): one that follows something the
        key does not hold would launch a decision measured on other tensors."""
        layouts = tuple(readable_value(h, False, False) if is_tensor(h) else None for h in holes)
        if self.hole_layouts is None:
            self.hole_layouts = layouts
        elif layouts != self.hole_layouts:
            from tunedsl.errors import UsageError

            now, then = next(
                (n, t) for n, t in zip(layouts, self.hole_layouts, strict=True) if n != t
            )
            raise UsageError(
                f"{self.result.site}: an argument written with `$` gave {_layout(now)} here "
                f"but {_layout(then)} when this call's key was decided (same arguments, same "
                "key=), so that decision was measured on other tensors. What picks the tensor "
                "must be in the key: pass it to the kernel, or add it to key= (e.g. "
                "key=(n, str(buffer.dtype)))"
            )

    def zero(
        self, args: Sequence[Any], static_kwargs: Mapping[str, Any], dyn_kwargs: Mapping[str, Any]
    ) -> None:
        for i in self.zero_pos:
            zero(args[i])
        for name in self.zero_kw:
            zero(static_kwargs.get(name) if name in static_kwargs else dyn_kwargs.get(name))


def _layout(layout: Any) -> str:
    if not isinstance(layout, dict):
        return "no tensor"
    return f"a {layout.get('dtype')} tensor of stride pattern {layout.get('stride')}"


def zero(value: Any) -> None:
    """Zero a ``reset_to_zero`` argument: a tensor; a descriptor's tensor; each tensor of
    a tuple. An optional buffer passed as None is skipped (as Triton does); a tensor that
    requires grad is zeroed through ``detach()``, as the kernel writes it."""
    if value is None:
        return
    if isinstance(value, tuple):
        for member in value:
            zero(member)
        return
    if is_tensor_descriptor(value):
        value = value.base
    if is_tensor(value):
        (value.detach() if value.requires_grad else value).zero_()


def zero_unlaunched(call: Call, resolved: Resolved) -> None:
    """Zero the ``reset_to_zero`` buffers of a call whose grid is empty under every
    configuration (``source="empty"``): nothing is launched, and the buffers end as a
    launch of no program leaves them, zeroed (the histogram of no values, a sum of none),
    as every call that launches leaves them zeroed before the kernel adds into them."""
    reset = resolved.subject.settings.reset_to_zero
    if not reset:
        return
    holes, dyn_kwargs, _ = call.bind(resolved.decision.config)
    args = fill_holes(call.args, holes) if holes else call.args
    positional = resolved.subject.info.arg_names[: len(args)]
    for i, name in enumerate(positional):
        if name in reset:
            zero(args[i])
    for name in reset:
        if name not in positional:
            zero(call.static_kwargs.get(name, dyn_kwargs.get(name)))


def new_entry(
    shared: SharedLaunchers, call: Call, resolved: Resolved, where: tuple[str, str]
) -> Entry:
    """A new entry for a decision, with the launcher of its specialization and config;
    ``where``: the site's place and the argument its grid is written in."""
    decision = resolved.decision
    reset = resolved.subject.settings.reset_to_zero
    zero_pos: tuple[int, ...] = ()
    zero_kw: tuple[str, ...] = ()
    if reset:
        positional = resolved.subject.info.arg_names[: len(call.args)]
        zero_pos = tuple(i for i, n in enumerate(positional) if n in reset)
        zero_kw = tuple(n for n in reset if n not in positional)
    # A layout's plan keeps the launchers of each of its picks (``rule_plans``): the ones
    # ``shared`` gives for the same kernel, configuration and options, without its key.
    reuse = resolved.reuse
    if reuse is not None:
        try:
            launcher = reuse[0].get(reuse[1])
        except TypeError:  # a value that cannot be hashed: ``shared`` says
            launcher, reuse = None, None
        if launcher is not None:
            return Entry(
                decision.config, launcher, resolved.result, zero_pos, zero_kw, tuple(reset), where
            )
    # Tuned, recorded or ruled: one variant in every process, its binary stored once, loaded.
    stored = decision.source in ("tuned", "disk", "rule")
    launcher = shared.launcher(call.kernel, decision.config, decision.options, call.args,
                               call.static_kwargs, call.bind, stored, resolved.spec,
                               resolved.bound)  # fmt: skip
    if reuse is not None:
        if len(reuse[0]) >= MAX_REUSED:
            reuse[0].clear()
        reuse[0][reuse[1]] = launcher
    return Entry(decision.config, launcher, resolved.result, zero_pos, zero_kw, tuple(reset), where)


def within_limits(grid: Any, where: tuple[str, str], err: BaseException | None = None) -> None:
    """A ``UsageError`` naming the site, the dimension, its value and the fix, where the
    grid (as bound: an int or 1 to 3 ints; anything else is for the launch to refuse) is
    past what CUDA launches; ``err``: the launch's own error, kept as the cause."""
    from tunedsl.backends.triton import target_facts
    from tunedsl.errors import UsageError
    from tunedsl.model.grid_limits import check_grid, dims_of, over_limit

    dims = dims_of(grid)
    if dims is None or over_limit(dims) is None:
        return
    try:
        check_grid(dims, where[0], where[1], target_facts().backend)
    except UsageError as usage:
        raise usage from err


def no_repeat(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """The repeat check of an entry that has none: never a repeat."""
    return False


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


def store(
    table: dict[Any, Entry], by_digest: dict[str, Any], limit: int, call_key: Any, entry: Entry
) -> None:
    """Put ``entry`` in a site's ``table`` (the caller holds the site's lock). Bounded: at
    ``limit`` an eighth goes, the least recently used (a dropped key that comes back is
    decided again from its record, not re-tuned), and so does an eighth of ``by_digest``."""
    if len(table) >= limit:
        evict(table, max(1, len(table) // 8))
        if len(by_digest) >= limit:
            for old in list(by_digest)[: max(1, len(by_digest) // 8)]:
                del by_digest[old]
    table[call_key] = entry


def repeat_factory(
    info: Any, hole: object
) -> Callable[[Sequence[Any], Mapping[str, Any]], repeat_check.RepeatCheckCode | None] | None:
    """The builder of repeat-check code for a kernel's calls (``repeat_check.repeat_check_code``
    with the backend's tensor layout check), or None when tunedsl's repeat checks are off."""
    if not knobs.repeat_check():
        return None
    from tunedsl.backends.compat import layout_check

    with_align = info.jit  # as the call key (miss.keyed_by_alignment)

    def factory(
        args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> repeat_check.RepeatCheckCode | None:
        return repeat_check.repeat_check_code(
            args, info.constexpr_positions, hole, with_align, layout_check, kwargs
        )

    return factory


def drop_kernel(table: dict[Any, Entry], launchers: Any, kernel: Any, token: Any) -> None:
    """Drop the entries of ``kernel`` (its call keys start with ``token``) and its shared
    launchers (``launchers``: the site's ``SharedLaunchers`` or None)."""
    for key in [key for key in table if key[:1] == (token,)]:
        del table[key]
    if launchers is not None:
        launchers.forget(kernel)
