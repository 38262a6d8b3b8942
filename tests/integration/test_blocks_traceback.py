"""An exception raised by the user's own ``blocks=`` expression shows the user's frames only,
ending at the ``blocks=`` line (real ``tunedsl run`` subprocesses, real kernels)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import runtime_kernels

import tunedsl

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import sys
sys.path.insert(0, {tests!r})
import torch
from runtime_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    return autotune(space={{"tile": [32, 64]}},
                    blocks={blocks},
                    vadd(a, b, c, n, TILE=$tile))


def main():
    a = torch.randn(64)
    add(a, a, torch.empty_like(a), 64)
    add(a, a, torch.empty_like(a), 0)  # a key already decided: blocks= runs on the hit path


main()
"""


def run(tmp_path: Path, blocks: str) -> subprocess.CompletedProcess[str]:
    tests = os.path.dirname(os.path.abspath(runtime_kernels.__file__))
    path = tmp_path / "grid_script.py"
    path.write_text(SCRIPT.format(tests=tests, blocks=blocks), encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("blocks", "error"),
    [
        ("cdiv(n, $tile) + undefined_name", "NameError: name 'undefined_name' is not defined"),
        ("n // ($tile - 32)", "ZeroDivisionError"),
        ("cdiv(n, $tile) + 64 // n", "ZeroDivisionError"),  # raises on the second call only
    ],
)
def test_an_error_in_blocks_ends_at_the_users_line(tmp_path: Path, blocks: str, error: str) -> None:
    proc = run(tmp_path, blocks)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    package = os.path.dirname(os.path.abspath(tunedsl.__file__))
    assert package not in err, err  # none of tunedsl's frames
    frames = [line.strip() for line in err.splitlines() if line.strip().startswith('File "')]
    assert frames[-1].endswith("in <lambda>") and "grid_script.py" in frames[-1], err
    assert f"blocks={blocks}," in err  # the line shown is the user's blocks= text
    assert error in err
