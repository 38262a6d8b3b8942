"""The runtime on a real CUDA GPU: tuning end to end, event timing, L2 flush, direct launch.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    # Skip before importing triton: importing it here would fix Triton's interpreter
    # setting for the whole test process (see tests/conftest.py).
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from tunedsl import Config, autotune_launch, cdiv  # noqa: E402
from tunedsl.backends import triton as bt  # noqa: E402


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def vadd_even(a, b, c, n, TILE: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if EVEN:
        tl.store(c + offs, tl.load(a + offs) + tl.load(b + offs))
    else:
        mask = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def read_sum(x, out, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.atomic_add(out, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0))


def launch(a, b, c, name="gpu-vadd", **options):
    n = c.numel()
    return autotune_launch(
        vadd, space={"tile": [256, 1024], "num_warps": [2, 4]},
        grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile}, name=name, **options,
    )  # fmt: skip


def test_tuning_end_to_end_on_cuda() -> None:
    n = 1 << 20
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    first = launch(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert first.source == "tuned"
    assert first.record.context["timer"] == "cuda-events"
    assert first.record.device["type"] == "cuda" and first.record.device["capability"]
    ok = [r for r in first.timings.values() if r.status == "ok"]
    assert len(ok) == 4 and all(r.reps >= 5 and r.median_ms > 0 for r in ok)
    assert first.record.signature["a"] == "*fp32"
    c.zero_()
    second = launch(a, b, c)
    torch.cuda.synchronize()
    assert second.source == "memory" and second.config == first.config
    torch.testing.assert_close(c, a + b)


def test_direct_launch_matches_triton_for_every_specialization() -> None:
    # Aligned and unaligned pointers, n divisible by 16, ==1 and neither: each must use a
    # CompiledKernel made for its own specialization.
    base_a = torch.randn(5000, device="cuda")
    base_b = torch.randn(5000, device="cuda")
    for offset in (0, 1, 4):
        for n in (1, 16, 1000, 4096, 4099):
            a, b = base_a[offset : offset + n], base_b[offset : offset + n]
            c = torch.full((n,), float("nan"), device="cuda")
            for _ in range(3):  # tune/first launch, then direct launches
                launch(a, b, c, name="gpu-direct")
            torch.cuda.synchronize()
            torch.testing.assert_close(c, a + b, msg=f"offset={offset} n={n}")


def test_config_dependent_constexpr_that_changes_per_call() -> None:
    # EVEN depends on n and the tile: the direct launcher must notice it changed.
    base_a = torch.randn(4096, device="cuda")
    base_b = torch.randn(4096, device="cuda")
    for n in (4096, 4000, 4096, 3000):
        a, b = base_a[:n], base_b[:n]
        c = torch.zeros(n, device="cuda")
        autotune_launch(
            vadd_even, space={"tile": [256, 1024]}, grid=lambda cfg, n=n: (cdiv(n, cfg.tile),),
            args=(a, b, c, n), kwargs=lambda cfg, n=n: {"TILE": cfg.tile, "EVEN": n % cfg.tile == 0},
            name="gpu-even", key=0,
        )  # fmt: skip
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b, msg=f"n={n}")


def test_event_timer_measures_device_time() -> None:
    timer = bt.CudaEventTimer()
    small = torch.randn(1 << 12, device="cuda")
    big = torch.randn(1 << 26, device="cuda")
    t_small = sorted(timer.sample(lambda: small.mul_(1.0), lambda: None, 20))[10]
    t_big = sorted(timer.sample(lambda: big.mul_(1.0), lambda: None, 20))[10]
    assert 0 < t_small < t_big
    # 256 MiB read+write at under 4 TB/s takes well over 0.1 ms.
    assert t_big > 0.1


def test_l2_flush_makes_repetitions_cold() -> None:
    facts = bt.device_facts()
    timer = bt.CudaEventTimer()
    assert timer.flush_buffer.numel() >= 2 * facts["l2_bytes"]
    # A read-only working set that fits in L2: hot (no flush) must be faster than cold.
    n = max(1, facts["l2_bytes"] // 4 // 4)  # a quarter of L2, fp32
    x = torch.randn(n, device="cuda")
    out = torch.zeros(1, device="cuda")
    grid = (triton.cdiv(n, 1024),)

    def run():
        read_sum[grid](x, out, n, TILE=1024)

    run()
    torch.cuda.synchronize()
    cold = sorted(timer.sample(run, lambda: None, 50))[25]
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(50)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(50)]
    for s, e in zip(starts, ends, strict=True):
        s.record()
        run()
        e.record()
    torch.cuda.synchronize()
    hot = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))[25]
    assert cold > hot * 1.1, (cold, hot)


def test_occupancy_becomes_a_register_cap() -> None:
    facts = bt.device_facts()
    assert facts["regs_per_sm"] >= 32768
    n = 1 << 16
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    res = autotune_launch(
        vadd, space={"tile": [1024], "num_warps": [4], "occupancy": [2, 4]},
        grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile}, name="gpu-occupancy",
    )  # fmt: skip
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    expected = min(255, facts["regs_per_sm"] // (4 * 4 * 32) // 8 * 8)
    result = res.record.result_for(Config(tile=1024, num_warps=4, occupancy=4))
    assert result.options["maxnreg"] == expected


def test_restore_value_on_gpu() -> None:
    @triton.jit
    def double(x, n, TILE: tl.constexpr):
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.arange(10000, device="cuda", dtype=torch.float32)
    original = x.clone()
    n = x.numel()
    autotune_launch(
        double, space={"tile": [256, 1024]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, n), kwargs=lambda cfg: {"TILE": cfg.tile}, restore_value=["x"], name="gpu-double",
    )  # fmt: skip
    torch.cuda.synchronize()
    torch.testing.assert_close(x, original * 2)
