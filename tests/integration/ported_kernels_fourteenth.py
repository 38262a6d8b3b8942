"""Kernels of test_ported_autotuners_fourteenth.py: xformers' tiled matmul (up to 3x3 tiles
of operands and output, split-K by atomic adds), vLLM's fused mixture-of-experts GEMM (tokens
sorted by expert and padded to the tuned block of rows) and SGLang's two-stage decode
attention (the tuned number of key/value splits, then their reduction), written for tunedsl
sites; and Liger-Kernel's cross entropy, which writes the logits' gradient over the logits."""

import triton
import triton.language as tl


@triton.jit
def tiled_matmul(A11, A12, A21, A22, B11, B12, B21, B22, C11, C12, C21, C22,
                 M1, M2, N1, N2, K1, K2,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr):  # fmt: skip
    """xformers' ``_xformers_tiled_matmul_kernel`` on 2x2 tiles (one stride per operand):
    ``C[i][j] = sum_k A[i][k] @ B[k][j]``; with ``SPLIT_K > 1`` each of SPLIT_K programs
    adds its share of the K tiles into C atomically (C must start at zero)."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    grid_m1 = tl.cdiv(M1, BLOCK_M)
    grid_n1 = tl.cdiv(N1, BLOCK_N)
    grid_n2 = tl.cdiv(N2, BLOCK_N)
    grid_n = grid_n1 + grid_n2
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    A1 = tl.where(pid_m < grid_m1, A11, A21)
    A2 = tl.where(pid_m < grid_m1, A12, A22)
    B1 = tl.where(pid_n < grid_n1, B11, B12)
    B2 = tl.where(pid_n < grid_n1, B21, B22)
    C = tl.where(pid_m < grid_m1, tl.where(pid_n < grid_n1, C11, C12),
                 tl.where(pid_n < grid_n1, C21, C22))  # fmt: skip
    M = tl.where(pid_m < grid_m1, M1, M2)
    N = tl.where(pid_n < grid_n1, N1, N2)
    pid_m = tl.where(pid_m < grid_m1, pid_m, pid_m - grid_m1)
    pid_n = tl.where(pid_n < grid_n1, pid_n, pid_n - grid_n1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = rm % M
    rbn = rn % N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    grid_k1 = tl.cdiv(K1, BLOCK_K)
    grid_k2 = tl.cdiv(K2, BLOCK_K)
    for tile in range(pid_k, grid_k1 + grid_k2, SPLIT_K):
        A = tl.where(tile < grid_k1, A1, A2)
        B = tl.where(tile < grid_k1, B1, B2)
        K = tl.where(tile < grid_k1, K1, K2)
        my_tile = tl.where(tile < grid_k1, tile, tile - grid_k1)
        rk = my_tile * BLOCK_K + tl.arange(0, BLOCK_K)
        a_in = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak)
        b_in = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn)
        if EVEN_K:
            a = tl.load(a_in)
            b = tl.load(b_in)
        else:
            a = tl.load(a_in, mask=rk[None, :] < K, other=0.0)
            b = tl.load(b_in, mask=rk[:, None] < K, other=0.0)
        acc += tl.dot(a, b, allow_tf32=False)
    C = C + (rm[:, None] * stride_cm + rn[None, :] * stride_cn)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    if SPLIT_K == 1:
        tl.store(C, acc, mask=mask)
    else:
        tl.atomic_add(C, acc, mask=mask)


@triton.jit
def fused_moe(a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
              N, K, num_valid_tokens, top_k: tl.constexpr, MUL_ROUTED_WEIGHT: tl.constexpr,
              BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
              BLOCK_SIZE_K: tl.constexpr):  # fmt: skip
    """vLLM's ``fused_moe_kernel``: program (m, n) multiplies the rows of block m of the
    expert-sorted tokens by its expert's weights ``b[e]`` (N x K), writing row ``t`` of ``c``
    for each sorted id ``t`` (a token and one of its top_k experts); a padding id
    (``num_valid_tokens``) writes nothing, a block past the padded count returns."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_SIZE_M >= tl.load(num_tokens_post_padded):
        return
    offs = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_token = tl.load(sorted_token_ids + offs)
    token_mask = offs_token < num_valid_tokens
    expert = tl.load(expert_ids + pid_m)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        offs_k = k0 + tl.arange(0, BLOCK_SIZE_K)
        a_tile = tl.load(a + (offs_token // top_k)[:, None] * K + offs_k[None, :],
                         mask=token_mask[:, None] & (offs_k < K)[None, :], other=0.0)  # fmt: skip
        b_tile = tl.load(b + expert * N * K + offs_n[None, :] * K + offs_k[:, None],
                         mask=(offs_k < K)[:, None] & (offs_n < N)[None, :], other=0.0)  # fmt: skip
        acc += tl.dot(a_tile, b_tile, allow_tf32=False)
    if MUL_ROUTED_WEIGHT:
        w = tl.load(topk_weights + offs_token, mask=token_mask, other=0.0)
        acc = acc * w[:, None]
    tl.store(c + offs_token[:, None] * N + offs_n[None, :], acc,
             mask=token_mask[:, None] & (offs_n < N)[None, :])  # fmt: skip


@triton.jit
def decode_attention_stage1(q, k_buffer, v_buffer, seq_lens, mid_o, mid_lse, sm_scale,
                            max_splits, heads, max_len, D: tl.constexpr, BLOCK_N: tl.constexpr,
                            NUM_KV_SPLITS: tl.constexpr):  # fmt: skip
    """SGLang's ``_fwd_kernel_stage1``: program (b, h, s) attends query ``q[b, h]`` to split
    s of its sequence's keys, writing the split's normalized output and log-sum-exp to
    slot s of ``mid_o``/``mid_lse`` (a buffer of ``max_splits`` slots)."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    split = tl.program_id(2)
    d = tl.arange(0, D)
    seq_len = tl.load(seq_lens + b)
    per_split = tl.cdiv(seq_len, NUM_KV_SPLITS)
    start = split * per_split
    end = tl.minimum(start + per_split, seq_len)
    qv = tl.load(q + (b * heads + h) * D + d)
    e_max = -float("inf")
    e_sum = 0.0
    acc = tl.zeros((D,), dtype=tl.float32)
    slot = (b * heads + h) * max_splits + split
    if end > start:
        for n0 in range(start, end, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            nmask = offs_n < end
            kv = (b * max_len + offs_n)[:, None] * heads * D + h * D + d[None, :]
            kt = tl.load(k_buffer + kv, mask=nmask[:, None], other=0.0)
            s = tl.sum(kt * qv[None, :], axis=1) * sm_scale
            s = tl.where(nmask, s, -float("inf"))
            n_max = tl.maximum(tl.max(s, axis=0), e_max)
            rescale = tl.exp(e_max - n_max)
            p = tl.exp(s - n_max)
            vt = tl.load(v_buffer + kv, mask=nmask[:, None], other=0.0)
            acc = acc * rescale + tl.sum(p[:, None] * vt, axis=0)
            e_sum = e_sum * rescale + tl.sum(p, axis=0)
            e_max = n_max
        tl.store(mid_o + slot * D + d, acc / e_sum)
        tl.store(mid_lse + slot, e_max + tl.log(e_sum))


@triton.jit
def decode_attention_stage2(mid_o, mid_lse, out, seq_lens, max_splits, heads,
                            D: tl.constexpr, NUM_KV_SPLITS: tl.constexpr):  # fmt: skip
    """SGLang's ``_fwd_kernel_stage2``: the splits of one (b, h) merged by their log-sum-exp."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, D)
    seq_len = tl.load(seq_lens + b)
    per_split = tl.cdiv(seq_len, NUM_KV_SPLITS)
    e_max = -float("inf")
    e_sum = 0.0
    acc = tl.zeros((D,), dtype=tl.float32)
    for split in range(0, NUM_KV_SPLITS):
        start = split * per_split
        end = tl.minimum(start + per_split, seq_len)
        if end > start:
            slot = (b * heads + h) * max_splits + split
            tv = tl.load(mid_o + slot * D + d)
            tlogic = tl.load(mid_lse + slot)
            n_max = tl.maximum(tlogic, e_max)
            old_scale = tl.exp(e_max - n_max)
            exp_logic = tl.exp(tlogic - n_max)
            acc = acc * old_scale + exp_logic * tv
            e_sum = e_sum * old_scale + exp_logic
            e_max = n_max
    tl.store(out + (b * heads + h) * D + d, acc / e_sum)


@triton.jit
def liger_cross_entropy(X, x_stride, Y, loss, n_cols, n_non_ignore, ignore_index,
                        BLOCK_SIZE: tl.constexpr):  # fmt: skip
    """Liger's ``liger_cross_entropy_kernel``: row ``r``'s loss (online softmax over blocks
    of the vocabulary), and its gradient for a mean over the rows not ignored, stored over
    the row's logits in place; an ignored row's gradient is zero and its loss not written."""
    row = tl.program_id(0)
    X += row * x_stride
    y = tl.load(Y + row)
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            offs = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X + offs, 0.0, mask=offs < n_cols)
        return
    m = -float("inf")
    d = 0.0
    x_y = tl.load(X + y)
    for i in range(0, n_cols, BLOCK_SIZE):
        offs = i + tl.arange(0, BLOCK_SIZE)
        block = tl.load(X + offs, mask=offs < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(block, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(block - m_new), axis=0)
        m = m_new
    for i in range(0, n_cols, BLOCK_SIZE):
        offs = i + tl.arange(0, BLOCK_SIZE)
        block = tl.load(X + offs, mask=offs < n_cols, other=-float("inf"))
        grad = tl.exp(block - m) / d
        grad = tl.where(offs == y, grad - 1.0, grad) / n_non_ignore
        tl.store(X + offs, grad, mask=offs < n_cols)
    tl.store(loss + row, m + tl.log(d) - x_y)


@triton.jit
def split_mean(x, partial, sem, out, count, max_splits, RSPLIT: tl.constexpr,
               BLOCK: tl.constexpr, MAXP2: tl.constexpr, RESET: tl.constexpr):  # fmt: skip
    """Inductor's cooperative reduction: program (row, s) sums split s of the row into slot
    s of ``partial`` and arrives at the row's semaphore; the last to arrive sums the slots
    into the row's mean and, with RESET, sets the semaphore back to zero (as Inductor's
    ``x_grid_barrier`` leaves its workspace)."""
    row = tl.program_id(0)
    split = tl.program_id(1)
    per = tl.cdiv(count, RSPLIT)
    start = split * per
    end = tl.minimum(start + per, count)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(start, end, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(x + row * count + offs, mask=offs < end, other=0.0)
    tl.store(partial + row * max_splits + split, tl.sum(acc, axis=0))
    arrived = tl.atomic_add(sem + row, 1)
    if arrived == RSPLIT - 1:
        slots = tl.arange(0, MAXP2)
        p = tl.load(partial + row * max_splits + slots, mask=slots < RSPLIT, other=0.0)
        tl.store(out + row, tl.sum(p, axis=0) / count)
        if RESET:
            tl.store(sem + row, 0)


def _even_k(args):
    """xformers' ``EVEN_K`` heuristic: every K a multiple of ``BLOCK_K * SPLIT_K``."""
    step = args["BLOCK_K"] * args["SPLIT_K"]
    return all(k % step == 0 for k in (args["K1"], args["K2"]))


#: xformers' kernel as it is declared there: ``EVEN_K`` computed by a heuristic.
tiled_matmul_even_k = triton.heuristics({"EVEN_K": _even_k})(tiled_matmul)
