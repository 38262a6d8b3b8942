"""Kernels of the twenty-third set (test_kernels_twentythird.py): plain Triton, imported by
the DSL scripts the tests write, as an application's model code would import them."""

import triton
import triton.language as tl


@triton.jit
def topk_live(x, out, sx, N, K: tl.constexpr, BLOCK: tl.constexpr):
    """The K largest of the first N values of each row of a static buffer, largest first:
    one program per row, whose BLOCK must cover N (a smaller one silently leaves the rest
    of the row out)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * sx + offs, mask=offs < N, other=float("-inf"))
    for i in tl.static_range(K):
        tl.store(out + row * K + i, tl.max(v, 0))
        v = tl.where(offs == tl.argmax(v, 0), float("-inf"), v)


@triton.jit
def histogram_into(x, n, hist, BLOCK: tl.constexpr):
    """hist[v] += 1 for each of the n values of x (atomics): adds into what hist holds."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.atomic_add(hist + tl.load(x + i, mask=m, other=0), 1, mask=m)


@triton.jit
def softmax_maybe_masked(x, mask, out, N, BLOCK: tl.constexpr):
    """Row softmax over N columns in BLOCK chunks (any BLOCK is right), the columns where
    ``mask`` is 0 left out; ``mask`` may be None (Triton specializes it away)."""
    row = tl.program_id(0)
    m_i = float("-inf")
    l_i = 0.0
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ok = offs < N
        if mask is not None:
            ok = ok & (tl.load(mask + row * N + offs, mask=offs < N, other=0) != 0)
        v = tl.where(ok, tl.load(x + row * N + offs, mask=offs < N, other=0.0), float("-inf"))
        m_new = tl.maximum(m_i, tl.max(v, 0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(v - m_new), 0)
        m_i = m_new
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ok = offs < N
        if mask is not None:
            ok = ok & (tl.load(mask + row * N + offs, mask=offs < N, other=0) != 0)
        v = tl.load(x + row * N + offs, mask=offs < N, other=0.0)
        tl.store(out + row * N + offs, tl.where(ok, tl.exp(v - m_i) / l_i, 0.0), mask=offs < N)


@triton.jit
def scale_rows(x, out, n, alpha, BLOCK: tl.constexpr):
    """out = x * alpha, alpha a number."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) * alpha, mask=i < n)
