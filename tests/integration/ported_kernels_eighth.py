"""Kernels of test_ported_autotuners_eighth.py (imported by its DSL script)."""

import triton
import triton.language as tl


@triton.jit
def copy_tiles(dst, src, N, BX: tl.constexpr, BY: tl.constexpr):
    """dst = src, BX * BY elements a program; compiles only where BX * BY <= 256 (the
    restriction a space must apply, as Kernel Tuner's thread-count limit)."""
    tl.static_assert(BX * BY <= 256)
    offs = tl.program_id(0) * (BX * BY) + tl.arange(0, BX * BY)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def copy_mixed(
    dst,
    src,
    N,
    INT: tl.constexpr,
    F: tl.constexpr,
    NAME: tl.constexpr,
    FLAG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """dst = src under a configuration of an int, a float, a string and a bool; compiles only
    where ``INT + F > 3`` and ``FLAG`` is False (Kernel Tuner's mixed-type restrictions)."""
    tl.static_assert(INT + F > 3)
    tl.static_assert(not FLAG)
    tl.static_assert(NAME == "Alpha" or NAME == "Bravo" or NAME == "Charlie")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def add_one_strided(x, N, stride, BLOCK: tl.constexpr):
    """x[i * stride] += 1 for i < N: in place, through the view's stride."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ptrs = x + offs * stride
    tl.store(ptrs, tl.load(ptrs, mask=offs < N) + 1, mask=offs < N)


@triton.jit
def add_bias_rows(x, b, out, M, N, sbm, sbn, BM: tl.constexpr, BN: tl.constexpr):
    """out = x + b over an (M, N) grid of (BM, BN) tiles, ``b`` read through its strides
    (``(1, 0)`` for a column expanded across the rows)."""
    r = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    c = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    mask = (r < M) & (c < N)
    v = tl.load(x + r * N + c, mask=mask) + tl.load(b + r * sbm + c * sbn, mask=mask)
    tl.store(out + r * N + c, v, mask=mask)


@triton.jit
def copy_bump(dst, src, N, BUMP: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src + BUMP: wrong wherever BUMP is not 0."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N) + BUMP, mask=offs < N)
