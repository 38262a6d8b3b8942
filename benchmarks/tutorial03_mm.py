"""Triton tutorial 03's matmul and its 16 configurations, for ``bench_cold_tune.py --space tutorial03``.

The configurations are the tutorial's ``get_cuda_autotune_config()`` list
(``python/tutorials/03-matrix-multiplication.py`` of triton-lang/triton), in its order,
renamed to this repository's axis names (BLOCK_SIZE_M -> BM, ..., GROUP_SIZE_M -> GROUP_M).
The kernel is the tutorial's algorithm: a 1-D grid in grouped order (GROUP_M rows of tiles
share the L2 cache), wrapped row and column offsets, a K loop masked at the end, a masked
store; fp16 in, fp32 accumulate, fp16 out. (The tutorial's ACTIVATION option is left out:
it is off in its benchmark.)
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def mm_grouped(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % width) % size_m)
    pid_n = (pid % width) // size_m
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * sam + rk[None, :] * sak
    pb = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        x = tl.load(pa, mask=rk[None, :] < K - k * BK, other=0.0)
        y = tl.load(pb, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(x, y, acc)
        pa += BK * sak
        pb += BK * sbk
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c + cm[:, None] * scm + cn[None, :] * scn, acc.to(tl.float16),
             mask=(cm[:, None] < M) & (cn[None, :] < N))  # fmt: skip


def _cfg(bm: int, bn: int, bk: int, stages: int, warps: int) -> dict[str, int]:
    return {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "num_warps": warps, "num_stages": stages}


# (BM, BN, BK, num_stages, num_warps), GROUP_M 8 throughout, in the tutorial's order.
TUTORIAL03_CONFIGS: list[dict[str, int]] = [
    _cfg(128, 256, 64, 3, 8),
    _cfg(64, 256, 32, 4, 4),
    _cfg(128, 128, 32, 4, 4),
    _cfg(128, 64, 32, 4, 4),
    _cfg(64, 128, 32, 4, 4),
    _cfg(128, 32, 32, 4, 4),
    _cfg(64, 32, 32, 5, 2),
    _cfg(32, 64, 32, 5, 2),
    # the tutorial's "good config for fp8 inputs"
    _cfg(128, 256, 128, 3, 8),
    _cfg(256, 128, 128, 3, 8),
    _cfg(256, 64, 128, 4, 4),
    _cfg(64, 256, 128, 4, 4),
    _cfg(128, 128, 128, 4, 4),
    _cfg(128, 64, 64, 4, 4),
    _cfg(64, 128, 64, 4, 4),
    _cfg(128, 32, 64, 4, 4),
]
