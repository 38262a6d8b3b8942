"""Small real Triton kernels for the reliability tests (run by Triton's interpreter)."""

from __future__ import annotations

import os
import sys

import triton
import triton.language as tl

# The shared vadd lives in tests/shared_kernels.py; subprocess scripts put only this
# directory on sys.path, so its parent is added here.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shared_kernels import vadd

__all__ = ["copy_capped", "copy_staged", "vadd", "vadd_flaky"]


@triton.jit
def vadd_flaky(a, b, c, n, TILE: tl.constexpr, MODE: tl.constexpr):
    """MODE 0: correct. MODE 1: fails to build (a static assertion). MODE 2: wrong result
    (adds 1). MODE 3: fails at run time (a non-power-of-two arange is rejected when the
    kernel body runs)."""
    tl.static_assert(MODE != 1, "MODE 1 is rejected at compile time on purpose")
    if MODE == 3:
        offs = tl.program_id(0) * TILE + tl.arange(0, 3)
    else:
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    bias = 1.0 if MODE == 2 else 0.0
    tl.store(
        c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask) + bias, mask=mask
    )


@triton.jit
def copy_capped(x, y, n, TILE: tl.constexpr):
    """Fails to build for TILE above 32, by an assertion with no message of its own."""
    tl.static_assert(TILE <= 32)
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def copy_staged(x, y, n, TILE: tl.constexpr, num_stages: tl.constexpr):
    """Tutorial 02's pattern: a parameter named like the launch hint, for ``tl.range``."""
    for start in tl.range(0, n, TILE, num_stages=num_stages):
        offs = start + tl.arange(0, TILE)
        tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
