"""Mistakes that used to pass in silence or surface late: each is named at the user's line.

Real kernels under Triton's interpreter, run by ``tunedsl run`` in a subprocess, so the
traceback checked is the one a user sees.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rel_helpers import child_env

pytestmark = pytest.mark.needs_triton

HEADER = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv


@triton.jit
def copy_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


"""


def _run(tmp_path: Path, body: str, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run HEADER + body with ``tunedsl run``; also the line of the body's `# HERE` marker."""
    text = HEADER + textwrap.dedent(body).lstrip()
    script = tmp_path / "user_script.py"
    script.write_text(text)
    line = next((i for i, t in enumerate(text.splitlines(), 1) if "# HERE" in t), 0)
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script), *args],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )
    return proc, line


def test_a_tensor_key_is_an_error_at_the_users_line_suggesting_the_shape(tmp_path: Path) -> None:
    proc, line = _run(
        tmp_path,
        """
        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),
                            key=x,  # HERE
                            copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "UsageError" in proc.stderr
    assert "`key=` is a tensor (shape (40,))" in proc.stderr
    assert "key=x.shape" in proc.stderr
    assert f'user_script.py", line {line - 1}' in proc.stderr  # the macro's first line
    assert "tunedsl/runtime" not in proc.stderr, proc.stderr


def test_an_object_key_with_an_address_is_an_error(tmp_path: Path) -> None:
    proc, _ = _run(
        tmp_path,
        """
        class Shape:
            pass

        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),
                            key=(n, Shape()), copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "`key=[1]` is a Shape whose printed form is its address" in proc.stderr
