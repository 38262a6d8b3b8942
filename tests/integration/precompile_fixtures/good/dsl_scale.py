"""Precompile fixture written in the DSL: one autotuned site and a workload."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.precompile.workload import precompile_device


@triton.jit
def scale_kernel(x, y, n, alpha, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m) * alpha, mask=m)


def scale(x, y, alpha):
    n = y.numel()
    return autotune(
        space=dict(tile=[64, 128], num_warps=[1, 2]),
        blocks=cdiv(n, $tile),
        scale_kernel(x, y, n, alpha, TILE=$tile),
    )


@workload
def warm():
    x = torch.ones(300, device=precompile_device())
    scale(x, torch.empty_like(x), 2.0)
