"""Multi-GPU tuning's pipeline on two GPUs: a configuration that makes an illegal
memory access inside a part fails alone, and the rest of its part, answered "retry" by the
poisoned worker, is opened again by a fresh one (``isolated_worker.py``'s ``open``)."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if torch.cuda.device_count() < 2:
    pytest.skip("needs two GPUs", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tunedsl import cdiv  # noqa: E402
from tunedsl.backends import isolated, multi_device  # noqa: E402
from tunedsl.model.config import Config  # noqa: E402
from tunedsl.model.settings import Settings  # noqa: E402
from tunedsl.model.variant import Variant  # noqa: E402
from tunedsl.runtime.tuner import TuneRequest  # noqa: E402


@triton.jit
def double_or_fault(x, y, n, TILE: tl.constexpr, MODE: tl.constexpr):
    """y = 2 x for MODE 0; MODE 1 writes far outside any allocation (an illegal address)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    if MODE == 1:
        far = offs.to(tl.int64) * 1000000007 + 1000000007 * 1000
        tl.store(y + far, tl.load(x + far))
    else:
        tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


@pytest.fixture(autouse=True)
def _fresh_workers():
    yield
    isolated.shutdown_workers()
    multi_device.shutdown_workers()


def test_an_illegal_address_in_a_part_fails_alone_on_two_gpus() -> None:
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
    assert set(got) == set(configs)
    assert got[bad].status == "failed" and got[bad].error, got[bad]
    assert {c: got[c].status for c in good} == {c: "ok" for c in good}
    assert all(len(m.banked[c]) == 2 for c in good)
