"""Kernels of test_ported_autotuners_twentieth.py: a vector add (Triton's test_autotuner.py
kernel), a row scale over ``n_cols`` columns (Unsloth's and Liger-Kernel's row kernels,
keyed on the columns), a copy through a scratch row per program (Kernel Tuner's shared
memory sized per configuration, ``smem_args``) and a small matrix product through ``tl.dot`` (the kernel AMD's
``matrix_instr_nonkdim`` picks an instruction for)."""

import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    """``out = x + y`` over ``n`` elements, ``BLOCK`` a program."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def scale_rows(x, out, n_rows, n_cols, factor, BLOCK: tl.constexpr):
    """``out[r, :] = x[r, :] * factor``, one row a program, in blocks of ``BLOCK`` columns."""
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * n_cols + cols, mask=mask)
        tl.store(out + row * n_cols + cols, v * factor, mask=mask)


@triton.jit
def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """``c = a @ b`` for row-major ``a`` (M x K), ``b`` (K x N), ``c`` (M x N) in float32."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        ta = tl.load(
            a + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0
        )
        tb = tl.load(
            b + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0
        )
        acc += tl.dot(ta, tb)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def staged_double(x, out, scratch, n, BLOCK: tl.constexpr):
    """``out = 2 * x``, each program staging its ``BLOCK`` elements in its own row of
    ``scratch`` (``cdiv(n, BLOCK) * BLOCK`` elements: its size follows the configuration)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(scratch + offs, tl.load(x + offs, mask=mask, other=0.0) * 2)
    tl.store(out + offs, tl.load(scratch + offs), mask=mask)
