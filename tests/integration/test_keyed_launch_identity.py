"""The record key of an ``autotune_launch`` line is the same whichever call reaches it first:
a sweep (or `precompile --tune`) whose workloads pass ``key=`` writes the records that a run
passing ``key=`` uses, even where that run's first call of the line passed no key (real
`tunedsl sweep` and `tunedsl run` in subprocesses, real kernels under the interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

SCRIPT = """
import json
import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def add(n, bucket):
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    res = autotune_launch(
        vadd, space={"tile": [32, 64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="bucketed",
        key=(n // 256) if bucket else None,
    )
    assert torch.equal(c, a + b)
    return res


@workload
def keyed(n=300):
    add(n, bucket=True)


if __name__ == "__main__":
    calls = json.loads(sys.argv[1])
    print(json.dumps([[add(n, bucket).source, add(n, bucket).key] for n, bucket in calls]))
"""


def _tunedsl(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(tmp_path),
        check=False,
    )


def test_a_run_whose_first_call_has_no_key_uses_the_records_swept_with_key(
    tmp_path: Path,
) -> None:
    script = tmp_path / "bucketed.py"
    script.write_text(SCRIPT)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 300}, {"n": 1000}]))
    swept = _tunedsl(tmp_path, "sweep", str(script), "--no-ray", "--shapes", str(shapes))
    assert swept.returncode == 0 and "2 records written" in swept.stdout, swept.stderr
    # An unkeyed call first (its own record, tuned), then keyed calls of the swept buckets:
    # each is the swept record (the key given), not a new record keyed by shapes.
    ran = _tunedsl(
        tmp_path, "run", str(script), json.dumps([[64, False], [310, True], [1010, True]])
    )
    assert ran.returncode == 0, ran.stderr
    (first, _), (source_1, key_1), (source_3, key_3) = json.loads(ran.stdout.splitlines()[-1])
    assert first == "tuned"
    assert (source_1, key_1["user_key"]) == ("disk", 1)
    assert (source_3, key_3["user_key"]) == ("disk", 3)


SET_KEY = """
import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


n = 100
a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
res = autotune_launch(
    vadd, space={"tile": [32, 64]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
    kwargs=lambda cfg: {"TILE": cfg.tile}, name="set-keyed",
    key=frozenset({"alpha", "beta", "gamma", "delta", "epsilon"}),
)
print(res.source)
"""


def test_a_key_holding_a_set_names_one_record_in_every_process(tmp_path: Path) -> None:
    # A set's order follows the process's hash seed (PYTHONHASHSEED, random by default):
    # its repr named another record in each process, so every run tuned again.
    script = tmp_path / "set_keyed.py"
    script.write_text(SET_KEY)
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    sources = []
    for seed in ("1", "2", "3"):
        done = subprocess.run(
            [sys.executable, str(script)], env={**env, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        sources.append(done.stdout.split()[-1])
    assert sources == ["tuned", "disk", "disk"]
