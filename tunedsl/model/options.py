"""Names the macro accepts: launch hints and tuning options (pure data, shared with the front end)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Space fields or macro keywords with these names are launch options, never kernel arguments.
HINT_NAMES: tuple[str, ...] = ("num_warps", "num_stages", "num_ctas", "maxnreg", "occupancy")

# Tuning options accepted as macro keywords and by autotune_launch.
OPTION_NAMES: tuple[str, ...] = (
    "restore_value",
    "reset_to_zero",
    "prune",
    "verify",
    "rtol",
    "atol",
    "pre_hook",
    "post_hook",
    "default",
    "mode",
    "effort",
    "name",
    "isolate",
    "timing",
    "capture",
    "search",
    "seed",
    "budget",
)

# Values of the measurement options (docs/runtime.md, docs/pytorch.md).
TIMING_MODES: tuple[str, ...] = ("auto", "graph", "events")
CAPTURE_MODES: tuple[str, ...] = ("raise", "default")

# Keywords with a structural meaning in the macro.
STRUCTURAL_NAMES: tuple[str, ...] = ("space", "blocks", "key")

MACRO_KEYWORDS: tuple[str, ...] = STRUCTURAL_NAMES + HINT_NAMES + OPTION_NAMES


def did_you_mean(name: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` that ``name`` most likely misspells (``num_warp``:
    ``num_warps``), or None when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return close[0] if close else None
