"""Replay fixture (DSL): tutorial 02's kernel parameter named like a launch hint
(``num_stages: tl.constexpr``), which a launch's ``num_stages=`` sets together with
Triton's compile option of that name."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, workload
from tunedsl.precompile.workload import precompile_device


@triton.jit
def staged_copy(x, y, n, TILE: tl.constexpr, num_stages: tl.constexpr):
    for start in tl.range(0, n, TILE, num_stages=num_stages):
        offs = start + tl.arange(0, TILE)
        tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


def copy(x, y):
    return autotune(space=dict(stages=[1, 2]), blocks=1,
                    staged_copy(x, y, x.numel(), TILE=64, num_stages=$stages))


@workload
def warm():
    x = torch.empty(300, device=precompile_device())
    copy(x, torch.empty_like(x))


if __name__ == "__main__":
    x = torch.randn(300)
    y = torch.empty(300)
    print(copy(x, y).source)
    torch.testing.assert_close(y, x)
