"""Small real Triton kernels shared by the runtime integration tests."""

from __future__ import annotations

import os
import sys

import triton
import triton.language as tl

# The shared vadd lives in tests/shared_kernels.py; subprocess scripts put only this
# directory on sys.path, so its parent is added here.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shared_kernels import vadd, vadd_even

__all__ = [
    "add_one_inplace",
    "add_strided",
    "fill_value",
    "pair_add",
    "scale_inplace",
    "sum_atomic",
    "vadd",
    "vadd_even",
    "vadd_wrong_for_big_tiles",
]


@triton.jit
def scale_inplace(x, n, TILE: tl.constexpr):
    """x *= 2 in place: repeating it corrupts x unless x is restored between repetitions."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


@triton.jit
def sum_atomic(x, out, n, TILE: tl.constexpr):
    """out[0] += sum(x): accumulates, so out must be zeroed before every launch."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.atomic_add(out, tl.sum(tl.load(x + offs, mask=mask, other=0.0), axis=0))


@triton.jit
def vadd_wrong_for_big_tiles(a, b, c, n, TILE: tl.constexpr):
    """Correct for TILE <= 128; for bigger tiles it adds 1 on purpose (verify must reject)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    bias = 1.0 if TILE > 128 else 0.0
    tl.store(
        c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask) + bias, mask=mask
    )


@triton.jit
def add_one_inplace(x, n, TILE: tl.constexpr):
    """x += 1 in place."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)


@triton.jit
def add_strided(x, b, out, n, stride_b, TILE: tl.constexpr):
    """out = x + b, b read with its own stride (0 for a broadcast ``expand``)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    bias = tl.load(b + offs * stride_b, mask=mask)
    tl.store(out + offs, tl.load(x + offs, mask=mask) + bias, mask=mask)


@triton.jit
def pair_add(pair, out, n, TILE: tl.constexpr):
    """out = pair[0] + pair[1]: a tuple argument, whose elements Triton specializes one by one."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(
        out + offs,
        tl.load(pair[0] + offs, mask=mask) + tl.load(pair[1] + offs, mask=mask),
        mask=mask,
    )


@triton.jit
def fill_value(out, n, value, TILE: tl.constexpr):
    """out[:n] = value; a `tl.constexpr(...)` passed for `value` is compiled into the kernel."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out + offs, tl.full((TILE,), value, tl.float32), mask=offs < n)
