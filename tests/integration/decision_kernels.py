"""Small real Triton kernels for the issue-9 decision tests (tests/integration/test_runtime_decisions.py)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def rowsum(x, out, n, BLOCK: tl.constexpr):
    """out[0] = sum(x[:n]) in one program: right only when BLOCK >= n (prune must keep those)."""
    offs = tl.arange(0, BLOCK)
    tl.store(out, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def scale_by(x, out, n, K: tl.constexpr, TILE: tl.constexpr):
    """out = x * K; K is a constexpr, so 2, 2.0 and True compile to different code."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * K, mask=mask)


@triton.jit
def scale_optional(x, extra, n, TILE: tl.constexpr):
    """x *= 2; ``extra`` is an optional buffer the caller may pass as None."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)
