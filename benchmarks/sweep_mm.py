"""The sweep of ``bench_multi_gpu.py``'s ``sweep-16`` rows: one matmul workload, tuned per
shape by ``tunedsl sweep`` (shapes: ``{"n": ...}``, multiples of 256; the anchor's 48
configurations a key, so that measuring, not starting processes, is most of a key's work).

    tunedsl sweep benchmarks/sweep_mm.py --shapes shapes.json --no-ray --gpus 2
"""

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@workload
def matmul(n=1024):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    autotune_launch(
        mm,
        space={
            "BM": [64, 128],
            "BN": [64, 128, 256],
            "BK": [32, 64],
            "num_warps": [4, 8],
            "num_stages": [3, 4],
        },
        grid=lambda cfg: (cdiv(n, cfg.BM), cdiv(n, cfg.BN)),
        args=(a, b, c, n, n, n),
        kwargs=lambda cfg: {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK},
        name="sweep-mm",
    )
