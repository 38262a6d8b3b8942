"""Precompile mode's hold on sites: while ``tunedsl.precompile.workload.precompile_mode`` is
active in a context (the thread, or the ``contextvars`` context, that entered it), a site's
miss there is handed to the mode (``miss_hook``), which compiles the key's configurations
instead of launching (or, with ``tune``, tunes it). The mode is read on a miss only, never on
a hit, and only the entering context's misses see it: another thread's calls of the same
sites tune and launch as usual, and a site is never built differently in the mode (one
built in a precompile thread serves the other threads as any site). The runtime never
imports precompile: precompile enters the mode here with its handler.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

#: The handler of a miss in precompile mode, in the context that entered it (else None):
#: called as ``hook(site, kernel, args, static_kwargs, bind, key, lazy)``.
_hook: ContextVar[Callable[..., Any] | None] = ContextVar("tunedsl_precompile_hook", default=None)


def miss_hook() -> Callable[..., Any] | None:
    """This context's precompile handler of a miss (None outside precompile mode)."""
    return _hook.get()


@contextlib.contextmanager
def handled_by(hook: Callable[..., Any] | None) -> Iterator[None]:
    """Within (this context only): misses go to ``hook`` (None: decided as usual, as a
    precompile tune's own call of the site is)."""
    token = _hook.set(hook)
    try:
        yield
    finally:
        _hook.reset(token)
