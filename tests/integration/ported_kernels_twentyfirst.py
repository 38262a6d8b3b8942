"""Kernels of the twenty-first batch of ported autotuner tests."""

import triton
import triton.language as tl


@triton.jit
def atomic_sum(x, out, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out, tl.sum(tl.load(x + offs, mask=offs < N, other=0.0), axis=0))


@triton.jit
def copy(dst, src, N, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)
