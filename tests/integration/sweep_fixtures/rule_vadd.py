"""Rules fixture: one workload over sizes. ``RULE_TILES`` narrows the space, as a sweep that
timed a subset of the configurations on some sizes would have."""

import os

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload

TILES = [int(t) for t in os.environ.get("RULE_TILES", "32,64,128,256").split(",")]


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@workload
def add(n=256):
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    autotune_launch(
        vadd,
        space={"tile": TILES},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name="rule-vadd",
    )
    assert torch.equal(c, a + b)
