"""Replay fixture (DSL): running it tunes one site and writes a record; importing it does not."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


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


if __name__ == "__main__":
    x = torch.arange(300, dtype=torch.float32)
    y = torch.empty_like(x)
    print(scale(x, y, 2.0).source)
    assert torch.equal(y, 2 * x)
