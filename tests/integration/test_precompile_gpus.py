"""``precompile --tune`` on several GPUs (``precompile/gpu_shards.py``): one real process
per "GPU" (under the interpreter: each told its GPU by CUDA_VISIBLE_DEVICES), the keys
shared by claiming, real records in one shared cache. ``precompile()`` refuses ``--tune``
without a GPU, so the test calls what it calls once it has checked the GPU:
``tune_on_gpus``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunedsl.precompile.gpu_shards import ClaimDir
from tunedsl.precompile.run import tune_on_gpus
from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

SIZES = [32 << i for i in range(8)]  # one key each (keys bucket sizes by powers of two)

SCRIPT = '''
"""Eight keys of one site, and a site whose every configuration fails to compile."""
import os, pathlib, time

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def scale_kernel(x, y, n, alpha, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m) * alpha, mask=m)


@triton.jit
def broken_kernel(x, n, TILE: tl.constexpr):
    tl.static_assert(TILE < 0, "this kernel never compiles")


def scale(x, y, alpha):
    n = y.numel()
    return autotune(
        space=dict(tile=[64, 128]),
        blocks=cdiv(n, $tile),
        scale_kernel(x, y, n, alpha, TILE=$tile),
    )


def broken(x):
    n = x.numel()
    return autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), broken_kernel(x, n, TILE=$tile))


@workload
def sizes():
    marks = pathlib.Path(os.environ["SHARD_MARKERS"])
    (marks / f"arrived-{os.getpid()}").write_text("")
    deadline = time.monotonic() + 240
    while len(list(marks.glob("arrived-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # both processes walk the keys together
    for n in SIZES:
        x = torch.ones(n)
        res = scale(x, torch.empty_like(x), 2.0)
        if res is not None:  # this process tuned (or found) the key
            with (marks / f"tuned-{n}").open("a") as f:
                f.write(os.environ.get("CUDA_VISIBLE_DEVICES", "") + "\\n")


@workload
def fails():
    broken(torch.ones(64))
'''


def test_each_gpu_tunes_the_keys_it_claims_first_and_every_key_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "shard_scale.py"
    script.write_text(SCRIPT.replace("SIZES", repr(SIZES), 1))
    monkeypatch.setenv("SHARD_MARKERS", str(marks))
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    summary = tune_on_gpus([str(script)], ["0", "1"])
    # Each key tuned by one process only, and both processes tuned some.
    tuned = {n: (marks / f"tuned-{n}").read_text().split() for n in SIZES}
    assert all(len(gpus) == 1 for gpus in tuned.values()), (tuned, summary.errors)
    assert not [e for e in summary.errors if "sizes" in e], summary.errors
    assert {g for gpus in tuned.values() for g in gpus} == {"0", "1"}, (tuned, summary.reports)
    scale_reports = [r for r in summary.reports if "scale" in str(r.site) and r.tuned]
    assert len(scale_reports) == len(SIZES)
    # One real record per key, written by the process that tuned it, in the shared cache.
    found = [records.read_record_file(p) for p in records.iter_record_files()]
    assert len([r for r in found if r.chosen is not None]) >= len(SIZES)
    # The key that failed is named, with the GPU it failed on.
    failed = [r for r in summary.reports if r.failed]
    assert len(failed) == 1 and "tune" in failed[0].failed
    assert failed[0].failed["tune"].startswith("on GPU ")
    assert failed[0].key is not None and "64" in str(failed[0].key), failed[0].key
    assert any("workload fails failed" in e and e.startswith("on GPU ") for e in summary.errors)


def test_a_claim_is_taken_once_and_kept_by_its_taker(tmp_path: Path) -> None:
    first, second = ClaimDir(str(tmp_path)), ClaimDir(str(tmp_path))
    assert first("site.py:f", {"n": 1}) and not second("site.py:f", {"n": 1})
    assert first("site.py:f", {"n": 1})  # the same process calls the key again
    assert second("site.py:f", {"n": 2}) and not first("site.py:f", {"n": 2})
    assert len(os.listdir(tmp_path)) == 2
