"""Front end + runtime end to end: a DSL script with a real Triton kernel, expanded by
``compile_source`` and run under the interpreter (TRITON_INTERPRET=1)."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest
import torch

from tunedsl import LaunchResult
from tunedsl.frontend.compile import compile_source

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
from shared_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    return autotune(space=dict(tile=[32, 64], num_warps=[1, 2]),
                    blocks=cdiv(n, $tile), key=n // 1024,
                    vadd(a, b, c, n, TILE=$tile))


def add_broken_grid(a, b, c, n):
    return autotune(space=dict(tile=[32]),
                    blocks=n // ($tile - 32),
                    vadd(a, b, c, n, TILE=$tile))
"""


def load(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "vadd_script.py"
    path.write_text(SCRIPT, encoding="utf-8")
    code = compile_source(path.read_bytes(), str(path))
    namespace: dict[str, Any] = {"__name__": "vadd_script", "__file__": str(path)}
    exec(code, namespace)
    return namespace


def test_expanded_vadd_tunes_and_launches(tmp_path: Path) -> None:
    ns = load(tmp_path)
    a, b = torch.randn(200), torch.randn(200)
    c = torch.empty_like(a)
    result = ns["add"](a, b, c, a.numel())
    assert isinstance(result, LaunchResult)
    assert result.config["tile"] in (32, 64) and result.config["num_warps"] in (1, 2)
    torch.testing.assert_close(c, a + b)
    c.zero_()
    again = ns["add"](a, b, c, a.numel())
    assert again.config == result.config and again.source == "memory"
    torch.testing.assert_close(c, a + b)


def test_error_in_blocks_points_at_the_script_line(tmp_path: Path) -> None:
    ns = load(tmp_path)
    a = torch.randn(64)
    with pytest.raises(ZeroDivisionError) as info:
        ns["add_broken_grid"](a, a, torch.empty_like(a), a.numel())
    frames = traceback.extract_tb(info.value.__traceback__)
    user = [f for f in frames if f.filename.endswith("vadd_script.py")]
    assert user[-1].lineno == 13
    assert user[-1].line == "blocks=n // ($tile - 32),"  # linecache shows the original text
