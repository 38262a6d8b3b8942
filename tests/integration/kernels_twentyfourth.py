"""Kernels of the twenty-fourth set (test_kernels_twentyfourth.py): plain Triton, imported by
the DSL scripts the tests write, as an application's training code would import them."""

import triton
import triton.language as tl


@triton.jit
def topk_two_outputs(x, vals, idxs, N, sx, K: tl.constexpr, BLOCK: tl.constexpr):
    """The K largest of each row's N values and their column indices, largest first: one
    program per row, whose BLOCK must cover N."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * sx + offs, mask=offs < N, other=float("-inf"))
    for i in tl.static_range(K):
        j = tl.argmax(v, 0)
        tl.store(vals + row * K + i, tl.max(v, 0))
        tl.store(idxs + row * K + i, j.to(tl.int64))
        v = tl.where(offs == j, float("-inf"), v)


@triton.jit
def cross_entropy_sum(logits, target, loss, count, V, sl, ignore_index, BLOCK: tl.constexpr):
    """loss += -log_softmax(logits[row])[target[row]] and count += 1 for each row whose target
    is not ignore_index (atomics into two scalars): one program per row, BLOCK-wide chunks."""
    row = tl.program_id(0)
    t = tl.load(target + row)
    m_i = float("-inf")
    l_i = 0.0
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(logits + row * sl + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(v, 0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(v - m_new), 0)
        m_i = m_new
    keep = t != ignore_index
    tt = tl.where(keep, t, 0)
    xt = tl.load(logits + row * sl + tt).to(tl.float32)
    lse = m_i + tl.log(l_i)
    tl.atomic_add(loss, tl.where(keep, lse - xt, 0.0))
    tl.atomic_add(count, tl.where(keep, 1, 0))


@triton.jit
def depthwise_conv1d(x, w, out, C, L, KW: tl.constexpr, BLOCK: tl.constexpr):
    """out[b, c, l] = sum_k x[b, c, l + k - KW // 2] * w[c, k] (zero padded), x and out
    contiguous (B, C, L): programs over (b * C + c, L blocks)."""
    bc = tl.program_id(0)
    c = bc % C
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(KW):
        src = offs + k - KW // 2
        v = tl.load(x + bc * L + src, mask=(src >= 0) & (src < L), other=0.0)
        acc += v * tl.load(w + c * KW + k)
    tl.store(out + bc * L + offs, acc, mask=offs < L)


@triton.jit
def quantize_rows_int8(x, q, scales, N, sx, BLOCK: tl.constexpr):
    """q[row] = round(x[row] / s), s = max|x[row]| / 127 (scales[row] = s): one program per
    row, two passes of BLOCK-wide chunks (any BLOCK is right)."""
    row = tl.program_id(0)
    amax = 0.0
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * sx + offs, mask=offs < N, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(v), 0))
    s = tl.maximum(amax, 1e-8) / 127.0
    tl.store(scales + row, s)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * sx + offs, mask=offs < N, other=0.0).to(tl.float32)
        r = v / s
        r = tl.where(r >= 0, tl.floor(r + 0.5), tl.ceil(r - 0.5))
        tl.store(q + row * N + offs, r.to(tl.int8), mask=offs < N)


@triton.jit
def scatter_add_rows(src, index, out, n, D: tl.constexpr, BLOCK: tl.constexpr):
    """out[index[i], :] += src[i, :] for i < n (indices may repeat: atomics)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    dst = tl.load(index + i, mask=m, other=0)
    for d in tl.static_range(D):
        tl.atomic_add(out + dst * D + d, tl.load(src + i * D + d, mask=m, other=0.0), mask=m)


@triton.jit
def block_sums(x, sums, n, BLOCK: tl.constexpr):
    """sums[b] = sum of x's b-th BLOCK-wide block."""
    b = tl.program_id(0)
    offs = b * BLOCK + tl.arange(0, BLOCK)
    tl.store(sums + b, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), 0))


@triton.jit
def scan_with_offsets(x, offsets, out, n, BLOCK: tl.constexpr):
    """out = the inclusive prefix sum of x, block b adding offsets[b] (the sum of the blocks
    before it, from block_sums's output scanned on the host)."""
    b = tl.program_id(0)
    offs = b * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(out + offs, tl.cumsum(v, 0) + tl.load(offsets + b), mask=offs < n)


@triton.jit
def cast_scale(x, out, n, alpha, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    """out = (x * alpha) cast to OUT_DTYPE (a tl.dtype given as a constexpr)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + i, mask=i < n, other=0.0).to(tl.float32) * alpha
    tl.store(out + i, v.to(OUT_DTYPE), mask=i < n)


@triton.jit(do_not_specialize=["n"])
def axpy_unspecialized(x, y, n, a, BLOCK: tl.constexpr):
    """y += a * x over n values, n not specialized by Triton."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, tl.load(y + i, mask=m) + a * tl.load(x + i, mask=m), mask=m)


@triton.jit
def fp8_dot_rows(a, b, out, N, sa, BLOCK: tl.constexpr):
    """out[row] = sum(float(a[row]) * float(b)) over N columns, a in float8 e4m3."""
    row = tl.program_id(0)
    acc = 0.0
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        av = tl.load(a + row * sa + offs, mask=offs < N, other=0.0).to(tl.float32)
        bv = tl.load(b + offs, mask=offs < N, other=0.0).to(tl.float32)
        acc += tl.sum(av * bv, 0)
    tl.store(out + row, acc)


@triton.jit
def bias_act(x, bias, out, n, cols, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    """out = relu(x + bias[col]) (bias optional), x contiguous of `cols` columns."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x + i, mask=m, other=0.0)
    if HAS_BIAS:
        v += tl.load(bias + i % cols, mask=m, other=0.0)
    tl.store(out + i, tl.maximum(v, 0.0), mask=m)
