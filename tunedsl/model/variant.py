"""``Variant``: one configuration made concrete for one call (what to compile and launch),
and ``Kernel``: what a site launches (model layer, pure Python)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tunedsl.model.config import Config


class Kernel(Protocol):
    """What a site launches: a ``@triton.jit`` function (or Triton's interpreter's, or a
    wrapper such as ``triton.autotune``'s), launched as ``kernel[grid](*args, **kwargs)``.
    The model never looks inside; ``backends/`` reads its facts."""

    def __getitem__(self, grid: Any) -> Callable[..., object]: ...


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
