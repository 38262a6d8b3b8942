"""``Variant``: one configuration made concrete for one call (what to compile and launch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunedsl.model.config import Config


@dataclass(frozen=True)
class Variant:
    """A configuration bound to a call: positional args (holes filled), keyword args
    (static and configuration-dependent), the grid, and the Triton launch options derived
    from the hints (occupancy already translated for the device)."""

    config: Config
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grid: tuple[int, ...]
    options: dict[str, Any]
