"""Precompile fixture: the 48-configuration fp16 matmul (slow to compile; for Ctrl-C tests)."""

import os
import sys

import torch
import triton
import triton.language as tl

from tunedsl import workload
from tunedsl.precompile.workload import PrecompileSite, precompile_device

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from standin_site import StandInSite


@triton.jit
def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))


SPACE = {
    "BM": [64, 128],
    "BN": [64, 128, 256],
    "BK": [32, 64],
    "num_warps": [4, 8],
    "num_stages": [3, 4],
}
_site = PrecompileSite(StandInSite(SPACE, label="mm_workload.py:matmul"))


def matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            c.stride(0), c.stride(1))  # fmt: skip
    return _site(
        mm,
        args,
        {},
        lambda cfg: ((), {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK}, (M // cfg.BM, N // cfg.BN)),
        None,
        None,
    )


@workload
def warm():
    dev = precompile_device()
    a = torch.empty(512, 512, dtype=torch.float16, device=dev)
    matmul(a, a, torch.empty_like(a))
