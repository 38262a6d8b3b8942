"""Launch hints computed at the call (runtime layer).

A macro's static launch hint that is not a literal (``num_warps=self.nw``) comes from the
call's thunk. A site's settings are read when a key is decided (docs/runtime.md, "Modes"),
but a hint is part of the decision itself: the launcher is built with it and the record's
digest holds it, so a record made with ``num_warps=4`` never decides a call giving 8. Kept
with the key's decision in memory, the key's first call's hint launched every later call
of the key, whatever value that call gave, silently.

So a site whose thunk gives hints reads them on every call, and their values join the
call key: another value is another decision, tuned or found in its own record, as in a new
process. Such a site takes no repeat check or fused launch, which do not read the thunk.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


def joined(
    call_key: tuple[Any, ...], lazy: Callable[[], Any] | None, computed: bool = True
) -> tuple[Any, ...]:
    """``call_key`` with the values of the launch hints this call's thunk gives, where the
    site reads them per call (``computed``); else ``call_key`` itself."""
    if not computed:
        return call_key
    hints = (lazy()[1] if lazy is not None else None) or {}
    return (*call_key, ("hints", tuple((k, _hashable(v)) for k, v in sorted(hints.items()))))


def _hashable(value: Any) -> Hashable:
    """``value`` as a key part: a value the settings refuse (a list) by its text; the
    call that misses on it is told why (``model/settings.py``)."""
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return value  # type: ignore[no-any-return]
