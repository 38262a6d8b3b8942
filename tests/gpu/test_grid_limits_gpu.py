"""A ``blocks=`` grid past CUDA's limits on a real GPU: a later call of a decided key's
``key=`` bucket whose grid has 65536 programs along y failed at launch with the driver's
"invalid argument", naming neither the site nor the dimension. It is a ``UsageError``
naming the site's file and line, the dimension, its value and the fix
(``model/grid_limits.py``; the CPU tests, tests/reliability/test_grid_limits.py, cover the
interpreter and the other places a grid is checked).

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunedsl import knobs

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if knobs.triton_interpret_env() or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

KERNELS = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def rows(x, n, TILE: tl.constexpr):
    row = tl.program_id(1)
    if row < 2:
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
        tl.store(x + row * n + offs, tl.load(x + row * n + offs, mask=offs < n) + 1,
                 mask=offs < n)


def bump(x, n, m):
    return autotune(space=dict(tile=[16, 32]), key=0, effort="quick",
                    blocks=(cdiv(n, $tile), m), rows(x, n, TILE=$tile))
"""

MAIN = """
import sys
import torch
from tunedsl.errors import UsageError
import grid_kernels

x = torch.zeros(2 * 32, device="cuda")
try:
    for m in map(int, sys.argv[1:]):
        grid_kernels.bump(x, 32, m)
        torch.cuda.synchronize()
        print("LAUNCHED", m, flush=True)
except UsageError as err:
    print("USAGE", err, flush=True)
    sys.exit(3)
"""


def test_a_larger_grid_in_a_decided_keys_bucket_is_named_on_a_gpu(tmp_path: Path) -> None:
    (tmp_path / "grid_kernels.py").write_text(KERNELS.lstrip())
    (tmp_path / "grid_main.py").write_text(MAIN.lstrip())
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TUNEDSL_QUIET": "1"}
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", "grid_main.py", "4", "4", "65536"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    said = out.stdout + out.stderr
    assert out.returncode == 3, said
    assert "LAUNCHED 4" in out.stdout, said  # the key decided, then launched directly
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("USAGE ")]
    assert "grid_kernels.py:18:" in line, line
    assert "y dimension, 65536, is past what CUDA launches" in line, line
    assert "swap the grid's axes" in line and "blocks=(65536, " in line, line
