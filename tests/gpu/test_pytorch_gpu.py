"""tunedsl inside PyTorch on a real CUDA GPU: crash-isolated workers, CUDA-graph
timing, sites under CUDA-graph capture, and ``tunedsl.torch_op`` under ``torch.compile``.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import tunedsl  # noqa: E402
from tunedsl import autotune_launch, cdiv  # noqa: E402
from tunedsl.backends import isolated  # noqa: E402
from tunedsl.errors import UsageError  # noqa: E402


@triton.jit
def double_or_die(x, y, n, TILE: tl.constexpr, MODE: tl.constexpr):
    """y = 2 x for MODE 0; MODE 1 writes far outside any allocation (an illegal address);
    MODE 2 runs a loop of about 4 * 10^12 steps (hours: a hang to the tuner). A `while` on a
    volatile load, the first version, failed to compile on Triton 3.6 (H100, 2026-11-23)."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    if MODE == 2:
        acc = tl.zeros([TILE], dtype=tl.float32)
        for _ in range(0, n.to(tl.int64) * 1000000000):  # bounded at run time only
            acc += tl.load(x + offs, mask=mask, volatile=True)
        tl.store(y + offs, acc, mask=mask)
    elif MODE == 1:
        far = offs.to(tl.int64) * 1000000007 + 1000000007 * 1000
        tl.store(y + far, tl.load(x + offs, mask=mask), mask=mask)
    else:
        tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def scale_inplace(x, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


def add(a, b, c, name, **options):  # type: ignore[no-untyped-def]
    n = a.numel()
    return autotune_launch(
        vadd,
        space={"tile": [256, 1024], "num_warps": [4]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name=name,
        **options,
    )


# -- isolated workers ------------------------------------------------------------------------


def test_faulting_and_hanging_configurations_fail_in_the_worker(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "30")
    isolated.shutdown_workers()
    n = 4096
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    result = autotune_launch(
        double_or_die,
        space={"mode": [0, 1, 2]},
        grid=(cdiv(n, 256),),
        args=(x, y, n),
        kwargs=lambda cfg: {"TILE": 256, "MODE": cfg.mode},
        isolate=True,
    )
    timings = {cfg.mode: r for cfg, r in result.timings.items()}
    print({m: (r.status, r.reason) for m, r in timings.items()})
    assert result.config.mode == 0 and timings[0].status == "ok"
    assert timings[1].status == "failed" and timings[1].reason
    assert timings[2].status == "failed" and "timeout" in (timings[2].reason or "")
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 2)
    z = torch.zeros_like(x)
    torch.add(x, x, out=z)  # this process's CUDA context is healthy
    torch.testing.assert_close(z, x * 2)
    isolated.shutdown_workers()


# -- CUDA-graph timing -----------------------------------------------------------------------


def test_graph_timing_forced_and_auto() -> None:
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    forced = add(a, b, c, "graph-forced", timing="graph")
    assert forced.record is not None and forced.record.context["timer"] == "cuda-graph"
    assert all(r.status == "ok" and r.median_ms > 0 for r in forced.timings.values())
    torch.testing.assert_close(c, a + b)
    auto = add(a, b, c, "graph-auto", timing="auto")  # a 4096-element add is microseconds
    assert auto.record is not None
    assert auto.record.context["timer"] == "cuda-graph"  # a short kernel: graphs throughout
    events = add(a, b, c, "graph-events", timing="events")
    assert events.record is not None and events.record.context["timer"] == "cuda-events"


def test_auto_timing_keeps_events_for_a_kernel_of_tens_of_microseconds() -> None:
    """Over 20 µs the probe keeps event timing (one cold-L2 launch, as ``do_bench``): a
    replay's back-to-back launches on a warm L2 would rank such kernels differently."""
    n = 1 << 24  # three 64 MiB vectors: tens of microseconds at the H100's bandwidth
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    auto = add(a, b, c, "events-auto", timing="auto")
    assert auto.record is not None
    assert min(r.median_ms for r in auto.timings.values()) > 0.02
    assert auto.record.context["timer"] == "cuda-events"
    torch.testing.assert_close(c, a + b)


def test_auto_timing_keeps_events_when_arguments_are_restored() -> None:
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    original = x.clone()
    result = autotune_launch(
        scale_inplace,
        space={"tile": [256, 1024]},
        grid=lambda cfg: (cdiv(4096, cfg.tile),),
        args=(x, 4096),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        restore_value=["x"],
        timing="auto",
    )
    assert result.record is not None and result.record.context["timer"] == "cuda-events"
    torch.testing.assert_close(x, original * 2)


def test_graph_timing_in_an_isolated_worker() -> None:
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    result = add(a, b, c, "graph-isolated", timing="graph", isolate=True)
    assert all(r.status == "ok" for r in result.timings.values())
    torch.testing.assert_close(c, a + b)
    isolated.shutdown_workers()


# -- sites under CUDA-graph capture ----------------------------------------------------------


def test_decided_key_is_captured_and_replays() -> None:
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    tuned = add(a, b, c, "capture-warm")  # warm-up: tunes outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        inside = add(a, b, c, "capture-warm")
    assert inside.config == tuned.config and inside.source == "memory"
    a.copy_(torch.randn_like(a))
    c.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)


def test_new_key_during_capture_raises_and_default_captures() -> None:
    a, b = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    c = torch.empty_like(a)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(UsageError, match="precompile --tune"):
        with torch.cuda.graph(graph):
            add(a, b, c, "capture-miss")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = add(a, b, c, "capture-default", capture="default")
    assert result.source == "default"
    c.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)


# -- torch.compile -----------------------------------------------------------------------------


@tunedsl.torch_op("tunedsl_gpu_test::add", fake=lambda a, b: torch.empty_like(a))
def add_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty_like(a)
    add(a, b, c, "torch-op-gpu")
    return c


def test_torch_op_fullgraph_inductor() -> None:
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: add_op(x, y).relu(), fullgraph=True)
    torch.testing.assert_close(f(a, b), (a + b).relu())


def test_torch_op_reduce_overhead_cudagraphs() -> None:
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: add_op(x, y) * 3, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # warm-up runs tune eagerly; later runs replay the recorded graph
        out = f(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, (a + b) * 3)


# -- captures after tuning ---------------------------------------------------------------------


def test_a_collection_inside_a_capture_after_graph_timed_tuning_breaks_nothing() -> None:
    """PyTorch no longer collects garbage before a capture (``force_cudagraph_gc``), so the
    collector may run inside one; a graph-timed tuning's graphs must be gone by then (a
    graph destroyed during a capture invalidates it: ``operation not permitted when stream
    is capturing``)."""
    import gc

    a, b = torch.randn(6000, device="cuda"), torch.randn(6000, device="cuda")
    c = torch.empty_like(a)
    assert add(a, b, c, "graph-timed", timing="graph").source == "tuned"
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gc.collect()  # as an allocation inside the capture may trigger
        inside = add(a, b, c, "graph-timed")
    assert inside.source == "memory"
    c.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
