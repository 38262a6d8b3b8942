"""Kernels of the twenty-fifth set, written as an ML-systems engineer new to tunedsl writes
them: in-place updates of several tensors, atomics into bins, ragged segments, strided
views, an output that is also an input, and bf16 data with fp32 accumulators."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def rope_qk(q, k, cos, sin, T, H, sq, sk, HALF: tl.constexpr, BH: tl.constexpr):
    """Rotary embedding applied in place to q and k of shape (T, H, 2 * HALF)."""
    t = tl.program_id(0)
    hb = tl.program_id(1)
    h = hb * BH + tl.arange(0, BH)
    d = tl.arange(0, HALF)
    m = (h < H)[:, None]
    c = tl.load(cos + t * HALF + d)[None, :]
    s = tl.load(sin + t * HALF + d)[None, :]
    qo = q + t * sq + h[:, None] * (2 * HALF) + d[None, :]
    q1 = tl.load(qo, mask=m)
    q2 = tl.load(qo + HALF, mask=m)
    tl.store(qo, q1 * c - q2 * s, mask=m)
    tl.store(qo + HALF, q2 * c + q1 * s, mask=m)
    ko = k + t * sk + h[:, None] * (2 * HALF) + d[None, :]
    k1 = tl.load(ko, mask=m)
    k2 = tl.load(ko + HALF, mask=m)
    tl.store(ko, k1 * c - k2 * s, mask=m)
    tl.store(ko + HALF, k2 * c + k1 * s, mask=m)


@triton.jit
def adamw_step(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, BLOCK: tl.constexpr):
    """One fused AdamW step: p, m, v updated in place, g read (and zeroed, as set_to_none)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    pp = tl.load(p + i, mask=mask)
    gg = tl.load(g + i, mask=mask)
    mm = tl.load(m + i, mask=mask) * b1 + (1 - b1) * gg
    vv = tl.load(v + i, mask=mask) * b2 + (1 - b2) * gg * gg
    pp = pp * (1 - lr * wd)
    pp = pp - lr * (mm / bc1) / (tl.sqrt(vv / bc2) + eps)
    tl.store(p + i, pp, mask=mask)
    tl.store(m + i, mm, mask=mask)
    tl.store(v + i, vv, mask=mask)
    tl.store(g + i, tl.zeros_like(gg), mask=mask)


@triton.jit
def histogram(x, bins, n, NB: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    b = tl.load(x + i, mask=mask, other=0)
    b = tl.minimum(tl.maximum(b, 0), NB - 1)
    tl.atomic_add(bins + b, 1, mask=mask)


@triton.jit
def segment_sum(x, offsets, out, D, BLOCK: tl.constexpr, BD: tl.constexpr):
    """out[s, :] = sum of rows offsets[s]:offsets[s+1] of x (ragged segments)."""
    s = tl.program_id(0)
    start = tl.load(offsets + s)
    end = tl.load(offsets + s + 1)
    d = tl.arange(0, BD)
    acc = tl.zeros((BD,), dtype=tl.float32)
    for r0 in range(start, end, BLOCK):
        r = r0 + tl.arange(0, BLOCK)
        rows = tl.load(
            x + r[:, None] * D + d[None, :], mask=(r < end)[:, None] & (d < D)[None, :], other=0.0
        )
        acc += tl.sum(rows.to(tl.float32), axis=0)
    tl.store(out + s * D + d, acc, mask=d < D)


@triton.jit
def maxpool2d(x, out, H, W, OH, OW, K: tl.constexpr, BW: tl.constexpr):
    """2-D max pool with a KxK window and stride K; one program per (plane, output row)."""
    pid = tl.program_id(0)
    plane = pid // OH
    oh = pid % OH
    ow = tl.program_id(1) * BW + tl.arange(0, BW)
    best = tl.full((BW,), float("-inf"), tl.float32)
    for kh in tl.static_range(K):
        for kw in tl.static_range(K):
            ih = oh * K + kh
            iw = ow * K + kw
            v = tl.load(x + plane * H * W + ih * W + iw, mask=ow < OW, other=float("-inf"))
            best = tl.maximum(best, v.to(tl.float32))
    tl.store(out + plane * OH * OW + oh * OW + ow, best, mask=ow < OW)


@triton.jit
def scale_2d(x, out, R, C, sxr, sxc, sor, soc, alpha, BR: tl.constexpr, BC: tl.constexpr):
    """out = alpha * x for a strided 2-D x (a transposed or sliced view)."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (r < R)[:, None] & (c < C)[None, :]
    v = tl.load(x + r[:, None] * sxr + c[None, :] * sxc, mask=m)
    tl.store(out + r[:, None] * sor + c[None, :] * soc, v * alpha, mask=m)


@triton.jit
def gelu_into(x, out, n, BLOCK: tl.constexpr):
    """out = gelu(x) (tanh form); out may be x itself."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    v = tl.load(x + i, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    e = tl.exp(-2.0 * tl.abs(inner))
    t = (1 - e) / (1 + e)
    t = tl.where(inner >= 0, t, -t)
    tl.store(out + i, (0.5 * v * (1 + t)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def bf16_matvec(a, x, out, M, K, sa, BM: tl.constexpr, BK: tl.constexpr):
    """out (fp32) = a (bf16, M x K) @ x (bf16), accumulated in fp32."""
    r = tl.program_id(0) * BM + tl.arange(0, BM)
    acc = tl.zeros((BM,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        av = tl.load(
            a + r[:, None] * sa + k[None, :], mask=(r < M)[:, None] & (k < K)[None, :], other=0.0
        )
        xv = tl.load(x + k, mask=k < K, other=0.0)
        acc += tl.sum(av.to(tl.float32) * xv.to(tl.float32)[None, :], axis=1)
    tl.store(out + r, acc, mask=r < M)


@triton.jit
def paged_gather(cache, table, out, L, MAXB, D: tl.constexpr, PAGE: tl.constexpr, BT: tl.constexpr):
    """out[s, t, :] = cache[table[s, t // PAGE], t % PAGE, :] for t < L."""
    s = tl.program_id(0)
    t = tl.program_id(1) * BT + tl.arange(0, BT)
    d = tl.arange(0, D)
    live = t < L
    blk = tl.load(table + s * MAXB + t // PAGE, mask=live, other=0)
    rows = tl.load(cache + (blk * PAGE + t % PAGE)[:, None] * D + d[None, :], mask=live[:, None])
    tl.store(out + (s * L + t)[:, None] * D + d[None, :], rows, mask=live[:, None])


@triton.jit
def add_bias_rows(
    x, bias, out, R, C, sx, HAS_BIAS: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr
):
    """out = x + bias (bias optional: None when HAS_BIAS is false), accumulated in fp32."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.arange(0, BC)
    m = (r < R)[:, None] & (c < C)[None, :]
    v = tl.load(x + r[:, None] * sx + c[None, :], mask=m, other=0.0).to(tl.float32)
    if HAS_BIAS:
        v += tl.load(bias + c, mask=c < C, other=0.0).to(tl.float32)[None, :]
    tl.store(out + r[:, None] * C + c[None, :], v.to(out.dtype.element_ty), mask=m)
