"""Kernels of test_ported_autotuners_sixth.py (imported by its DSL scripts)."""

import triton
import triton.language as tl

CONSTANT_C: tl.constexpr = tl.constexpr(4)
STRING_CONSTANT_C: tl.constexpr = tl.constexpr("CONSTANT_C")
BOOL_CONSTANT_C: tl.constexpr = tl.constexpr(True)


@triton.jit
def sum_and_difference(x, y, total, difference, n, TILE: tl.constexpr):
    """Two outputs: total = x + y, difference = x - y."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    b = tl.load(y + offs, mask=mask)
    tl.store(total + offs, a + b, mask=mask)
    tl.store(difference + offs, a - b, mask=mask)


@triton.jit
def bump_both(a, b, n, TILE: tl.constexpr):
    """In place: a += 1 and b *= 2 (each launch changes both: restore_value names both)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(a + offs, tl.load(a + offs, mask=mask) + 1, mask=mask)
    tl.store(b + offs, tl.load(b + offs, mask=mask) * 2, mask=mask)


@triton.jit
def mul_c(x, out, n, TILE: tl.constexpr, CONSTANT_NAME: tl.constexpr):
    """Inductor's mulC_kernel: out = C * C * x when CONSTANT_NAME names C, else out = 0
    (module globals that are ``tl.constexpr``, and a str constexpr from a Python value)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    output = v * 0
    if CONSTANT_NAME == STRING_CONSTANT_C:
        output = CONSTANT_C * v
    if BOOL_CONSTANT_C:
        output *= CONSTANT_C
    tl.store(out + offs, output, mask=mask)


@triton.jit
def scaled_plus_n(x, out, N: tl.constexpr, S: tl.constexpr, TILE: tl.constexpr):
    """out = x * S + N: a size and a float passed as constexprs (values baked into the
    kernel: a stale one gives a wrong result)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < N
    tl.store(out + offs, tl.load(x + offs, mask=mask) * S + N, mask=mask)


def sum_and_difference_here(tensors):
    """A compile worker's job (pickled by reference): launch the kernel on ``tensors`` in
    this process and return its pid with the outputs."""
    import os

    import torch

    x, y = tensors
    total, difference = torch.empty_like(x), torch.empty_like(x)
    sum_and_difference[(triton.cdiv(x.numel(), 64),)](x, y, total, difference, x.numel(), TILE=64)
    return os.getpid(), total, difference
