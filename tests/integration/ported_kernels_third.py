"""Small real Triton kernels of the third set of ported autotuner tests
(test_ported_autotuners_third.py)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def copy_plus(dst, src, N, BLOCK: tl.constexpr, bias=None):
    """dst = src (+ bias when one is given)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < N)
    if bias is not None:
        x += tl.load(bias + offs, mask=offs < N)
    tl.store(dst + offs, x, mask=offs < N)


@triton.jit
def copy_mode(dst, src, N, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src; ``MODE`` (any constexpr) only makes each value another compiled kernel."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)
