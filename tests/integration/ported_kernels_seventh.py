"""Kernels of test_ported_autotuners_seventh.py (imported by its DSL scripts)."""

import triton
import triton.language as tl


@triton.jit
def add(a, b, out, n, TILE: tl.constexpr):
    """out = a + b; called with ``out`` as ``a`` too (an in-place add, as Inductor reinplaces)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def fill_i(x, i: tl.int32, n, TILE: tl.constexpr):
    """x[:] = i, with ``i`` annotated ``tl.int32`` (Triton still specializes it: 1, %16)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.zeros([TILE], dtype=tl.int32) + i, mask=offs < n)


@triton.jit
def add_2d(a, b, out, rows, cols, BX: tl.constexpr, BY: tl.constexpr):
    """out = a + b over a (rows, cols) grid of (BX, BY) tiles."""
    r = tl.program_id(0) * BX + tl.arange(0, BX)[:, None]
    c = tl.program_id(1) * BY + tl.arange(0, BY)[None, :]
    mask = (r < rows) & (c < cols)
    offs = r * cols + c
    tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def add_to(out, a, b, n, TILE: tl.constexpr):
    """out = a + b, the output first (Inductor's fault with a clone depends on the order)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def double_strided(src, dst, src_row_stride, dst_row_stride, XB: tl.constexpr, YB: tl.constexpr):
    """Inductor's double_strided_kernel: dst = 2 * src over rows of a given stride (a slice of a
    wider tensor, at an offset)."""
    cols = tl.program_id(0) * XB + tl.arange(0, XB)
    rows = tl.program_id(1) * YB + tl.arange(0, YB)
    values = tl.load(src + rows[:, None] * src_row_stride + cols[None, :])
    tl.store(dst + rows[:, None] * dst_row_stride + cols[None, :], values * 2.0)


@triton.jit(do_not_specialize=["i"])
def fill_i_nospec(x, i, n, TILE: tl.constexpr):
    """fill_i, with ``i`` left unspecialized by Triton (one binary for all its values)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.zeros([TILE], dtype=tl.int32) + i, mask=offs < n)


@triton.jit(do_not_specialize_on_alignment=["i"])
def fill_i_nospec_on_alignment(x, i, n, TILE: tl.constexpr):
    """fill_i, with ``i`` specialized for 1 only (not for divisibility by 16)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.zeros([TILE], dtype=tl.int32) + i, mask=offs < n)
