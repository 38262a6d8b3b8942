"""Kernels of the twenty-first set (none of them in the gallery), the layers of a serving
stack tuned ahead of time by test_kernels_twentyfirst.py under Triton's interpreter: a fused
residual add and RMSNorm, a SiLU-and-mul gate, a rotary embedding applied in place, and a
gather of a paged KV cache through a block table."""

import triton
import triton.language as tl


@triton.jit
def rmsnorm_res(x, res, w, out, res_out, N, sx, sr, so, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    a = tl.load(x + row * sx + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.load(res + row * sr + cols, mask=m, other=0.0).to(tl.float32)
    h = a + r
    tl.store(res_out + row * sr + cols, h, mask=m)
    var = tl.sum(h * h, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(out + row * so + cols, h * rstd * g, mask=m)


@triton.jit
def silu_mul(x, out, T, D, sx, so, BT: tl.constexpr, BD: tl.constexpr):
    rt = tl.program_id(0) * BT + tl.arange(0, BT)
    rd = tl.program_id(1) * BD + tl.arange(0, BD)
    m = (rt[:, None] < T) & (rd[None, :] < D)
    g = tl.load(x + rt[:, None] * sx + rd[None, :], mask=m, other=0.0).to(tl.float32)
    u = tl.load(x + rt[:, None] * sx + D + rd[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(out + rt[:, None] * so + rd[None, :], g * tl.sigmoid(g) * u, mask=m)


@triton.jit
def rotary(q, cos, sin, pos, T, H, sqt, sqh, sc, HALF: tl.constexpr, BH: tl.constexpr):
    t = tl.program_id(0)
    hs = tl.program_id(1) * BH + tl.arange(0, BH)
    d = tl.arange(0, HALF)
    p = tl.load(pos + t)
    c = tl.load(cos + p * sc + d)
    s = tl.load(sin + p * sc + d)
    mh = hs[:, None] < H
    base = q + t * sqt + hs[:, None] * sqh
    x1 = tl.load(base + d[None, :], mask=mh, other=0.0)
    x2 = tl.load(base + HALF + d[None, :], mask=mh, other=0.0)
    tl.store(base + d[None, :], x1 * c[None, :] - x2 * s[None, :], mask=mh)
    tl.store(base + HALF + d[None, :], x2 * c[None, :] + x1 * s[None, :], mask=mh)


@triton.jit
def paged_gather(
    cache, table, lens, out, sb, st, sbt, sob, sot, MAXLEN,
    BS: tl.constexpr, D: tl.constexpr, BT: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    ts = tl.program_id(1) * BT + tl.arange(0, BT)
    m = ts < tl.load(lens + b)
    blk = tl.load(table + b * sbt + ts // BS, mask=m, other=0)
    d = tl.arange(0, D)
    v = tl.load(
        cache + blk[:, None] * sb + (ts % BS)[:, None] * st + d[None, :], mask=m[:, None], other=0.0
    )
    tl.store(out + b * sob + ts[:, None] * sot + d[None, :], v, mask=ts[:, None] < MAXLEN)
