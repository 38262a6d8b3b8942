"""Rules fixture: row sums over a batch of R rows. One row a step (BR=1) or two (BR=2, after
a setup step) cost about R steps; 16 rows a step after a fixed setup (BR=16), which ``RULE_GROWN=1`` adds to
the space (a space grown after the sweep), costs about 10 + R/16 and wins from R=16."""

import os

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, workload

ROWS = [1, 2, 16] if os.environ.get("RULE_GROWN") == "1" else [1, 2]
SETUP = {1: 0, 2: 1, 16: 12}  # (never one value over the space: then it would join the key)


@triton.jit
def rowsum_kernel(x, out, R, C, BR: tl.constexpr, SETUP: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    rows = tl.arange(0, BR)
    dummy = tl.zeros((BR,), dtype=tl.float32)
    for _ in range(SETUP):  # a fixed setup cost, one block's work a step
        w = tl.load(x + rows[:, None] * 0 + cols[None, :], mask=cols[None, :] < C, other=0.0)
        dummy += tl.sum(w, axis=1)
        tl.store(out + rows, dummy, mask=rows < 0)
    for r0 in range(0, R, BR):
        r = r0 + rows
        m = (r[:, None] < R) & (cols[None, :] < C)
        v = tl.load(x + r[:, None] * C + cols[None, :], mask=m, other=0.0)
        tl.store(out + r, tl.sum(v, axis=1), mask=r < R)


def rowsum(x):
    R, C = x.shape
    out = torch.empty(R, dtype=x.dtype)
    autotune_launch(
        rowsum_kernel,
        space={"rows": ROWS},
        grid=lambda cfg: (1,),
        args=(x, out, R, C),
        kwargs=lambda cfg: {"BR": cfg.rows, "SETUP": SETUP[cfg.rows], "BLOCK": 64},
        name="rule-rowsum",
    )
    assert torch.allclose(out, x.sum(1), atol=1e-4)


@workload
def sizes(r=8):
    rowsum(torch.randn(r, 64))
