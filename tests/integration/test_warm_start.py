"""A warm start: a new process whose record already holds the decision, on its first call.

Real processes, a real interpreted kernel, real record files. The warm process must decide
from the record and import only what that needs: no Redis client without a Redis URL, no
lock module (nothing is tuned), no progress line, no legacy-identity or rule lookup.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import json, sys

    import torch
    import triton
    import triton.language as tl

    before = set(sys.modules)
    import tunedsl


    @triton.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


    x = torch.arange(64, dtype=torch.float32)
    out = torch.empty_like(x)
    res = tunedsl.autotune_launch(
        scale,
        space={"BLOCK": [16, 32]},
        grid=lambda cfg: (triton.cdiv(64, cfg.BLOCK),),
        args=(x, out, 64),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
    )
    assert torch.equal(out, x * 2)
    new = sorted(m for m in set(sys.modules) - before if m.startswith("tunedsl"))
    print(json.dumps({"source": res.source, "modules": new}))
    """
)

# What a warm hit has no use for (each is imported where it is needed: tuning, a miss,
# a Redis URL, a space with a constraint).
NOT_ON_A_WARM_HIT = (
    "tunedsl.store.redis_store",
    "tunedsl.store.locks",
    "tunedsl.progress",
    "tunedsl.runtime.legacy_records",
    "tunedsl.runtime.ruled",
    "tunedsl.runtime.tuner",
)


def _run(script: Path, cache: Path) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", TUNEDSL_CACHE_DIR=str(cache))
    env.pop("TUNEDSL_REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_warm_hit_imports_only_what_deciding_from_the_record_needs(tmp_path: Path) -> None:
    script = tmp_path / "warm_site.py"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    cold = _run(script, cache)
    assert cold["source"] == "tuned"
    warm = _run(script, cache)
    assert warm["source"] == "disk"
    assert "tunedsl.runtime.decide" in warm["modules"]  # the lookup did run
    assert [m for m in NOT_ON_A_WARM_HIT if m in warm["modules"]] == []
