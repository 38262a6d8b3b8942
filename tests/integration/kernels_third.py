"""Triton kernels of the kinds real projects write, for test_kernels_third.py: a kernel that
updates tensors it gets inside a tuple, a row-statistics kernel with two outputs (a layer
norm's mean and rstd, as in Liger) and a bias-activation epilogue with bool, str and dtype
constexprs left at their defaults, taking strided views."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def accumulate_pair(pair, n, BLOCK: tl.constexpr):
    # pair = (total, x): total += x, and the sum of x atomically into total[n].
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(pair[1] + offs, mask=mask, other=0.0)
    tl.store(pair[0] + offs, tl.load(pair[0] + offs, mask=mask) + v, mask=mask)
    tl.atomic_add(pair[0] + n, tl.sum(v, 0))


@triton.jit
def row_stats(x, mean, rstd, cols, stride, eps, BLOCK: tl.constexpr):
    # One program per row, over the columns in chunks of BLOCK (two passes, as Liger's
    # layer norm does for wide rows); 64-bit row offsets.
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * stride + offs, mask=offs < cols, other=0.0).to(tl.float32)
    mu = tl.sum(acc, 0) / cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * stride + offs, mask=offs < cols, other=0.0).to(tl.float32)
        d = tl.where(offs < cols, v - mu, 0.0)
        acc += d * d
    tl.store(mean + row, mu)
    tl.store(rstd + row, 1 / tl.sqrt(tl.sum(acc, 0) / cols + eps))


@triton.jit
def bias_act(
    x, bias, y, n, cols, sxr, sxc, sy,
    BLOCK: tl.constexpr, ACT: tl.constexpr = "none", HAS_BIAS: tl.constexpr = False,
    OUT: tl.constexpr = tl.float32,
):  # fmt: skip
    # (rows, cols) views: x of any strides, y of unit column stride; the bias broadcasts.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r, c = offs // cols, offs % cols
    v = tl.load(x + r * sxr + c * sxc, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        v += tl.load(bias + c, mask=mask, other=0.0).to(tl.float32)
    if ACT == "relu":
        v = tl.maximum(v, 0.0)
    tl.store(y + r * sy + c, v.to(OUT), mask=mask)


def _warps(nargs):  # Liger's and xformers' rule: more warps for wider rows
    return 4 if nargs["n"] < 2048 else 8


@triton.heuristics({"num_warps": _warps})
@triton.jit
def scale_rows(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 3, mask=offs < n)


@triton.jit
def add_scaled(y, x, sx, a, n, BLOCK: tl.constexpr):
    # y += a * x in place, x of any stride (a broadcast bias has stride 0).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(y + offs, mask=mask) + a * tl.load(x + offs * sx, mask=mask)
    tl.store(y + offs, v, mask=mask)


@triton.jit
def double_pair(pair, n, BLOCK: tl.constexpr):
    # pair = (x, out): out = 2 * x.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(pair[1] + offs, tl.load(pair[0] + offs, mask=mask) * 2, mask=mask)


@triton.jit
def scale_pair(pair, BLOCK: tl.constexpr):
    # pair = (x, n): x *= 2 in place (a tuple holding a tensor and an int).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < pair[1]
    tl.store(pair[0] + offs, tl.load(pair[0] + offs, mask=mask) * 2, mask=mask)


@triton.jit
def sums_pair(x, outs, n, BLOCK: tl.constexpr):
    # outs = (sum, sum of squares), accumulated atomically: zeroed before each launch.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.atomic_add(outs[0], tl.sum(v, 0))
    tl.atomic_add(outs[1], tl.sum(v * v, 0))
