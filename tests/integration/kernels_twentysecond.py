"""Kernels of the twenty-second set (test_kernels_twentysecond.py): plain Triton, imported
by the DSL scripts the tests write."""

import triton
import triton.language as tl


@triton.jit
def topk_rows(x, out, N, sx, K: tl.constexpr, BLOCK: tl.constexpr):
    """The K largest values of each row, largest first: one program per row, whose BLOCK
    must cover the row (a smaller one silently leaves the rest of the row out)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * sx + offs, mask=offs < N, other=float("-inf"))
    for i in tl.static_range(K):
        tl.store(out + row * K + i, tl.max(v, 0))
        v = tl.where(offs == tl.argmax(v, 0), float("-inf"), v)
