"""Kernels whose world was redefined: a notebook cell that runs again a ``@triton.jit``
helper a kernel calls, or assigns a ``tl.constexpr`` (or plain) global it reads, changes
the kernel without making a new kernel object. A site keeps its decisions by kernel object
and a kernel's identity is worked out once per object (both on the hot path's side), so
``forget_redefined`` (run by the IPython extension before each cell) works each tracked
kernel's identity out again and, where it changed, makes its sites forget what they decided
and built for it: their next call is decided for the kernel as it is now. So does a site
whose computed settings read a global a cell rebound since (``settings_reads.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Container
from typing import Any

from tunedsl.backends import triton as bt
from tunedsl.runtime import settings_reads

__all__ = ["forget_redefined", "track"]

_sites: weakref.WeakSet[Any] = weakref.WeakSet()


def track(site: Any) -> Any:
    """Watch ``site`` (a ``Site``) for kernels redefined under it; returns it."""
    _sites.add(site)
    return site


def forget_redefined(bound: Container[str] = ()) -> int:
    """Forget the decisions of every tracked site whose kernel's identity changed since it
    was worked out (a helper it calls or a global it reads redefined), or whose computed
    settings read a global bound to another value since or named in ``bound`` (what the
    cell about to run binds); returns how many sites forgot. Costs one identity per kernel,
    nothing for a process with no site."""
    sites = list(_sites)
    if not sites:
        return 0
    changed: dict[int, bool] = {}
    stale = []
    for site in sites:
        for kernel in site.kernels():
            if kernel is None:
                continue
            if id(kernel) not in changed:
                changed[id(kernel)] = bt.kernel_info_changed(kernel)
            if changed[id(kernel)]:
                stale.append(site)
                break
        else:
            if settings_reads.changed(site, bound):
                stale.append(site)
    if any(changed.values()):
        bt.forget_kernel_infos()
    for site in stale:
        site.clear()
        settings_reads.forget(site)
    return len(stale)
