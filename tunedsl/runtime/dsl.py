"""What expanded DSL code calls: ``make_site`` and ``HOLE`` (see docs/ARCHITECTURE.md).

The expander hoists one ``make_site(...)`` per macro call into the module prologue and
turns the macro call into ``site(kernel, args, static_kwargs, bind, key, lazy)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunedsl.backends import torch_compile
from tunedsl.model import identity
from tunedsl.model.hole import HOLE
from tunedsl.runtime import redefined
from tunedsl.runtime.site import Site

__all__ = ["HOLE", "Site", "make_site"]

torch_compile.install(Site)  # Dynamo traces a site's call as one custom operator


def make_site(
    *,
    filename: str,
    line: int,
    col: int,
    end_line: int | None = None,
    end_col: int | None = None,
    kernel_text: str = "",
    space: Any = None,
    static_hints: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    placeholders: Sequence[tuple[str, int, int]] = (),
    has_key: bool = False,
    scope: str | None = None,
    ordinal: int = 0,
    launch: str | None = None,
    space_per_call: bool = False,
    verify_per_call: bool = False,
) -> Any:
    """Build the site of one macro call (once per module load). ``scope`` and ``ordinal``
    name the site (``model/identity.py``); ``launch`` is the launch's per-configuration text,
    in its records' digest; ``space_per_call``: ``space=`` may give another space on each
    call, so each call reads it and is keyed by it (``call_values.py``); ``verify_per_call``:
    ``verify=`` may give another check on each call, so each call reads it and a hit its
    decision has not passed goes the miss path (``verified.py``). Expansions older than them
    omit them."""
    if scope is not None:
        identity.declare(filename, line, col, scope, ordinal)
    site = Site(
        filename=filename,
        line=line,
        col=col,
        kernel_text=kernel_text,
        space=space,
        static_hints=dict(static_hints or {}),
        options=dict(options or {}),
        placeholders=tuple(placeholders),
        has_key=has_key,
        end_line=end_line,
        end_col=end_col,
        launch=launch,
    )
    if space_per_call:
        site.read_per_call("space")
    if verify_per_call:
        site.read_per_call("verify")
    redefined.track(site)
    return site  # in precompile mode its misses there compile instead (``site_wrap.py``)
