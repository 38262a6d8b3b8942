"""Code blocks of docs/*.md that a user copies run as they are (real kernels under the
interpreter, in a subprocess), given only the names the text around them defines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.needs_triton

KERNEL = """\
import torch
import triton
import triton.language as tl
from tunedsl.model.config import Config


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)


kernel = vadd
args = (torch.randn(1000), torch.randn(1000), torch.empty(1000), 1000)
configs = [Config(TILE=t, num_warps=w) for t in (256, 512) for w in (2, 4)]
"""


def test_the_compile_stream_example_of_precompile_md_compiles_every_configuration(
    tmp_path: Path,
) -> None:
    text = (REPO / "docs" / "precompile.md").read_text()
    block = next(
        b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "compile_stream(" in b
    )
    path = tmp_path / "stream.py"
    path.write_text(KERNEL + block.replace("...  # benchmark", "print('compiled', job.config)  #"))
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("compiled Config(") == 4, proc.stdout + proc.stderr[-3000:]
