"""Replay fixture (DSL): a script whose own work is not under ``if __name__ == "__main__":``,
so importing it runs that work (two keys); each import appends a line to REPLAY_MARKER."""

import os

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv

with open(os.environ["REPLAY_MARKER"], "a") as marker:
    marker.write("imported\n")


@triton.jit
def double_kernel(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def double(x, y):
    n = y.numel()
    return autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                    double_kernel(x, y, n, TILE=$tile))


for size in (100, 300):
    x = torch.randn(size)
    y = torch.empty_like(x)
    print(double(x, y).source)
