"""Kernels of test_ported_autotuners_nineteenth.py: a split-K matrix-vector product that
stores when it does not split and adds atomically when it does (Triton's ``reset_to_zero``),
FlagGems' leaky ReLU written over its input (``leaky_relu_``), a row sum over a block of
``next_power_of_2(n_cols)`` columns (Liger-Kernel's and FlagGems' row kernels), and a copy."""

import triton
import triton.language as tl


@triton.jit
def matvec(A, X, Y, M, K, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    """``Y = A @ X``: program ``(row, split)`` sums every ``SPLIT_K``-th block of the row;
    one split stores its sum, several add theirs into ``Y``."""
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for start in range(tl.program_id(1) * BLOCK_K, K, BLOCK_K * SPLIT_K):
        k = start + tl.arange(0, BLOCK_K)
        a = tl.load(A + row * K + k, mask=k < K, other=0.0)
        acc += a * tl.load(X + k, mask=k < K, other=0.0)
    if SPLIT_K == 1:
        tl.store(Y + row, tl.sum(acc, axis=0))
    else:
        tl.atomic_add(Y + row, tl.sum(acc, axis=0))


@triton.jit
def leaky_relu(inp, out, n, slope, BLOCK: tl.constexpr):
    """``out = where(inp > 0, inp, inp * slope)``; ``leaky_relu_`` passes one tensor twice."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(inp + offs, mask=mask)
    tl.store(out + offs, tl.where(v > 0, v, v * slope), mask=mask)


@triton.jit
def row_sum(x, out, n_rows, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    """``out[r] = sum(x[r, :n_cols])`` in float32, ``ROWS`` rows a program, each read in one
    block of ``BLOCK >= n_cols`` columns."""
    cols = tl.arange(0, BLOCK)
    for i in tl.static_range(ROWS):
        row = tl.program_id(0) * ROWS + i
        mask = (cols < n_cols) & (cols * 0 + row < n_rows)
        v = tl.load(x + row * n_cols + cols, mask=mask, other=0.0)
        total = tl.sum(v.to(tl.float32), axis=0)
        tl.store(out + row, total.to(out.dtype.element_ty), mask=row < n_rows)


@triton.jit
def copy(x, y, n, BLOCK: tl.constexpr):
    """``y[:n] = x[:n]``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
