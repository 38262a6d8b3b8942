"""Small real Triton kernels of the ported autotuner tests (test_ported_autotuners.py)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def copy_2d(dst, src, stride_m: tl.constexpr, M, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    ptrs = offs_m[:, None] * stride_m + offs_n[None, :]
    mask = offs_m[:, None] < M
    tl.store(dst + ptrs, tl.load(src + ptrs, mask=mask), mask=mask)


@triton.jit
def add_one(src, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(src + offs, tl.load(src + offs, mask=offs < N) + 1, mask=offs < N)


@triton.jit
def write_one(src, dst, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    if src is not None:
        tl.store(src + offs, tl.full([BLOCK], 1, dtype=src.dtype.element_ty), mask=mask)
    else:
        tl.store(dst + offs, tl.full([BLOCK], 1, dtype=dst.dtype.element_ty), mask=mask)


@triton.jit
def total(x, out, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out, tl.sum(tl.load(x + offs, mask=offs < N, other=0.0), axis=0))


@triton.jit
def staged_copy(src, dst, N, N_STAGES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for _ in tl.range(tl.cdiv(N, BLOCK), num_stages=N_STAGES):
        tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)
        offs += BLOCK


@triton.jit
def copy_small_only(dst, src, N, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def convert(dst, src, N, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N).to(DTYPE), mask=offs < N)


@triton.jit
def add_bias(x, out, N, BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < N) + BIAS, mask=offs < N)


@triton.jit
def scale_bias(x, N, BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < N) * 2 + BIAS, mask=offs < N)


@triton.jit
def maybe_copy(dst, src, N, WRITE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if WRITE:
        tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)
