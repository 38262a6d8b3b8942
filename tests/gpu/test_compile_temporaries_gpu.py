"""Triton's compile temporaries on a real GPU: the compiles a site's launch makes through
Triton's JIT (``TUNEDSL_SAFE=direct``) and a ``verify=`` check of a stored decision keep
their PTX files out of a ``TMPDIR`` other users can write (``backends/compile_temporaries.py``).

Each phase is a fresh process with its own Triton cache, so every kernel is compiled again
(by ``ptxas``); a thread of the process watches the shared ``TMPDIR`` for PTX files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import os, sys, threading, time
import torch
from shared_kernels import vadd
from tunedsl import autotune_launch, cdiv

shared = os.environ["TMPDIR"]
seen, stop = set(), threading.Event()


def watch():
    while not stop.is_set():
        seen.update(n for n in os.listdir(shared) if n.endswith(".ptx"))
        time.sleep(0.0005)


watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
n = 1 << 16
a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
c = torch.empty_like(a)
result = autotune_launch(
    vadd, space={"tile": [256, 1024], "num_warps": [2, 4]},
    grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
    kwargs=lambda cfg: {"TILE": cfg.tile}, name="temporaries-gpu",
    verify=lambda inputs: {"c": inputs["a"] + inputs["b"]},
)
torch.cuda.synchronize()
torch.testing.assert_close(c, a + b)
stop.set()
watcher.join()
print(result.source, len(seen))
"""


def _phase(tmp_path: Path, shared: Path, name: str) -> str:
    env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / f"triton-{name}"), TUNEDSL_SAFE="direct")
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_launch_and_verify_compiles_keep_their_ptx_out_of_a_shared_tmpdir(tmp_path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    # The tuning's compiles (compile_variant) were private already.
    assert _phase(tmp_path, shared, "tune") == "tuned 0"
    # A fresh process and Triton cache: the stored decision is checked by verify= (its
    # configuration compiled by the launch, through Triton's JIT) and launched through
    # the JIT (no direct launch): both compiled with their PTX files in TMPDIR itself.
    assert _phase(tmp_path, shared, "warm") == "disk 0"
    assert os.listdir(shared) == []
