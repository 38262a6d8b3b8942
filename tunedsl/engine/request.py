"""``TuneRequest``: what one tuning of one key is asked to do (engine layer).

Built by the runtime on a miss (``runtime/decide.py``) and read by the tuner, the measurers
and the isolated workers; it names the candidates (or a space too large to list) and carries
the site's ``Settings`` whole: the data-safety options, and how hard and how to search.
Nothing here imports torch or triton.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedsl.model.config import Config
from tunedsl.model.record import ConfigResult
from tunedsl.model.settings import Settings
from tunedsl.model.variant import Kernel, Variant


@dataclass
class TuneRequest:
    kernel: Kernel
    variants: list[Variant]  # candidates, in space order
    settings: Settings = field(default_factory=Settings)  # the site's, whole
    infeasible: dict[Config, str] = field(default_factory=dict)  # dropped before compiling
    previous: dict[Config, ConfigResult] = field(default_factory=dict)  # from a stale record
    # A space too large to list (``settings.space``): searched lazily, each configuration's
    # variant built by ``variant_for`` when proposed (``variants`` then holds none; ``keep``,
    # the site's prune= bound to this call, narrows each proposed batch). In-process only.
    variant_for: Callable[[Config], Variant] | None = None
    keep: Callable[[list[Config]], Sequence[Config]] | None = None
    # The key's digest (records, and the in-flight file of a tuning measured in-process);
    # "" where the tuning is not of a stored key (a check of a decision).
    key_digest: str = ""
    # What the in-flight files of processes that died tuning this key named, where read
    # before the tuning was spread over ranks (``runtime/distributed.py``: each rank's
    # share sees every rank's deaths); None: the measurer reads them itself.
    died: tuple[dict[str, Any], ...] | None = None
