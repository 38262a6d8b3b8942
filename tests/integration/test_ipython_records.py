"""Records of sites defined in IPython cells: a cell run again, or in a new session, is the
same site (real IPython in a subprocess, kernels under Triton's interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def scale(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)
"""

RUN = (
    "r = autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), "
    'scale(x, out, n, TILE=$tile)); print("SOURCE", r.source, torch.equal(out, x * 2))\n'
)
CELLS = (
    "%load_ext tunedsl\n"
    "import torch\n"
    "from tunedsl import autotune, cdiv\n"
    "from kernel import scale\n"
    "x, n = torch.randn(300), 300; out = torch.zeros(300)\n" + RUN * 3
)


def _session(tmp_path: Path) -> list[str]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env.pop("TUNEDSL_AUTOTUNE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "IPython", "--simple-prompt", "--colors=nocolor"],
        input=CELLS, capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    return [line.split("SOURCE ", 1)[1] for line in out.splitlines() if "SOURCE " in line]


def test_a_cell_run_again_or_in_a_new_session_uses_its_record(tmp_path: Path) -> None:
    # The cell's name holds the number of the run (`<ipython-input-6-...>`, `-7-` when it
    # runs again), and it named the site: every run of the same cell was a new site that
    # tuned again and wrote one more record.
    pytest.importorskip("IPython")
    (tmp_path / "kernel.py").write_text(KERNEL)
    assert _session(tmp_path) == ["tuned True", "disk True", "disk True"]
    assert _session(tmp_path) == ["disk True"] * 3
    records = list((tmp_path / "cache" / "records").glob("*.json"))
    assert len(records) == 1, records
    assert json.loads(records[0].read_text())["site"].startswith("<ipython-input-")
