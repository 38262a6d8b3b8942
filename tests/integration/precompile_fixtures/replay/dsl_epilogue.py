"""Replay fixture (DSL): tutorial 03's epilogue, a Triton function passed as a
``tl.constexpr`` (``ACTIVATION=leaky_relu``), which a record holds by name and digest."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.precompile.workload import precompile_device


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.jit
def scale_kernel(x, out, n, BLOCK: tl.constexpr, ACTIVATION: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(out + offs, ACTIVATION(v * 2.0), mask=offs < n)


def scale(x, out):
    return autotune(space=dict(BLOCK=[64, 128]), blocks=cdiv(x.numel(), $BLOCK),
                    scale_kernel(x, out, x.numel(), BLOCK=$BLOCK, ACTIVATION=leaky_relu))


@workload
def warm():
    x = torch.empty(300, device=precompile_device())
    scale(x, torch.empty_like(x))


if __name__ == "__main__":
    x = torch.randn(300)
    out = torch.empty(300)
    print(scale(x, out).source)
    torch.testing.assert_close(out, torch.nn.functional.leaky_relu(x * 2.0, 0.01))
