"""Multi-GPU tuning's pipeline on two GPUs: a configuration that makes an illegal
memory access inside a part fails alone, and the rest of its part, answered "retry" by the
poisoned worker, is opened again by a fresh one (``isolated_worker.py``'s ``open``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if torch.cuda.device_count() < 2:
    pytest.skip("needs two GPUs", allow_module_level=True)

CHILD = r"""
import json

import torch
import triton
import triton.language as tl

from tunedsl import cdiv
from tunedsl.backends import isolated, multi_device
from tunedsl.model.config import Config
from tunedsl.model.settings import Settings
from tunedsl.model.variant import Variant
from tunedsl.runtime.tuner import TuneRequest


@triton.jit
def double_or_fault(x, y, n, TILE: tl.constexpr, MODE: tl.constexpr):
    # y = 2 x for MODE 0; MODE 1 writes far outside any allocation (an illegal address).
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    if MODE == 1:
        far = offs.to(tl.int64) * 1000000007 + 1000000007 * 1000
        tl.store(y + far, tl.load(x + far))
    else:
        tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


n = 1 << 20
x = torch.randn(n, device="cuda")
y = torch.zeros_like(x)
good = [Config(tile=t, mode=0) for t in (64, 128, 256, 512, 1024)]
bad = Config(tile=128, mode=1)
configs = [*good[:2], bad, *good[2:]]
variants = [
    Variant(c, (x, y, n), {"TILE": c.tile, "MODE": c.mode}, (cdiv(n, c.tile),), {})
    for c in configs
]
req = TuneRequest(kernel=double_or_fault, variants=variants, settings=Settings(verify=False))
m = multi_device.MultiDeviceMeasurer(req, [0, 1], opening_reps=2, chunk=3)
try:
    m.wait_started()
    got = {p.config: p for p in m.prepare(configs)}
finally:
    m.close()
    isolated.shutdown_workers()
    multi_device.shutdown_workers()
print("RESULT " + json.dumps({
    "configs": sorted(str(c) for c in got),
    "bad": [got[bad].status, bool(got[bad].error)] if bad in got else None,
    "good": {str(c): got[c].status for c in good if c in got},
    "banked": {str(c): len(m.banked.get(c, ())) for c in good},
}), flush=True)
"""


def test_an_illegal_address_in_a_part_fails_alone_on_two_gpus(tmp_path: Path) -> None:
    # In a child process: the part the caller's GPU measures in process may be the one that
    # meets the illegal address, and that leaves the process's CUDA context unusable for
    # every test after this one.
    script = tmp_path / "pipeline_child.py"
    script.write_text(CHILD)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.returncode, proc.stderr[-3000:])
    got = json.loads(lines[-1][len("RESULT ") :])
    good = [f"Config(tile={t}, mode=0)" for t in (64, 128, 256, 512, 1024)]
    assert got["configs"] == sorted([*good, "Config(tile=128, mode=1)"]), got
    assert got["bad"] == ["failed", True], got
    assert got["good"] == dict.fromkeys(good, "ok"), got
    assert got["banked"] == dict.fromkeys(good, 2), got
