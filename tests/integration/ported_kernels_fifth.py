"""Kernels of test_ported_autotuners_fifth.py (imported by its DSL scripts)."""

import triton
import triton.language as tl


@triton.jit
def fill_upto(dst, N: tl.constexpr, TILE: tl.constexpr):
    """dst[i] = i for i < N; a tile wider than N cannot run (as a matmul's BLOCK_K > K)."""
    tl.static_assert(TILE <= N, "TILE must not exceed N")
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(dst + offs, offs.to(tl.float32), mask=offs < N)


@triton.jit
def add_one(dst, src, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) + 1, mask=offs < n)


@triton.jit
def add_one_inplace(x, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)
