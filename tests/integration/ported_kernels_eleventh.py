"""Kernels of test_ported_autotuners_eleventh.py."""

import triton
import triton.language as tl


@triton.jit
def offset_copy(dst, src, N, OFF: tl.constexpr, BLOCK: tl.constexpr):
    """dst[i] = src[i + OFF] for i < N."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    tl.store(dst + i, tl.load(src + i + OFF, mask=mask), mask=mask)


@triton.jit
def picky_copy(dst, src, N, WIDTH: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src; a WIDTH that is not a power of two fails to build (``tl.arange``)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    x = tl.load(src + i, mask=mask)
    x = x + tl.sum(tl.zeros((WIDTH,), tl.float32) + tl.arange(0, WIDTH) * 0, axis=0)
    tl.store(dst + i, x, mask=mask)


@triton.jit
def add_into(a, b, N, BUMP: tl.constexpr, BLOCK: tl.constexpr):
    """b += a; with BUMP, also a += 1 (a write of an input it should only read)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    x = tl.load(a + i, mask=mask)
    tl.store(b + i, x + tl.load(b + i, mask=mask), mask=mask)
    if BUMP:
        tl.store(a + i, x + 1, mask=mask)


@triton.jit
def typed_constexprs(
    dst, src, N, SCALE: tl.constexpr, FLIP: tl.constexpr, MODE: tl.constexpr,
    SHIFT: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """dst = src * SCALE, negated when FLIP, plus 1 when MODE == "inc", plus SHIFT unless it
    is None: one constexpr of each JSON scalar type."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    x = tl.load(src + i, mask=mask) * SCALE
    if FLIP:
        x = -x
    if MODE == "inc":
        x = x + 1
    if SHIFT is not None:
        x = x + SHIFT
    tl.store(dst + i, x, mask=mask)


@triton.jit
def hooked_add(a, b, out, n, BLOCK: tl.constexpr):
    """out = a + b; the test adds a pre-run hook to it (``add_pre_run_hook``)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out + i, tl.load(a + i, mask=mask) + tl.load(b + i, mask=mask), mask=mask)
