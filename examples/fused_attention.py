"""Fused attention forward: causal and full, head dims 64 and 128, against PyTorch's SDPA.

The kernel follows the forward pass of Triton's tutorial 06 (fused attention, Flash
Attention 2's algorithm, ``python/tutorials/06-fused-attention.py``), written for this
gallery with on-device TMA descriptors.

Teaches:
- a 2-D grid, ``blocks=(cdiv(N, $block_m), batch * heads)``: one program per block of
  queries of one head, streaming that head's keys and values through shared memory;
- ``prune=``, which sees the call's arguments: a configuration whose blocks do not divide
  the sequence, whose tiles overflow shared memory at this head dim, or (causal) whose key
  block is wider than its query block, never runs. The arguments prune reads (the
  sequence length, the head dim, causal or not) join the key;
- ``Space(constraint=...)`` for what only depends on the configuration and the GPU (on an
  H100, eight warps only for the largest tile, as the tutorial keeps);
- warp specialization (full attention only), joining the space only where a probe shows
  that this Triton specializes the kernel on this GPU and the result is right.

    tunedsl run examples/fused_attention.py
"""

import functools
import math
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tunedsl import Space, autotune, cdiv, workload
from tunedsl.gallery.kit import PROBE_FLAG, Example, format_config

ex = Example("fused_attention")


ex.use_device_scratch()  # the global memory of descriptors made on the device


