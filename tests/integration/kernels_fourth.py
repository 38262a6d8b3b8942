"""Triton kernels of shapes the gallery and the other kernel files do not have, for
test_kernels_fourth.py: a row argmax and a top-k with two outputs each, an epilogue with
an optional residual and bool constexprs, an int8 quantizer and an int8 matmul, a split-K
matmul adding through atomics into a strided view, a kernel on a 3-D grid, a pipelined
reduction with ``tl.range(num_stages=, loop_unroll_factor=)`` constexprs, a strided axpy
taking its strides as arguments, a copy whose ints Triton does not specialize, and an
epilogue that stores under one configuration and adds atomically under another."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def row_argmax(x, vals, idx, cols, sxr, sxc, BLOCK: tl.constexpr):
    # One program per row: the maximum and the lowest column holding it.
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    at = tl.zeros((BLOCK,), tl.int32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        v = tl.load(x + r * sxr + c * sxc, mask=c < cols, other=float("-inf")).to(tl.float32)
        take = v > best
        best = tl.where(take, v, best)
        at = tl.where(take, c, at)
    top = tl.max(best, 0)
    tl.store(vals + r, top)
    tl.store(idx + r, tl.min(tl.where(best == top, at, cols), 0).to(tl.int64))


@triton.jit
def top_k(x, vals, idx, cols, sx, K: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + r * sx + offs, mask=offs < cols, other=float("-inf"))
    for j in tl.static_range(K):
        top = tl.max(v, 0)
        at = tl.min(tl.where(v == top, offs, BLOCK), 0)
        tl.store(vals + r * K + j, top)
        tl.store(idx + r * K + j, at)
        v = tl.where(offs == at, float("-inf"), v)


@triton.jit
def scale_residual(
    x, res, out, n, alpha, HAS_RES: tl.constexpr, RELU: tl.constexpr, BLOCK: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m) * alpha
    if HAS_RES:
        v += tl.load(res + offs, mask=m)
    if RELU:
        v = tl.maximum(v, 0.0)
    tl.store(out + offs, v, mask=m)


@triton.jit
def quantize_int8(x, q, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.minimum(tl.maximum(tl.load(x + offs, mask=m) / scale, -127.0), 127.0)
    v = tl.where(v >= 0, v + 0.5, v - 0.5)  # round half away from zero
    tl.store(q + offs, v.to(tl.int8), mask=m)


@triton.jit
def splitk_atomic(
    a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr,
):  # fmt: skip
    pid, pk = tl.program_id(0), tl.program_id(1)
    nb = tl.cdiv(N, BN)
    rm = (pid // nb) * BM + tl.arange(0, BM)
    rn = (pid % nb) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(pk * BK, K, BK * SPLIT):
        rk = k0 + tl.arange(0, BK)
        av = tl.load(
            a + rm[:, None] * sam + rk[None, :] * sak,
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        bv = tl.load(
            b + rk[:, None] * sbk + rn[None, :] * sbn,
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(av, bv)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    ptr = c + rm[:, None] * scm + rn[None, :] * scn
    if SPLIT == 1:
        tl.store(ptr, acc, mask=mask)
    else:
        tl.atomic_add(ptr, acc, mask=mask)


@triton.jit
def grid3(x, out, N, sb, sh, BLOCK: tl.constexpr):
    # (batch, head, block) programs: out = x * (head + 1) + batch.
    b, h = tl.program_id(0), tl.program_id(1)
    offs = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    v = tl.load(x + b * sb + h * sh + offs, mask=m)
    tl.store(out + b * sb + h * sh + offs, v * (h + 1) + b, mask=m)


@triton.jit
def pipelined_sum(x, out, n, BLOCK: tl.constexpr, STAGES: tl.constexpr, UNROLL: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in tl.range(0, n, BLOCK, num_stages=STAGES, loop_unroll_factor=UNROLL):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(out, tl.sum(acc, 0))


@triton.jit
def strided_axpy(y, x, n, a, sx, sy, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = a * tl.load(x + offs * sx, mask=m) + tl.load(y + offs * sy, mask=m)
    tl.store(y + offs * sy, v, mask=m)


@triton.jit(do_not_specialize=["n", "s"])
def gather_every(x, y, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs * s, mask=m), mask=m)


@triton.jit
def double_into(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, (tl.load(x + offs, mask=m) * 2).to(out.dtype.element_ty), mask=m)


@triton.jit
def store_or_add(x, out, n, ADD: tl.constexpr, BLOCK: tl.constexpr):
    # A split-K matmul's epilogue in one dimension: one configuration stores its result,
    # another adds it atomically (the output must then start from zero).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    if ADD:
        tl.atomic_add(out + offs, v, mask=m)
    else:
        tl.store(out + offs, v, mask=m)


@triton.jit
def int8_matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # int8 operands, int32 accumulation (tl.dot of int8 gives int32).
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.int32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        av = tl.load(a + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K))
        bv = tl.load(b + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N))
        acc += tl.dot(av, bv)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.autotune(
    configs=[triton.Config({}, num_warps=2), triton.Config({}, num_warps=4)], key=["n"]
)
@triton.jit
def double_autotuned(x, out, n, BLOCK: tl.constexpr):
    # Wrapped in Triton's own autotuner, whose configurations set launch options only.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)
