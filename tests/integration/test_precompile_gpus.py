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


HANGING = """
import os, pathlib, time

from tunedsl import workload


@workload
def hangs():
    (pathlib.Path(os.environ["SHARD_MARKERS"]) / f"started-{os.getpid()}").write_text("")
    time.sleep(3600)
"""

TUNE_ON_TWO = """
import sys
from tunedsl.precompile.run import tune_on_gpus
tune_on_gpus([sys.argv[1]], ["0", "1"])
"""


def test_the_claims_directory_of_a_killed_precompile_is_removed_by_the_next(
    tmp_path: Path,
) -> None:
    # SIGKILL runs no clean-up: the claims directory (tunedsl-claims-*) stays in the
    # temporary directory; the user's next multi-GPU tune removes it.
    import signal
    import subprocess
    import sys
    import time

    marks, scratch = tmp_path / "marks", tmp_path / "tmp"
    marks.mkdir()
    scratch.mkdir()
    script = tmp_path / "hangs.py"
    script.write_text(HANGING)
    env = {**os.environ, "SHARD_MARKERS": str(marks), "TUNEDSL_QUIET": "1",
           "TMPDIR": str(scratch)}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", TUNE_ON_TWO, str(script)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while len(list(marks.glob("started-*"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    children = [int(p.name.split("-")[1]) for p in marks.glob("started-*")]
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    try:
        deadline = time.monotonic() + 60  # the GPU processes notice and leave
        while any(Path(f"/proc/{c}").exists() for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for child in children:
            if Path(f"/proc/{child}").exists():
                os.kill(child, signal.SIGKILL)
    (left,) = scratch.glob("tunedsl-claims-*")
    (tmp_path / "quick.py").write_text(
        "from tunedsl import workload\n\n@workload\ndef quick():\n    pass\n"
    )
    again = subprocess.run(
        [sys.executable, "-c", TUNE_ON_TWO, str(tmp_path / "quick.py")], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert not left.exists(), "the killed tune's claims directory is still there"
    assert list(scratch.glob("tunedsl-claims-*")) == []


CHECKS_ITS_OUTPUT = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def scale_kernel(x, y, n, alpha, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m) * alpha, mask=m)


def scale(x, y, alpha):
    n = y.numel()
    return autotune(
        space=dict(tile=[64, 128]),
        blocks=cdiv(n, $tile),
        scale_kernel(x, y, n, alpha, TILE=$tile),
    )


@workload
def checked():
    x = torch.ones(100)
    y = torch.zeros(100)
    scale(x, y, 2.0)
    assert torch.equal(y, 2 * x)
"""


def test_a_workload_that_checks_a_key_another_gpu_tunes_is_told_why_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key is launched only in the process that tunes it: the other's check of the
    # output failed with a bare AssertionError, as if the kernel were wrong.
    script = tmp_path / "checks.py"
    script.write_text(CHECKS_ITS_OUTPUT)
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    summary = tune_on_gpus([str(script)], ["0", "1"])
    assert len([r for r in summary.reports if r.tuned]) == 1, summary.reports
    (error,) = summary.errors
    assert "workload checked failed: AssertionError" in error, error
    assert "a key another GPU's process tunes is not launched in this one" in error, error
