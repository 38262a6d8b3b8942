"""Kernels of the twentieth set (none of them in the gallery), tuned through DSL sites and
``autotune_launch`` under Triton's interpreter by test_kernels_twentieth.py: split-K into a
zeroed output with atomics, flash-decoding with a reduce kernel, an MoE gather matmul over
sorted token ids, int8 quantization with per-row scales, scans, sorts, a histogram, a
constexpr dtype, do_not_specialize, 2-D and 3-D grids, in-place and aliased outputs."""

import triton
import triton.language as tl


@triton.jit
def splitk_mm(
    a,
    b,
    c,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    SPLIT: tl.constexpr,
):
    pid = tl.program_id(0)
    ks = tl.program_id(1)
    nbn = tl.cdiv(N, BN)
    pm, pn = pid // nbn, pid % nbn
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(ks * BK, K, BK * SPLIT):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(
            a + rm[:, None] * sam + rk[None, :] * sak,
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        y = tl.load(
            b + rk[:, None] * sbk + rn[None, :] * sbn,
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, y)
    tl.atomic_add(
        c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N)
    )


@triton.jit
def decode_split(
    q,
    k,
    v,
    mid_o,
    mid_lse,
    L,
    D: tl.constexpr,
    sqh,
    skh,
    skl,
    svh,
    svl,
    smh,
    sms,
    slh,
    NSPLIT: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    h = tl.program_id(0)
    s = tl.program_id(1)
    per = tl.cdiv(L, NSPLIT)
    start = s * per
    end = tl.minimum(start + per, L)
    d = tl.arange(0, D)
    qv = tl.load(q + h * sqh + d).to(tl.float32)
    m = tl.full((), float("-inf"), tl.float32)
    denom = tl.zeros((), tl.float32)
    acc = tl.zeros((D,), tl.float32)
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        mask = n < end
        kk = tl.load(k + h * skh + n[:, None] * skl + d[None, :], mask=mask[:, None], other=0.0)
        sc = tl.sum(kk * qv[None, :], 1)
        sc = tl.where(mask, sc, float("-inf"))
        m2 = tl.maximum(m, tl.max(sc, 0))
        p = tl.exp(sc - m2)
        alpha = tl.exp(m - m2)
        vv = tl.load(v + h * svh + n[:, None] * svl + d[None, :], mask=mask[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * vv, 0)
        denom = denom * alpha + tl.sum(p, 0)
        m = m2
    tl.store(mid_o + h * smh + s * sms + d, acc / denom)
    tl.store(mid_lse + h * slh + s, m + tl.log(denom))


@triton.jit
def decode_reduce(
    mid_o, mid_lse, out, smh, sms, slh, soh, NSPLIT: tl.constexpr, D: tl.constexpr, BD: tl.constexpr
):
    h = tl.program_id(0)
    db = tl.program_id(1)
    d = db * BD + tl.arange(0, BD)
    s = tl.arange(0, NSPLIT)
    lse = tl.load(mid_lse + h * slh + s)
    mx = tl.max(lse, 0)
    w = tl.exp(lse - mx)
    w = w / tl.sum(w, 0)
    o = tl.load(mid_o + h * smh + s[:, None] * sms + d[None, :], mask=d[None, :] < D)
    tl.store(out + h * soh + d, tl.sum(w[:, None] * o, 0), mask=d < D)


@triton.jit
def moe_gather_mm(
    x,
    w,
    out,
    sorted_ids,
    expert_ids,
    num_post_pad,
    num_valid,
    N,
    K,
    sxm,
    swe,
    swk,
    swn,
    som,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    if pm * BM >= tl.load(num_post_pad):
        return
    offs = pm * BM + tl.arange(0, BM)
    tok = tl.load(sorted_ids + offs)
    tmask = tok < num_valid
    e = tl.load(expert_ids + pm)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(
            x + tok[:, None] * sxm + rk[None, :], mask=tmask[:, None] & (rk[None, :] < K), other=0.0
        )
        b = tl.load(
            w + e * swe + rk[:, None] * swk + rn[None, :] * swn,
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b)
    tl.store(out + tok[:, None] * som + rn[None, :], acc, mask=tmask[:, None] & (rn[None, :] < N))


@triton.jit
def quant_rows(x, q, scales, N, sxr, sqr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x + r * sxr + c, mask=c < N, other=0.0)
    amax = tl.max(tl.abs(v), 0)
    s = tl.maximum(amax / 127.0, 1e-8)
    qq = v / s
    qq = tl.where(qq >= 0, tl.floor(qq + 0.5), tl.ceil(qq - 0.5))
    tl.store(q + r * sqr + c, qq.to(tl.int8), mask=c < N)
    tl.store(scales + r, s)


@triton.jit
def cumsum_rows(x, out, N, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x + r * N + c, mask=c < N, other=0.0)
    tl.store(out + r * N + c, tl.cumsum(v, 0), mask=c < N)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def scan_rows(x, out, N, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x + r * N + c, mask=c < N, other=0.0)
    tl.store(out + r * N + c, tl.associative_scan(v, 0, _add), mask=c < N)


@triton.jit
def sort_rows(x, out, N, BLOCK: tl.constexpr, DESC: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    fill = float("-inf") if DESC else float("inf")
    v = tl.load(x + r * N + c, mask=c < N, other=fill)
    tl.store(out + r * N + c, tl.sort(v, 0, descending=DESC), mask=c < N)


@triton.jit
def hist(x, out, n, NBINS: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + i, mask=i < n, other=0)
    h = tl.histogram(v, NBINS, mask=i < n)
    tl.atomic_add(out + tl.arange(0, NBINS), h)


@triton.jit
def cast_scale(x, out, n, scale, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + i, mask=i < n)
    tl.store(out + i, (v * scale).to(OUT_DTYPE), mask=i < n)


@triton.jit(do_not_specialize=["n", "off"])
def shifted_copy(x, out, n, off, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i + off, mask=i < n), mask=i < n)


@triton.jit
def tile2d(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    v = tl.load(x + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(out + rn[None, :] * M + rm[:, None], v, mask=mask)


@triton.jit
def bhn(x, out, H, N, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    nb = tl.program_id(2)
    i = nb * BLOCK + tl.arange(0, BLOCK)
    base = (b * H + h) * N
    v = tl.load(x + base + i, mask=i < N)
    tl.store(out + base + i, v * (h + 1) + b, mask=i < N)


@triton.jit
def add_inplace(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(x + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


@triton.jit
def relu_into(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.maximum(tl.load(x + i, mask=m), 0.0), mask=m)


@triton.jit
def shift_left(x, out, n, BLOCK: tl.constexpr):
    # out[i] = x[i + 1]: with out aliasing x this is order dependent across programs
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i + 1, mask=m) * 2.0, mask=m)


@triton.jit
def compute_in(x, out, n, CDT: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x + i, mask=m).to(CDT)
    tl.store(out + i, (v * 3.3).to(tl.float32), mask=m)
