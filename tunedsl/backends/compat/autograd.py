"""Autograd's private version counter (checked on PyTorch 2.11, 2.12 and 2.13): tuning puts
a caller's tensor back as the caller had it, a write autograd need not see."""

from __future__ import annotations

import contextlib
from typing import Any


def keeping_version(tensor: Any) -> contextlib.AbstractContextManager[Any]:
    """A context in which writes to ``tensor`` leave its autograd version counter as it was
    (``torch.autograd._unsafe_preserve_version_counter``): a kernel's own writes never move
    it, so a tensor saved for a backward pass stays usable after tuning restored it. An
    inference tensor has no counter; a PyTorch without the helper bumps it as before."""
    import torch

    keep = getattr(torch.autograd, "_unsafe_preserve_version_counter", None)
    if keep is None or tensor.is_inference():
        return contextlib.nullcontext()
    return keep(tensor)  # type: ignore[no-any-return]
