"""``TuneRequest``: what one tuning of one key is asked to do (engine layer).

Built by the runtime on a miss (``runtime/decide.py``) and read by the tuner, the measurers
and the isolated workers; it names the candidates (or a space too large to list), the
data-safety options, and how hard and how to search. Nothing here imports torch or triton.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tunedsl.model.config import Config
from tunedsl.model.record import ConfigResult
from tunedsl.model.variant import Kernel, Variant

if TYPE_CHECKING:
    from tunedsl.engine.seams import SearchSpace


@dataclass
class TuneRequest:
    kernel: Kernel
    variants: list[Variant]  # candidates, in space order
    infeasible: dict[Config, str] = field(default_factory=dict)  # dropped before compiling
    previous: dict[Config, ConfigResult] = field(default_factory=dict)  # from a stale record
    restore_value: Sequence[str] = ()
    reset_to_zero: Sequence[str] = ()
    verify: Any = None  # None/False, True, [names], or callable(inputs) -> {name: expected}
    rtol: float = 1e-3
    atol: float = 1e-3
    pre_hook: Callable[[dict[str, Any]], Any] | None = None
    post_hook: Callable[..., Any] | None = None  # post_hook(args, exception=err or None)
    effort: str = "default"
    isolate: bool = False  # measure in a worker process (backends/isolated.py)
    timing: str = "auto"  # timer mode on a GPU: "auto", "graph" or "events"
    search: str = "auto"  # strategy name (engine/search)
    # A space too large to list: searched lazily, each configuration's variant built by
    # ``variant_for`` when proposed (``variants`` then holds none; ``prune`` narrows each
    # proposed batch). In-process measurement only.
    space: SearchSpace | None = None
    variant_for: Callable[[Config], Variant] | None = None
    prune: Callable[[list[Config]], Sequence[Config]] | None = None
    seed: int = 0
    budget_s: float | None = None  # None: the effort's budget (none for a small exhaustive)
