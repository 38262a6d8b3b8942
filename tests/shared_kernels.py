"""The Triton kernels the tests share: a vector add (also with an unmasked form) and a matmul.

Triton's JIT reads a kernel's source from its file, so they live in a real module. Triton
fixes interpreter-or-not when a kernel is decorated: a process imports this module after
choosing (the test session sets ``TRITON_INTERPRET=1`` first on a machine without a GPU;
the cross-compiling subprocesses import it with the variable unset).
Subprocess scripts put this directory on ``sys.path`` (:data:`TESTS_DIR`).
"""

from __future__ import annotations

from pathlib import Path

import triton
import triton.language as tl

TESTS_DIR = str(Path(__file__).resolve().parent)


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def vadd_even(a, b, c, n, TILE: tl.constexpr, EVEN: tl.constexpr):
    """c = a + b, unmasked when the caller says every tile is full (EVEN: n % TILE == 0)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if EVEN:
        tl.store(c + offs, tl.load(a + offs) + tl.load(b + offs))
    else:
        mask = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))
