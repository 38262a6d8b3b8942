"""Small real Triton kernels of the second set of ported autotuner tests
(test_ported_autotuners_more.py)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_one_both(x, y, N, BLOCK: tl.constexpr):
    """x += 1 and y += 2, in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(x + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)
    tl.store(y + offs, tl.load(y + offs, mask=mask) + 2, mask=mask)


@triton.jit
def total_two(x, out_a, out_b, N, BLOCK: tl.constexpr):
    """out_a += sum(x) and out_b += 2 * sum(x), by atomics (accumulators)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    part = tl.sum(tl.load(x + offs, mask=offs < N, other=0.0), axis=0)
    tl.atomic_add(out_a, part)
    tl.atomic_add(out_b, 2 * part)


@triton.jit
def copy(dst, src, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def copy_rows(dst, src, M, N, stride_m, stride_n, BLOCK: tl.constexpr):
    """dst (contiguous M x N) = src (any strides), one row of BLOCK >= N columns a program."""
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    x = tl.load(src + row * stride_m + cols * stride_n, mask=cols < N)
    tl.store(dst + row * N + cols, x, mask=cols < N)


@triton.jit
def to_int(x, out, N, ROUND: tl.constexpr, BLOCK: tl.constexpr):
    """out = x as int32: truncated, or rounded to nearest when ROUND."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < N)
    if ROUND:
        v = tl.floor(v + 0.5)
    tl.store(out + offs, v.to(tl.int32), mask=offs < N)


@triton.jit(do_not_specialize=["N"])
def copy_any_n(dst, src, N, BLOCK: tl.constexpr):
    """``copy``, with N never specialized by Triton (one binary for every N)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def sum_pair(dst, srcs, N, BLOCK: tl.constexpr):
    """dst = srcs[0] + srcs[1] over the first N elements (``srcs``: a tuple of two tensors)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(dst + offs, tl.load(srcs[0] + offs, mask=m) + tl.load(srcs[1] + offs, mask=m), mask=m)


@triton.jit
def copy_bump(dst, src, N, BUMP: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src; with BUMP, src += 1 as well (a wrong configuration that writes its input)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < N)
    tl.store(dst + offs, x, mask=offs < N)
    if BUMP:
        tl.store(src + offs, x + 1, mask=offs < N)
