"""A ``blocks=`` grid past CUDA's limits (``2**31 - 1`` programs along x, ``65535`` along y
and z): a GPU's launch failed with a driver error naming nothing, and Triton's interpreter
ran it without a word. It is a ``UsageError`` naming the site's file and line, the
dimension, its value and the fix, under the interpreter as on a GPU: where a new key is
tuned, where a record decides it, and where a later call of a decided key (its ``key=``
bucket) computes a larger grid. Real DSL scripts, real Triton kernels under the
interpreter, real subprocesses (``model/grid_limits.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env

pytestmark = pytest.mark.needs_triton

KERNELS = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def rows(x, n, TILE: tl.constexpr):
    row = tl.program_id(1)
    if row < 2:  # two rows of data; the other programs of a tall grid do nothing
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
        tl.store(x + row * n + offs, tl.load(x + row * n + offs, mask=offs < n) + 1,
                 mask=offs < n)


def bump(x, n, m):
    return autotune(space=dict(tile=[16, 32]), key=0, effort="quick",
                    blocks=(cdiv(n, $tile), m), rows(x, n, TILE=$tile))
"""
SITE_LINE = 18  # the line of the autotune( call above

MAIN = """
import sys
import torch
from tunedsl.errors import UsageError
import grid_kernels

x = torch.zeros(2 * 32)
try:
    for m in map(int, sys.argv[1:]):
        grid_kernels.bump(x, 32, m)
        print("LAUNCHED", m, flush=True)
except UsageError as err:
    print("USAGE", err, flush=True)
    sys.exit(3)
"""


def _run(tmp_path: Path, *rows: int) -> subprocess.CompletedProcess[str]:
    (tmp_path / "grid_kernels.py").write_text(KERNELS.lstrip())
    (tmp_path / "grid_main.py").write_text(MAIN.lstrip())
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", "grid_main.py", *map(str, rows)],
        env=child_env(tmp_path / "cache", TUNEDSL_QUIET="1"), cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _said_the_limit(out: subprocess.CompletedProcess[str], rows: int) -> None:
    said = out.stdout + out.stderr
    assert out.returncode == 3, said
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("USAGE ")]
    assert f"grid_kernels.py:{SITE_LINE}:" in line, line  # the site's file and line
    assert f"y dimension, {rows}, is past what CUDA launches (at most 65535" in line, line
    assert "swap the grid's axes" in line and f"blocks=({rows}, " in line, line
    assert "or loop inside the kernel" in line, line


def test_a_grid_past_cudas_y_limit_is_named_where_the_key_is_tuned(tmp_path: Path) -> None:
    # The interpreter ran all 70000 rows of programs for every configuration, silently; a
    # GPU failed the launch with "invalid argument".
    _said_the_limit(_run(tmp_path, 70000), 70000)


def test_a_larger_grid_in_a_decided_keys_bucket_is_named_at_its_launch(tmp_path: Path) -> None:
    # A later call of the same key= bucket launched the decided configuration on the
    # larger grid: the interpreter ran it, a GPU failed with a driver error.
    out = _run(tmp_path, 4, 65536)
    assert "LAUNCHED 4" in out.stdout, out.stdout + out.stderr
    _said_the_limit(out, 65536)


def test_a_grid_past_the_limit_is_named_where_a_record_decides_the_key(tmp_path: Path) -> None:
    # A key decided by its record (no tuning, so no candidates bound) launched at once.
    first = _run(tmp_path, 4)
    assert first.returncode == 0 and "LAUNCHED 4" in first.stdout, first.stdout + first.stderr
    assert list((tmp_path / "cache").glob("records/*.json"))
    _said_the_limit(_run(tmp_path, 65536), 65536)
