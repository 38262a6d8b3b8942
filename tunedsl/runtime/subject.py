"""``Subject``: what one decision is about (runtime layer, data only).

Built on a miss (``runtime/miss.py``) and handed to each step of ``runtime/decide.py``, to
the legacy-record lookup, to shipped rules and to ``runtime/distributed.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo
    from tunedsl.model.hints import TargetFacts
    from tunedsl.model.settings import Settings
    from tunedsl.model.variant import Kernel


@dataclass(slots=True)  # not frozen: made on every miss, where a frozen init costs twice
class Subject:
    """What one decision is about: the site's id, the kernel and its facts, the settings in
    force, the readable record key, the process context and the record's digest."""

    site_id: str
    kernel: Kernel
    info: KernelInfo
    settings: Settings
    readable: dict[str, Any]
    context: dict[str, Any]
    digest: str
    rule_digest: str = ""  # the name of the rule that would decide it ("": not worked out)
    target: TargetFacts | None = None  # the device's launch-option facts (None: ask)
