"""The example of docs/ARCHITECTURE.md."""
from __future__ import annotations

from tunedsl import autotune, cdiv


def add(a, b, c, n):
    autotune(space=dict(tile=[256, 512, 1024], num_warps=[2, 4, 8]),
             blocks=cdiv(n, $tile), key=n // 1024, num_stages=3, restore_value=["c"],
             verify=my_check,
             vadd(a, b, c, n, TILE=$tile))
