"""A macro's launch hint computed at the call (``num_warps=self.nw``, a module global that
changes between calls): each value is its own decision, as it is its own record."""

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
def fill(out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.full((BLOCK,), 1, tl.int32), mask=offs < n)
"""

SCRIPT = """\
import json
import torch
from tunedsl import autotune, cdiv
from hint_kernel import fill

STAGES = 2


class Filler:
    def __init__(self, nw):
        self.nw = nw

    def __call__(self, out):
        n = out.numel()
        return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK), num_warps=self.nw,
                        fill(out, n, BLOCK=$BLOCK))


def staged(out):
    n = out.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK), num_stages=STAGES,
                    fill(out, n, BLOCK=$BLOCK))


seen = []
for nw in (2, 4, 2, 4):  # one shape: one key of the site
    out = torch.zeros(100, dtype=torch.int32)
    res = Filler(nw)(out)
    assert int(out.sum()) == 100
    seen.append(["warps", nw, res.source, res.record.context["hints"]])
for STAGES in (2, 3, 3):
    res = staged(torch.zeros(100, dtype=torch.int32))
    seen.append(["stages", STAGES, res.source, res.record.context["hints"]])
print(json.dumps(seen))
"""


def _run(tmp_path: Path) -> list[list[object]]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(tmp_path)
    env["TUNEDSL_QUIET"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(tmp_path / "hints.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_computed_launch_hint_that_changes_between_calls_is_another_decision(
    tmp_path: Path,
) -> None:
    """``num_warps=self.nw`` of two objects calling one site with one key, and
    ``num_stages=STAGES`` of a global rebound between calls. The key's first call's hint was
    kept with its decision: the later calls giving another value launched with the first
    one (``source="memory"``, its record made with the other hint), silently. Each value is
    now its own decision, in this process as in the next, where each finds its own record."""
    (tmp_path / "hint_kernel.py").write_text(KERNEL, encoding="utf-8")
    (tmp_path / "hints.py").write_text(SCRIPT, encoding="utf-8")
    first = _run(tmp_path)
    assert first == [
        ["warps", 2, "tuned", {"num_warps": 2}],
        ["warps", 4, "tuned", {"num_warps": 4}],
        ["warps", 2, "memory", {"num_warps": 2}],
        ["warps", 4, "memory", {"num_warps": 4}],
        ["stages", 2, "tuned", {"num_stages": 2}],
        ["stages", 3, "tuned", {"num_stages": 3}],
        ["stages", 3, "memory", {"num_stages": 3}],
    ]
    second = _run(tmp_path)  # a new process: each value's own record decides it
    sources = ["disk", "disk", "memory", "memory", "disk", "disk", "memory"]
    assert [row[2] for row in second] == sources
    assert [row[3] for row in second] == [row[3] for row in first]
