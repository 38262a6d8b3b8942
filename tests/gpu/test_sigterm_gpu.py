"""SIGTERM of ``tunedsl precompile --tune`` (a job scheduler's time limit, ``kill``): the
command stops as Ctrl-C stops it, with status 143 and one line, the keys tuned before it
kept and no process of it left. A real process and a real SIGTERM, on a real GPU.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tunedsl import knobs
from tunedsl.store import records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from rel_helpers import terminate_once  # the reliability tests' helpers

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if knobs.triton_interpret_env() or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

TWO_WORKLOADS = """
import os
import pathlib
import time

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@workload
def quick(n=4096):
    a, b = torch.ones(n, device="cuda"), torch.ones(n, device="cuda")
    c = torch.empty(n, device="cuda")
    autotune_launch(vadd, space={"tile": [256, 1024]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="vadd")


@workload
def slow():  # stands for hours of tuning still to come
    # On several GPUs the workloads run side by side: SIGTERM comes once quick's key is kept.
    records = pathlib.Path(os.environ["TUNEDSL_CACHE_DIR"], "records")
    deadline = time.monotonic() + 200
    while not any(records.glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    pathlib.Path(os.environ["SLOW_STARTED"]).write_text("")
    time.sleep(120)
"""


def test_sigterm_of_precompile_tune_stops_as_ctrl_c_does(tmp_path: Path) -> None:
    # SIGTERM ended `precompile --tune` at once (status -15), with nothing said, its
    # isolated workers left to notice by themselves.
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    (work / "two_workloads.py").write_text(TWO_WORKLOADS)
    ready = tmp_path / "slow-started"
    env = {**os.environ, "TUNEDSL_QUIET": "1", "TUNEDSL_CACHE_DIR": str(cache),
           "SLOW_STARTED": str(ready)}  # fmt: skip
    env.pop("TRITON_INTERPRET", None)
    argv = [sys.executable, "-m", "tunedsl", "precompile", "--tune", str(work)]
    status, said, left = terminate_once(argv, env, ready)
    assert status == 143, said
    assert "Traceback" not in said, said
    assert said.rstrip().splitlines()[-1] == "tunedsl: terminated (SIGTERM)", said
    kept = [records.read_record_file(p) for p in cache.glob("records/*.json")]
    assert len(kept) == 1, said  # the quick workload's key, tuned before SIGTERM
    assert left == [], f"a process of precompile outlived it: {left}"
