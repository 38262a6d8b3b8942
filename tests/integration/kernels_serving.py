"""Kernels of a serving stack (none of them in the gallery) for test_serving_flow.py: a SiLU
and mul over separate gate and up tensors, called at a batch size that changes every
request, and its workload over batch sizes (`tunedsl sweep --shapes`)."""

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


@workload
def batch(b: int = 4):
    g, u = torch.randn(b, 64), torch.randn(b, 64)
    out, _ = silu_and_mul(g, u)
    torch.testing.assert_close(out, torch.nn.functional.silu(g) * u)
