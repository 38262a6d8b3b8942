"""A kernel with two tile axes for the search tests (each point launches differently, so the
interpreter measures every one: no twins)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def vadd_split(a, b, c, n, TILE: tl.constexpr, SPLIT: tl.constexpr):
    pid = tl.program_id(0)
    for s in tl.static_range(SPLIT):
        offs = pid * TILE * SPLIT + s * TILE + tl.arange(0, TILE)
        mask = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)
