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
    # The last is the digest a new session, starting from the last definitions, finds.
    fresh = CELLS.replace("return v * 2", "return v * 5").replace("(3)", "(7)")
    assert _session(tmp_path, fresh)[0][:2] == ["disk", rows[3][1]]


LIB = """\
import triton
import triton.language as tl  # noqa: F401


@triton.jit
def act(v):
    return v * 2
"""

KERN = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv

from . import lib


@triton.jit
def k(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out + i, lib.act(tl.load(x + i, mask=i < n)), mask=i < n)


def run(x):
    out = torch.empty_like(x)
    n = x.numel()
    return out, autotune(space=dict(tile=[32, 64]), blocks=cdiv(n, $tile), k(x, out, n, TILE=$tile))
"""

# Cells run one by one in one shell, the helper's file edited between two of them (as an
# editor saves it), then `%autoreload 2` reloads it just before the next cell runs.
AUTORELOAD = """\
import os, pathlib, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
lib = pathlib.Path("apkg/lib.py")
for cell in [
    "%load_ext tunedsl", "%load_ext autoreload", "%autoreload 2",
    "import torch\\nfrom apkg import kern\\nx = torch.randn(100)",
    "o, r = kern.run(x); print('RESULT', r.source, r.digest[:12], torch.allclose(o, 2 * x))",
    "EDIT",
    "o, r = kern.run(x); print('RESULT', r.source, r.digest[:12], torch.allclose(o, 3 * x))",
]:
    if cell == "EDIT":
        lib.write_text(lib.read_text().replace("v * 2", "v * 3"))
        os.utime(lib, (os.stat(lib).st_atime + 5, os.stat(lib).st_mtime + 5))
    elif not shell.run_cell(cell).success:
        sys.exit(1)
"""


def test_a_helper_autoreload_reloaded_is_another_kernel_in_the_cell_that_calls_it(
    tmp_path: Path,
) -> None:
    # `%autoreload 2` reloads the edited helper module just before the cell runs: the
    # kernel (in a module not reloaded) is the same object, and its first call after the
    # reload was served the decision of the kernel with the old helper.
    pytest.importorskip("IPython")
    (tmp_path / "apkg").mkdir()
    (tmp_path / "apkg" / "__init__.py").write_text("")
    (tmp_path / "apkg" / "lib.py").write_text(LIB)
    (tmp_path / "apkg" / "kern.py").write_text(KERN)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env.pop("TUNEDSL_AUTOTUNE", None)
    proc = subprocess.run(
        [sys.executable, "-c", AUTORELOAD],
        capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    rows = [line.split("RESULT ", 1)[1].split() for line in out.splitlines() if "RESULT " in line]
    assert [r[0] for r in rows] == ["tuned", "tuned"], out
    assert rows[0][1] != rows[1][1] and all(r[2] == "True" for r in rows), rows
