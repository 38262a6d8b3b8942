"""The anchor's matmul and its 48-configuration space, shared by the benchmarks.

Copied from ``shared/anchors/triton_autotune_baseline.py`` (the ``triton.autotune`` figures
tunedsl is compared with), so every benchmark measures exactly the anchor's kernel and space.
"""

from __future__ import annotations

import itertools

import triton
import triton.language as tl


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


# The anchor's configurations, in its order: 2 x 3 x 2 x 2 x 2 = 48.
MM_SPACE: dict[str, list[int]] = {
    "BM": [64, 128],
    "BN": [64, 128, 256],
    "BK": [32, 64],
    "num_warps": [4, 8],
    "num_stages": [3, 4],
}


def all_configs(space: dict[str, list[int]] = MM_SPACE) -> list[dict[str, int]]:
    """Every configuration of ``space`` as a dict, in product order."""
    names = list(space)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*space.values())]
