"""Kernels of test_ported_autotuners_thirteenth.py: attorch's layer normalization and
Liger-Kernel's RMS normalization, written for tunedsl sites (the block of rows a program
handles, or the number of programs, is the tuned field)."""

import triton
import triton.language as tl


@triton.jit
def layer_norm_fwd(x, w, b, mean, inv_std, out, rows, cols, eps,
                   ROWS: tl.constexpr, COLS: tl.constexpr):  # fmt: skip
    """attorch's forward: each program normalizes ROWS rows, saving mean and 1/std."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    rmask = r < rows
    mask = rmask[:, None] & (c < cols)[None, :]
    v = tl.load(x + r[:, None] * cols + c[None, :], mask=mask).to(tl.float32)
    mu = tl.sum(v, axis=1) / cols
    d = tl.where(mask, v - mu[:, None], 0.0)
    rs = 1 / tl.sqrt(tl.sum(d * d, axis=1) / cols + eps)
    tl.store(mean + r, mu, mask=rmask)
    tl.store(inv_std + r, rs, mask=rmask)
    y = d * rs[:, None] * tl.load(w + c, mask=c < cols)[None, :]
    y += tl.load(b + c, mask=c < cols)[None, :]
    tl.store(out + r[:, None] * cols + c[None, :], y, mask=mask)


@triton.jit
def layer_norm_bwd(dy, x, mean, inv_std, w, dx, dw, db, rows, cols,
                   ROWS: tl.constexpr, COLS: tl.constexpr):  # fmt: skip
    """attorch's backward: the input's gradient, and per program one row of partial
    weight and bias gradients (row ``pid`` of ``dw``/``db``), summed by the caller: the
    rows a launch writes depend on ROWS, so the rest must be zero."""
    pid = tl.program_id(0)
    r = pid * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    cmask = c < cols
    mask = (r < rows)[:, None] & cmask[None, :]
    g = tl.load(dy + r[:, None] * cols + c[None, :], mask=mask).to(tl.float32)
    v = tl.load(x + r[:, None] * cols + c[None, :], mask=mask).to(tl.float32)
    mu = tl.load(mean + r, mask=r < rows)
    rs = tl.load(inv_std + r, mask=r < rows)
    xhat = tl.where(mask, (v - mu[:, None]) * rs[:, None], 0.0)
    wg = tl.load(w + c, mask=cmask)[None, :] * g
    t1 = xhat * (tl.sum(xhat * wg, axis=1) / cols)[:, None]
    t2 = (tl.sum(wg, axis=1) / cols)[:, None]
    tl.store(dx + r[:, None] * cols + c[None, :], rs[:, None] * (wg - (t1 + t2)), mask=mask)
    tl.store(dw + pid * cols + c, tl.sum(g * xhat, axis=0), mask=cmask)
    tl.store(db + pid * cols + c, tl.sum(g, axis=0), mask=cmask)


@triton.jit
def rms_norm_fwd(x, w, y, rstd, cols, eps, COLS: tl.constexpr):
    """Liger's forward: one program a row; saves 1/rms for the backward pass."""
    row = tl.program_id(0)
    c = tl.arange(0, COLS)
    v = tl.load(x + row * cols + c, mask=c < cols, other=0.0).to(tl.float32)
    rs = 1 / tl.sqrt(tl.sum(v * v, axis=0) / cols + eps)
    tl.store(rstd + row, rs)
    tl.store(y + row * cols + c, v * rs * tl.load(w + c, mask=c < cols), mask=c < cols)


@triton.jit
def rms_norm_bwd(dy, dx, x, w, rstd, dw, rows, cols, per_program,
                 COLS: tl.constexpr):  # fmt: skip
    """Liger's backward: a grid of programs (Liger's SM count, tuned here), each over
    ``per_program`` rows, accumulating its partial weight gradient in one row of ``dw``.
    ``dx`` may be ``dy`` itself (Liger's ``in_place=True``): each row's gradient is written
    over the gradient it was computed from."""
    pid = tl.program_id(0)
    c = tl.arange(0, COLS)
    cmask = c < cols
    wv = tl.load(w + c, mask=cmask, other=0.0)
    acc = tl.zeros((COLS,), tl.float32)
    start = pid * per_program
    for row in range(start, tl.minimum(start + per_program, rows)):
        g = tl.load(dy + row * cols + c, mask=cmask, other=0.0)
        v = tl.load(x + row * cols + c, mask=cmask, other=0.0)
        rs = tl.load(rstd + row)
        m = g * wv
        d = rs * m - rs * rs * rs * (tl.sum(m * v, axis=0) / cols) * v
        acc += g * v * rs
        tl.store(dx + row * cols + c, d, mask=cmask)
    tl.store(dw + pid * cols + c, acc, mask=cmask)
