"""Kernels of a serving stack (none of them in the gallery) for test_serving_flow.py: a SiLU
and mul over separate gate and up tensors, called at a batch size that changes every
request, a batched matrix-vector product of decode keyed on (batch, rows), and their
workload over batch sizes (`tunedsl sweep --shapes`)."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def silu_gate(g, u, out, T, D, BT: tl.constexpr, BD: tl.constexpr):
    rt = tl.program_id(0) * BT + tl.arange(0, BT)
    rd = tl.program_id(1) * BD + tl.arange(0, BD)
    m = (rt[:, None] < T) & (rd[None, :] < D)
    off = rt[:, None] * D + rd[None, :]
    a = tl.load(g + off, mask=m, other=0.0).to(tl.float32)
    b = tl.load(u + off, mask=m, other=0.0).to(tl.float32)
    tl.store(out + off, a * tl.sigmoid(a) * b, mask=m)


def silu_and_mul(g: torch.Tensor, u: torch.Tensor):
    out = torch.empty_like(g)
    t, d = g.shape
    res = autotune_launch(
        silu_gate,
        space={"BT": [1, 4, 16], "BD": [32, 64]},
        grid=lambda c: (cdiv(t, c.BT), cdiv(d, c.BD)),
        args=(g, u, out, t, d),
        kwargs=lambda c: {"BT": c.BT, "BD": c.BD},
    )
    return out, res


@triton.jit
def bmv(W, x, y, B, N, K, BN: tl.constexpr, BK: tl.constexpr):
    b = tl.program_id(0)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        m = (rn[:, None] < N) & (rk[None, :] < K)
        w = tl.load(W + rn[:, None] * K + rk[None, :], mask=m, other=0.0)
        v = tl.load(x + b * K + rk, mask=rk < K, other=0.0)
        acc += tl.sum(w * v[None, :], axis=1)
    tl.store(y + b * N + rn, acc, mask=rn < N)


def decode_mv(W: torch.Tensor, x: torch.Tensor):
    b, k = x.shape
    n = W.shape[0]
    y = torch.empty(b, n)
    res = autotune_launch(
        bmv,
        space={"BN": [16, 64], "BK": [32, 64]},
        grid=lambda c: (b, cdiv(n, c.BN)),
        args=(W, x, y, b, n, k),
        kwargs=lambda c: {"BN": c.BN, "BK": c.BK},
        key=(b, n),  # a batch of 1 is a family of its own (an int below 2 of key=)
    )
    return y, res


@workload
def batch(b: int = 4):
    g, u = torch.randn(b, 64), torch.randn(b, 64)
    out, _ = silu_and_mul(g, u)
    torch.testing.assert_close(out, torch.nn.functional.silu(g) * u)
    w, x = torch.randn(96, 64), torch.randn(b, 64)
    y, _ = decode_mv(w, x)
    torch.testing.assert_close(y, x @ w.T, rtol=1e-4, atol=1e-4)
