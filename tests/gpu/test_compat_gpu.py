"""On a GPU: an untested Triton version tunes, compiles and launches through Triton's
public JIT path (no direct launcher, no stored binaries, no async compile split)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys, warnings
import triton
real = triton.__version__
triton.__version__ = sys.argv[1]  # simulate another installed Triton
import torch
from shared_kernels import vadd
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import compat, triton_binaries, triton_launch as tl

n = 1 << 20
a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
c = torch.zeros_like(a)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        autotune_launch(
            vadd, space={"tile": [256, 1024], "num_warps": [2, 4]},
            grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.tile}, name="gate-gpu",
        )
torch.cuda.synchronize()
print(json.dumps({
    "correct": bool(torch.equal(c, a + b)),
    "direct": tl.direct_launch_enabled(),
    "stored": triton_binaries.stats["stored"],
    "warnings": sum(w.category is compat.UntestedTritonWarning for w in caught),
}))
"""


@pytest.mark.parametrize("version", ["3.10.0", "3.6.0"])
def test_an_untested_triton_runs_through_the_public_jit(tmp_path, version) -> None:
    script = tmp_path / "gate_gpu.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, str(script), version], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["correct"]
    if version == "3.10.0":
        assert result == {"correct": True, "direct": False, "stored": 0, "warnings": 1}
    else:
        assert result["direct"] and result["warnings"] == 0
