"""The line ``tunedsl sweep`` ends with, and its note on a workload that tuned nothing (a
real sweep process, a real Triton kernel under the interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

SCRIPT = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def add(n):
    a, b, c = torch.ones(n), torch.ones(n), torch.empty(n)
    autotune_launch(vadd, space={"tile": [16, 32]}, effort="quick",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})


@workload
def tuned(n=40):
    add(n)


@workload
def idle(n=40):
    if n > 1000:  # never, at the shapes swept
        add(n)
"""


def _sweep(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "summary_app.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "sweep", str(script), "--no-ray", *argv],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip


def test_a_workload_that_tuned_nothing_is_named_and_one_task_is_one_task(tmp_path: Path) -> None:
    # A workload that reached no site at the shapes swept: the sweep said "1 tasks, 0 records
    # written, 0 failed" with no word of which workload did nothing (precompile names it).
    done = _sweep(tmp_path, "--workload", "idle")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "sweep: 1 task, 0 records written, 0 failed"
    notes = [line for line in done.stderr.splitlines() if "idle" in line]
    assert len(notes) == 1, done.stderr
    assert notes[0].startswith(f"sweep: note: workload idle of {tmp_path / 'summary_app.py'} "), (
        notes
    )
    assert "reached no autotune(...) or autotune_launch site" in notes[0], notes
    # Beside one that tunes: only the one that tuned nothing is named.
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 40}, {"n": 48}]))
    both = _sweep(tmp_path, "--shapes", str(shapes))
    assert both.returncode == 0, both.stderr
    assert both.stdout.strip().splitlines()[-1] == "sweep: 4 tasks, 2 records written, 0 failed"
    notes = [line for line in both.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and "workload idle " in notes[0] and "2 tasks" in notes[0], both.stderr
