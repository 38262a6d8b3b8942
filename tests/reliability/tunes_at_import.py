"""A kernel module whose top-level code tunes its kernel with ``isolate=True`` (a warm-up at
import). The worker imports this module to get the kernel, which runs that tune again there."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.jit
def double(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


N = 100
x = torch.randn(N)
y = torch.empty_like(x)
RESULT = autotune_launch(
    double,
    space={"tile": [32, 64]},
    grid=lambda cfg: (cdiv(N, cfg.tile),),
    args=(x, y, N),
    kwargs=lambda cfg: {"TILE": cfg.tile},
    isolate=True,
)
