"""A site's miss during CUDA-graph capture (backends layer): never tune inside a capture.

Tuning synchronizes the device and reads events, which a capturing stream forbids (the
capture is invalidated: ``cudaErrorStreamCaptureInvalidated``). A key decided before the
capture (in memory or by a stored record) launches normally, and the launch is captured
like any other. A key with no decision, met while ``torch.cuda.is_current_stream_capturing()``:

- ``capture="raise"`` (the default): ``UsageError`` naming the site, the key and the fixes
  (run the model once before capturing; ``tunedsl precompile --tune``);
- ``capture="default"``: launch the site's ``default=`` (else the space's first)
  configuration; this process then keeps it for that key (``source="default"``), as
  ``mode="cached"`` would.

Only the miss path calls :func:`decide_on_miss`: the hot path never checks for capture.
``capturing()`` never imports torch: when torch or CUDA was never initialized in this
process, nothing can be capturing.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tunedsl.errors import UsageError


def capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False without torch/CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        if not torch.cuda.is_initialized():
            return False
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:  # a CPU-only build, or no driver
        return False


def decide_on_miss(
    settings: Any,
    label: str,
    readable: Mapping[str, Any],
    decide: Callable[[Any], Any],
) -> Any:
    """``decide(settings)``, except that under capture it never tunes (see the module doc)."""
    if settings.mode != "on" or not capturing():
        return decide(settings)
    decision = decide(dataclasses.replace(settings, mode="cached"))  # a record, or the default
    if decision.source == "default" and settings.capture == "raise":
        from tunedsl.model.keys import json_safe

        raise UsageError(
            f"{label}: a new key met during CUDA-graph capture, key {json_safe(dict(readable))}: "
            "tuning cannot run inside a capture (it synchronizes the device). Fix: call the "
            "model once with these shapes before capturing (warm-up), or tune ahead with "
            '`tunedsl precompile --tune`; or pass capture="default" to launch the site\'s '
            "default configuration for keys not yet decided"
        )
    return decision
