"""``mode="cached"`` on a site whose ``verify=`` check changed since its key's record was
made: the error when the default it falls back to fails the check says what happened."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).resolve().parent

SCRIPT = """\
import sys
import torch
from tunedsl import autotune_launch
from ported_kernels_eighteenth import block_sum

torch.manual_seed(0)
x, out = torch.randn(4096) * 1000, torch.zeros(1)
wrong = x.double().sum().float().reshape(1) + 1.0  # a reference no block sums to
check = {"first": True, "reference": lambda a: {"out": wrong}}[sys.argv[1]]
res = autotune_launch(block_sum, space={"BLOCK": [16, 32, 64, 128]}, grid=(1,),
                      args=(x, out, x.numel()), kwargs=lambda c: {"BLOCK": c.BLOCK},
                      verify=check, rtol=0, atol=0, mode=sys.argv[2], name="summed")
print(res.source, res.config.BLOCK)
"""


def _run(tmp_path: Path, check: str, mode: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(HERE)
    env["TUNEDSL_QUIET"] = "1"
    return subprocess.run(
        [sys.executable, str(tmp_path / "summed.py"), check, mode],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_cached_after_the_check_changed_says_the_record_was_made_under_another(
    tmp_path: Path,
) -> None:
    """A key tuned under ``verify=True`` (each block against the first), then read with
    ``mode="cached"`` under a reference its record's choice fails: the default, checked in
    its place, fails too. The error called the default "the only configuration this call
    can launch", though the space holds four; it now says that ``cached`` never tunes, that
    the record was made under another check, and how to tune the key under this one. With no
    record it says the key has none; ``mode="off"`` keeps its message."""
    (tmp_path / "summed.py").write_text(SCRIPT, encoding="utf-8")
    tuned = _run(tmp_path, "first", "on")
    assert tuned.returncode == 0, tuned.stderr
    assert tuned.stdout.split() == ["tuned", "16"]
    cached = _run(tmp_path, "reference", "cached")
    assert cached.returncode == 1
    error = cached.stderr.strip().splitlines()[-2]  # the TuningError's line; its detail last
    assert "TuningError" in error and "BLOCK=16) fails verify=" in error
    assert "only configuration" not in error
    assert 'mode="cached" never tunes' in error
    assert "was made under another verify= check" in error
    assert "its rejections do not count under this one" in error
    assert 'a run with mode="on"' in error
    (tmp_path / "cache").rename(tmp_path / "cache-tuned")  # no record of the key now
    fresh = _run(tmp_path, "reference", "cached")
    assert fresh.returncode == 1
    assert "this key has no record" in fresh.stderr
    assert "only configuration" not in fresh.stderr
    off = _run(tmp_path, "reference", "off")
    assert off.returncode == 1
    assert "it is the only configuration this call can launch" in off.stderr
