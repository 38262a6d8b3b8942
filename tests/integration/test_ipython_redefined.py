"""A notebook cell that redefines what a kernel reads (a ``@triton.jit`` helper it calls, a
``tl.constexpr`` global) without running the kernel's cell again: the next cell's call is
another kernel's, never served the old one's decision (real IPython in a subprocess,
kernels under Triton's interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

CELLS = """\
%load_ext tunedsl
import torch, triton, triton.language as tl
from tunedsl import autotune, cdiv
SCALE = tl.constexpr(3)
@triton.jit
def act(v):
    return v * 2

@triton.jit
def k(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(out + i, act(tl.load(x + i, mask=m)) * SCALE, mask=m)

def run(x, want):
    out = torch.empty_like(x); n = x.numel()
    r = autotune(space=dict(tile=[32, 64]), blocks=cdiv(n, $tile), k(x, out, n, TILE=$tile)); print("RESULT", r.source, r.digest[:12], torch.allclose(out, x * want))

x = torch.randn(100)
run(x, 6)
run(x, 6)
@triton.jit
def act(v):
    return v * 5

run(x, 15)
SCALE = tl.constexpr(7)
run(x, 35)
"""


def _session(tmp_path: Path, cells: str) -> list[list[str]]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env.pop("TUNEDSL_AUTOTUNE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "IPython", "--simple-prompt", "--colors=nocolor"],
        input=cells, capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    rows = [line.split("RESULT ", 1)[1].split() for line in out.splitlines() if "RESULT " in line]
    assert rows, out
    return rows


def test_a_redefined_helper_or_global_is_another_kernel_in_the_next_cell(
    tmp_path: Path,
) -> None:
    # The kernel's identity (its records' digest) was worked out once per kernel object,
    # and the site kept its decisions by the kernel object: a cell redefining `act` or
    # `SCALE` left both as they were, so the next call was served from memory the decision
    # (and digest) of the kernel as it was before.
    pytest.importorskip("IPython")
    rows = _session(tmp_path, CELLS)
    assert [r[0] for r in rows] == ["tuned", "memory", "tuned", "tuned"], rows
    assert all(r[2] == "True" for r in rows), rows
    assert len({r[1] for r in rows}) == 3, rows
    # Each is the digest a new session, starting from those definitions, finds.
    fresh = CELLS.replace("return v * 2", "return v * 5").replace("(3)", "(7)")
    assert _session(tmp_path, fresh)[0] == ["disk", rows[3][1], "False"]
