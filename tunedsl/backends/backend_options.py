"""Launch keywords that only one of Triton's backends takes (AMD's ``waves_per_eu``,
NVIDIA's ``maxnreg``), named where a launch compiles for the other: the backends layer,
before Triton's binder sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunedsl.backends import compat
from tunedsl.errors import UsageError


def check_backend_options(
    jit_fn: Any, kwargs: Mapping[str, Any], options: Mapping[str, Any], target: Any = None
) -> None:
    """A launch keyword that only another of Triton's backends takes (AMD's ``waves_per_eu``
    compiled for ``cuda:90``, NVIDIA's ``maxnreg`` for ``hip:gfx942``) is a ``UsageError``
    naming its backend and the fix; Triton's own ``KeyError`` names neither. ``target``:
    the launch's (None: the current device's, asked only where a keyword is such an
    option)."""
    from tunedsl.model.options import backend_option_note

    by_backend = compat.backend_option_names()
    if len(by_backend) < 2:
        return
    every = frozenset.intersection(*by_backend.values())
    some = frozenset().union(*by_backend.values()) - every
    params = {name for name, _ in compat.param_specs(jit_fn)}
    foreign = [n for n in [*kwargs, *options] if n in some and n not in params]
    if not foreign:
        return
    target = compat.current_target() if target is None else target
    own = by_backend.get(target.backend)
    if own is None:  # a backend whose options are not known: Triton's own check decides
        return
    for name in foreign:
        if name not in own:
            owner = next(b for b, names in by_backend.items() if name in names)
            note = backend_option_note(name, owner)
            raise UsageError(f"{note}; this launch compiles for {target.backend}:{target.arch}")
