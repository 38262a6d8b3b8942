"""Triton kernels written the way users write them, outside the gallery: split-K matmul
with atomics, a grouped GEMM over pointer arrays, a batched matmul on a 3D grid, an
optimizer step that updates parameters in place, a heuristics-wrapped kernel. The DSL
sites that launch them are in test_more_kernels.py."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def splitk_matmul(
    a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr,
):  # fmt: skip
    # Each program of grid axis 1 sums every SPLIT-th K tile and adds it into c.
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(tl.program_id(1) * BK, K, BK * SPLIT):
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
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.atomic_add(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=mask)


@triton.jit
def sum_and_squares(x, total, squares, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.atomic_add(total, tl.sum(v, 0))
    tl.atomic_add(squares, tl.sum(v * v, 0))


@triton.jit
def grouped_matmul(
    a_ptrs, b_ptrs, c_ptrs, sizes, lds, G,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    # Problem g: (M, N, K) = sizes[3g:3g+3], row strides lds[3g:3g+3], operands at the
    # addresses a_ptrs[g], b_ptrs[g], c_ptrs[g]; programs take the tiles of each in turn.
    tile = tl.program_id(0)
    first = 0
    for g in range(G):
        M = tl.load(sizes + g * 3)
        N = tl.load(sizes + g * 3 + 1)
        K = tl.load(sizes + g * 3 + 2)
        nn = tl.cdiv(N, BN)
        tiles = tl.cdiv(M, BM) * nn
        if tile >= first and tile < first + tiles:
            t = tile - first
            a = tl.load(a_ptrs + g).to(tl.pointer_type(tl.float32))
            b = tl.load(b_ptrs + g).to(tl.pointer_type(tl.float32))
            c = tl.load(c_ptrs + g).to(tl.pointer_type(tl.float32))
            lda = tl.load(lds + g * 3)
            ldb = tl.load(lds + g * 3 + 1)
            ldc = tl.load(lds + g * 3 + 2)
            rm = (t // nn) * BM + tl.arange(0, BM)
            rn = (t % nn) * BN + tl.arange(0, BN)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k0 in range(0, K, BK):
                rk = k0 + tl.arange(0, BK)
                x = tl.load(
                    a + rm[:, None] * lda + rk[None, :],
                    mask=(rm[:, None] < M) & (rk[None, :] < K),
                    other=0.0,
                )
                y = tl.load(
                    b + rk[:, None] * ldb + rn[None, :],
                    mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0.0,
                )
                acc += tl.dot(x, y)
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            tl.store(c + rm[:, None] * ldc + rn[None, :], acc, mask=mask)
        first += tiles


@triton.jit
def batched_matmul(
    a, b, c, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    batch = tl.program_id(2)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(
            a + batch * sab + rm[:, None] * sam + rk[None, :] * sak,
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        y = tl.load(
            b + batch * sbb + rk[:, None] * sbk + rn[None, :] * sbn,
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, y)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c + batch * scb + rm[:, None] * scm + rn[None, :] * scn, acc, mask=mask)


@triton.jit
def sgd_step(param, grad, n, lr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    p = tl.load(param + offs, mask=m)
    tl.store(param + offs, p - lr * tl.load(grad + offs, mask=m), mask=m)


@triton.heuristics({"BLOCK": lambda args: 32})
@triton.jit
def double_fixed_block(x, out, n, BLOCK: tl.constexpr):
    # The heuristic decides BLOCK: a launch passing BLOCK= has its value replaced.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * 2, mask=m)


@triton.jit
def scale(x, out, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * factor, mask=m)


@triton.jit
def double_tiles(src_desc, dst_desc, M, TILES: tl.constexpr):
    # Host-side tensor descriptors: each program doubles TILES row tiles of the block.
    rows: tl.constexpr = src_desc.block_shape[0]
    for t in range(TILES):
        row = (tl.program_id(0) * TILES + t) * rows
        if row < M:
            dst_desc.store(
                [row, tl.program_id(1) * src_desc.block_shape[1]],
                src_desc.load([row, tl.program_id(1) * src_desc.block_shape[1]]) * 2,
            )


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def double_even(x, out, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out + offs, tl.load(x + offs) * 2)
    else:
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def add_one_tiles(desc, M, TILES: tl.constexpr):
    # In place through a descriptor: each tile is loaded and stored back plus one.
    rows: tl.constexpr = desc.block_shape[0]
    for t in range(TILES):
        row = (tl.program_id(0) * TILES + t) * rows
        if row < M:
            desc.store([row, 0], desc.load([row, 0]) + 1)
