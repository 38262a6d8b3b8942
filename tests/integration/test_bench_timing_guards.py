"""``benchmarks/bench_timing_guards.py --plumbing`` (CPU interpreter): the A/B of the timing
guards still runs where tunedsl has none left to switch off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("off", ["all", "gate,switch,retakes,nice,warmup"])
def test_with_no_guard_left_it_says_so_and_tunes_nothing(tmp_path: Path, off: str) -> None:
    env = dict(os.environ, TRITON_INTERPRET="1", TUNEDSL_CACHE_DIR=str(tmp_path / "tunedsl"))
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_timing_guards.py"), "--plumbing",
         "--off", off, "--space", "tutorial03"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing to switch off" in proc.stdout, proc.stdout
    assert "tune s" not in proc.stdout  # no row was tuned, no table printed
