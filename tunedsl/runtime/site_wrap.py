"""Precompile mode's hold on sites: while ``tunedsl.precompile.workload.precompile_mode`` is
active, ``wrapper`` is set, and a site built then (a macro's, at its module's load, or an
``autotune_launch`` call's, at its first call) is wrapped by it to compile its
configurations instead of launching. A site built before the block was entered (its module
imported outside it) is not wrapped: a new key of it there would tune and launch while the
session reported nothing, so its miss is an error naming the fix (``check``). The runtime
never imports precompile: precompile sets ``wrapper``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from tunedsl.errors import UsageError

#: Set by ``precompile_mode`` while it is active (``PrecompileSite``).
wrapper: Callable[[Any], Any] | None = None
_wrapped: weakref.WeakSet[Any] = weakref.WeakSet()


def wrap(site: Any) -> Any:
    """``site`` as a site built now is called: wrapped while precompile mode is active."""
    outer = wrapper
    if outer is None:
        return site
    _wrapped.add(site)
    return outer(site)


def check(site: Any) -> None:
    """A new key of ``site``: an error while precompile mode is active if ``site`` was built
    before it (its calls would tune and launch instead of compiling)."""
    if wrapper is None or site in _wrapped:
        return
    raise UsageError(
        f"{site.label}: this site was built before precompile_mode() was entered (its "
        "module was imported before the block), so its calls there would tune and launch "
        "instead of compiling: import the module inside the block "
        "(`with precompile_mode(...): module = import_script(path)`); call "
        "tunedsl.precompile.precompile(paths) in a process that has not imported it yet"
    )