@triton.jit
def attend(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m, qk_scale, offs_m, offs_n, N_CTX,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BAND: tl.constexpr,
           WARP_SPECIALIZE: tl.constexpr):  # fmt: skip
    # BAND 0: every key (full attention); 1: the keys left of the diagonal block (no mask);
    # 2: the diagonal block itself, masked. Splitting causal attention this way keeps the
    # mask out of the long loop.
    if BAND == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif BAND == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([row0 + start_n, 0]).T
        qk = tl.dot(q, k)
        if BAND == 2:
            visible = offs_m[:, None] >= start_n + offs_n[None, :]
            qk = qk * qk_scale + tl.where(visible, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        # Online softmax in base 2 (qk_scale holds log2(e)): rescale what was summed so far
        # to the new running maximum, then add this block.
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([row0 + start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, batch_heads, N_CTX,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):  # fmt: skip
    # q, k, v and o are (batch * heads * N_CTX) x HEAD_DIM row-major: head h's rows start at
    # h * N_CTX, and N_CTX is a multiple of both blocks (prune=), so no tile crosses a head.
    start_m = tl.program_id(0)
    row0 = tl.program_id(1) * N_CTX
    rows = batch_heads * N_CTX
    q_desc = tl.make_tensor_descriptor(q_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1 / ln(2)
    q = q_desc.load([row0 + start_m * BLOCK_M, 0])
    if CAUSAL:
        acc, l_i, m_i = attend(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m, qk_scale,
                               offs_m, offs_n, N_CTX, BLOCK_M, BLOCK_N, 1, WARP_SPECIALIZE)  # fmt: skip
        acc, l_i, m_i = attend(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m, qk_scale,
                               offs_m, offs_n, N_CTX, BLOCK_M, BLOCK_N, 2, WARP_SPECIALIZE)  # fmt: skip
    else:
        acc, l_i, m_i = attend(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m, qk_scale,
                               offs_m, offs_n, N_CTX, BLOCK_M, BLOCK_N, 0, WARP_SPECIALIZE)  # fmt: skip
    acc = acc / l_i[:, None]
    o_desc.store([row0 + start_m * BLOCK_M, 0], acc.to(o_ptr.dtype.element_ty))


# -- the space ------------------------------------------------------------------------------


#: Shared memory Triton keeps besides the tiles (barriers; measured: under 2 KiB).
SMEM_SLACK = 2048



@functools.cache
def is_hopper() -> bool:
    return ex.cross_compiling or (ex.on_gpu and torch.cuda.get_device_capability()[0] == 9)


def keep(cfg) -> bool:
    """What depends on the configuration alone."""
    if cfg.warp_specialize and cfg.num_warps != 4:
        return False  # Triton 3.6-3.9 specialize one consumer warp group; else ignored
    # Tutorial 06 on an H100: eight warps pay off only for the 128 x 128 tile.
    return not (is_hopper() and cfg.block_m * cfg.block_n < 128 * 128 and cfg.num_warps == 8)


def attention_space(features: frozenset[str]) -> Space:
    return Space(
        block_m=[64, 128],
        block_n=[32, 64, 128],
        num_stages=[2, 3, 4],
        num_warps=[4, 8],
        warp_specialize=[False, True] if "warp_specialize" in features else [False],
        constraint=keep,
    )


CPU_SPACE = Space(block_m=[16, 32], block_n=[16], num_stages=[2], num_warps=[4],
                  warp_specialize=[False])  # fmt: skip


def fits_sequence(configs, args):
    """What depends on the call too: the blocks tile the sequence (a tile must not cross
    into the next head's rows); the key block is at most the head dim and, causal, at most
    the query block (the diagonal band is whole key blocks); the tiles fit in shared memory;
    no warp specialization for causal attention (Triton 3.6-3.9 fail to compile its two
    loops specialized)."""
    n, head_dim, causal = args["N_CTX"], args["HEAD_DIM"], args["CAUSAL"]
    return [c for c in configs if tiles_sequence(c, n, head_dim, causal) and fits_smem(c, head_dim)]


def tiles_sequence(c, n, head_dim, causal) -> bool:
    if n % c.block_m or n % c.block_n or c.block_n > head_dim:
        return False
    return not causal or (c.block_n <= c.block_m and not c.warp_specialize)


def fits_smem(c, head_dim) -> bool:
    # Q's tile, and num_stages buffers of a K and a V tile (one more each, and P's tile,
    # when specialized); 2-byte elements. Checked against Triton's count for sm_90.
    stages = c.num_stages + 1 if c.warp_specialize else c.num_stages
    tiles = c.block_m * head_dim + 2 * stages * c.block_n * head_dim
    if c.warp_specialize:
        tiles += c.block_m * c.block_n
    return 2 * tiles + SMEM_SLACK <= ex.shared_memory_limit()


@functools.cache
def gpu_features() -> frozenset[str]:
    """``{"warp_specialize"}`` when this Triton specializes the kernel on this GPU and the
    result is right (``probe`` below, run in a child process)."""
    return ex.probed_features(__file__, ("warp_specialize",))


def probe() -> None:
    q, k, v, o = random_problem(1, 2, 256, 128)
    expected = reference(q, k, v, causal=False)
    try:
        compiled = attention_kernel[(256 // 128, 2)](
            q, k, v, o, 1 / math.sqrt(128), 2, 256,
            HEAD_DIM=128, CAUSAL=False, BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=True,
            num_warps=4, num_stages=3,
        )  # fmt: skip
        if ex.on_gpu:
            torch.cuda.synchronize()
        torch.testing.assert_close(o, expected, **TOLERANCE)
        if "ttg.warp_specialize" not in compiled.asm["ttgir"]:
            raise RuntimeError("Triton compiled the loop without specializing it")
    except Exception as err:  # any failure leaves the feature out of the space
        reason = " ".join(str(err).split())[:160] or type(err).__name__
        print(f"feature warp_specialize no ({reason})", flush=True)
    else:
        print("feature warp_specialize yes", flush=True)


# -- the tuned call -------------------------------------------------------------------------


def attention(q, k, v, o, causal):
    """``o = softmax(q k^T / sqrt(d)) v`` per head, for contiguous (batch, heads, N, d)."""
    batch, heads, n, head_dim = q.shape
    for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
        if not t.is_contiguous() or t.shape != q.shape or head_dim % 8:
            raise ValueError(
                f"fused attention: {name} must be contiguous, of q's shape {tuple(q.shape)}, "
                f"with a head dim that is a multiple of 8; got {tuple(t.shape)}"
            )
    return autotune(
        space=attention_space(gpu_features()) if ex.on_gpu else CPU_SPACE,
        blocks=(cdiv(n, $block_m), batch * heads),
        prune=fits_sequence,
        attention_kernel(
            q, k, v, o, 1 / math.sqrt(head_dim), batch * heads, n,
            HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=$block_m, BLOCK_N=$block_n,
            WARP_SPECIALIZE=$warp_specialize,
        ),
    )  # fmt: skip


BATCH, HEADS, N_CTX = ex.pick(gpu=(4, 32, 4096), cpu=(1, 2, 64))
HEAD_DIMS = (64, 128)
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


def random_problem(batch, heads, n, head_dim):
    shape = (batch, heads, n, head_dim)
    q, k, v = (torch.randn(shape, device=ex.device, dtype=torch.float16) for _ in range(3))
    return q, k, v, ex.poison(torch.empty_like(q))


def reference(q, k, v, causal):
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal).half()


def attention_flops(q, causal):
    batch, heads, n, head_dim = q.shape
    return 4.0 * batch * heads * n * n * head_dim * (0.5 if causal else 1.0)


@workload
def warm():
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            attention(*random_problem(BATCH, HEADS, N_CTX, head_dim), causal)


def main():
    results = []
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            q, k, v, o = random_problem(BATCH, HEADS, N_CTX, head_dim)
            launch = attention(q, k, v, o, causal)
            what = f"d={head_dim} {'causal' if causal else 'full'}"
            ex.check(f"o ({what})", o, reference(q, k, v, causal), **TOLERANCE)
            results.append((what, launch, q, k, v, o, causal))

    # Every variant beside SDPA; the last (head dim 128, causal) is the gallery's report.
    for what, launch, q, k, v, o, causal in results[:-1]:
        ours = ex.bench(lambda: attention(q, k, v, o, causal))
        theirs = ex.bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        speed = ""
        if not ex.interpreted:
            flops = attention_flops(q, causal) / 1e9
            speed = f" ({flops / ours:.0f} vs {flops / theirs:.0f} TFLOP/s)"
        print(f"{what}: {format_config(launch.config)}: {ours:.3f} ms, SDPA {theirs:.3f} ms{speed}")

    what, launch, q, k, v, o, causal = results[-1]
    ex.report(
        launch,
        problem=f"B{BATCH} H{HEADS} N{N_CTX} float16, d=64/128 full/causal; this row: {what}",
        run=lambda: attention(q, k, v, o, causal),
        reference=lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        flops=attention_flops(q, causal),
    )


if __name__ == "__main__":
    if PROBE_FLAG in sys.argv:
        probe()
    else:
        main()
