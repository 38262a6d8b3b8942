"""A ``reset_to_zero=`` read on every call (runtime layer).

A site's options are read when a key is decided and kept with the decision for its later
calls (docs/runtime.md, "Modes"). ``reset_to_zero=`` is the one whose work is done on every
call: it names the buffers zeroed before each launch, hits included. Kept with the decision,
a computed one (``reset_to_zero=[] if self.accumulate else ["hist"]``: two modules sharing
one site and one key) zeroed on every call what the key's first call named, so a module
accumulating into its buffer over calls had it zeroed each time, and one counting afresh
added into the last call's counts: wrong results, silently.

So a site whose ``reset_to_zero=`` is computed (a macro's that is not literal, or
``autotune_launch`` calls that pass different ones) reads it on every call, and a hit
launches the key's decision through an entry that zeroes what this call names: the
decided entry itself where the names agree, else a sibling made once per set of names,
sharing its launcher and result. Such a site takes no repeat check or fused launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.runtime.entry import Entry


def for_call(
    entry: Entry, kernel: Any, args: Sequence[Any], lazy: Callable[[], Any] | None, label: str
) -> Entry:
    """The entry that launches ``entry``'s decision zeroing what this call's
    ``reset_to_zero=`` (read from ``lazy``, the call's thunk) names."""
    names = names_of(lazy, label) if lazy is not None else ()
    if names == entry.zero_names:
        return entry
    siblings = entry.siblings
    found = siblings.get(names) if siblings is not None else None
    if found is None:
        found = _sibling(entry, kernel, len(args), names, label)
        entry.siblings = {**(siblings or {}), names: found}  # a new dict: readers see either
    return found


def names_of(lazy: Callable[[], Any], label: str) -> tuple[str, ...]:
    """The ``reset_to_zero=`` names the call's thunk gives (none where it gives none)."""
    options = lazy()[2] or {}
    value = options.get("reset_to_zero")
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(
        f"{label}: reset_to_zero= must be a list of kernel parameter names (strings), not {value!r}"
    )


def _sibling(entry: Entry, kernel: Any, n_args: int, names: tuple[str, ...], label: str) -> Entry:
    """An entry launching ``entry``'s decision that zeroes ``names`` instead of its own."""
    from tunedsl.backends import triton as bt

    params = bt.kernel_info(kernel).arg_names
    unknown = [n for n in names if n not in params]
    if unknown:
        raise UsageError(
            f"{label}: reset_to_zero= names {unknown[0]!r}, which is not a parameter of "
            f"{getattr(kernel, '__name__', kernel)}({', '.join(params)})"
        )
    positional = params[:n_args]
    zero_pos = tuple(i for i, n in enumerate(positional) if n in names)
    zero_kw = tuple(n for n in names if n not in positional)
    sibling = Entry(
        entry.config, entry.launcher_object, entry.result, zero_pos, zero_kw, names, entry.where
    )
    sibling.hole_layouts = entry.hole_layouts
    return sibling
