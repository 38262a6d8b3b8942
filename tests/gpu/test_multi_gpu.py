"""Tuning on every GPU of a host: two GPUs tune the anchor's 48-configuration
matmul to the same choice as one GPU, the leaders raced on the caller's GPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if torch.cuda.device_count() < 2:
    pytest.skip("needs two GPUs", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_multi_gpu import mm_request, space_configs, tune_once  # noqa: E402

from tunedsl.backends import isolated, measurers, multi_device  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_workers():
    yield
    isolated.shutdown_workers()
    multi_device.shutdown_workers()


def test_two_gpus_choose_what_one_gpu_chooses() -> None:
    req = mm_request(4096, space_configs("anchor-48"), "cuda")
    one = tune_once(req, [0])
    two = tune_once(req, [0, 1])
    assert one["ok"] == two["ok"] == 48
    assert two["final_on_caller"]
    if two["chosen"] != one["chosen"]:
        # Two configurations within noise of each other may swap: then the two choices must
        # be as fast as each other on the caller's GPU.
        assert abs(two["chosen_ms"] - one["chosen_ms"]) <= 0.02 * one["chosen_ms"], (one, two)


def test_the_callers_gpu_in_this_process_and_a_worker_choose_what_one_gpu_chooses() -> None:
    req = mm_request(4096, space_configs("anchor-48"), "cuda")
    one = tune_once(req, [0])
    two = tune_once(req, [0, 1], local=True)  # GPU 0 measured here, GPU 1 by a worker
    assert one["ok"] == two["ok"] == 48
    assert two["final_on_caller"]
    assert two["workers"][0]["start_s"] == 0.0  # no worker started for the caller's GPU
    if two["chosen"] != one["chosen"]:
        assert abs(two["chosen_ms"] - one["chosen_ms"]) <= 0.02 * one["chosen_ms"], (one, two)


def test_the_default_uses_every_gpu_of_the_callers_model_when_they_pay(monkeypatch) -> None:
    from tunedsl.backends import device_plan

    monkeypatch.delenv("TUNEDSL_TUNE_DEVICES", raising=False)
    monkeypatch.setattr(device_plan, "_seen", {})
    req = mm_request(1024, space_configs("anchor-48"), "cuda")
    # Slow measuring (a second a configuration): the workers pay for their start.
    monkeypatch.setattr(device_plan, "DEFAULT_MEASURE_S", 1.0)
    m = measurers.maybe_multi_device(req)
    assert m is not None
    try:
        assert m.devices[0] == torch.cuda.current_device() and len(m.devices) >= 2
    finally:
        m.close()
    monkeypatch.setenv("TUNEDSL_TUNE_DEVICES", "1")
    assert measurers.maybe_multi_device(req) is None
    # A start that costs more than the space's measuring: the caller's GPU alone.
    monkeypatch.delenv("TUNEDSL_TUNE_DEVICES")
    multi_device.shutdown_workers()
    isolated.shutdown_workers()
    monkeypatch.setattr(device_plan, "_seen", {})
    monkeypatch.setattr(device_plan, "DEFAULT_MEASURE_S", 0.01)
    assert measurers.maybe_multi_device(req) is None


def test_a_key_an_earlier_process_died_launching_is_not_spread_over_the_gpus(
    monkeypatch, tmp_path: Path
) -> None:
    # Spread over the GPUs, the caller's share is launched in this process: after a death
    # in a launch of the key (its in-flight file, ``store/inflight.py``), the tuning
    # measures as on one GPU, in a worker where that configuration fails alone. The
    # in-flight file was never read there, and every run died in the same launch.
    import dataclasses
    import json

    from tunedsl.backends import device_plan
    from tunedsl.backends.measurers import WorkerSeam
    from tunedsl.backends.multi_device import MultiDeviceMeasurer

    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TUNEDSL_TUNE_DEVICES", raising=False)
    monkeypatch.setattr(device_plan, "_seen", {})
    monkeypatch.setattr(device_plan, "DEFAULT_MEASURE_S", 1.0)  # the GPUs pay: spread
    digest = "ab" * 32
    req = dataclasses.replace(
        mm_request(1024, space_configs("anchor-48"), "cuda"), key_digest=digest
    )
    spread = measurers.maybe_multi_device(req)
    assert spread is not None  # without a death, this tuning is spread over the GPUs
    spread.close()
    inflight = tmp_path / "cache" / "inflight"
    inflight.mkdir(mode=0o700, parents=True)
    os.chmod(tmp_path / "cache", 0o700)
    journal = inflight / f"{digest}.4194301.json"
    suspect = req.variants[0].config
    journal.write_text(json.dumps({"config": suspect.to_json(), "pid": 4194301, "time": 0.0}))
    by_config = {v.config: v for v in req.variants}
    with pytest.warns(RuntimeWarning, match="died while launching"):
        m = measurers.make_measurer(req, by_config.__getitem__, req.variants[0])
    try:
        assert isinstance(m, WorkerSeam)
        assert not isinstance(m.inner, MultiDeviceMeasurer)
    finally:
        m.close()
    assert not journal.exists()


def test_the_large_space_takes_a_second_gpu_only_where_its_host_compiles_faster_than_one_measures(
    monkeypatch,
) -> None:
    from tunedsl.backends import device_plan
    from tunedsl.backends.compile_pool import default_workers

    slots = default_workers()
    if 32 < slots < 64:
        pytest.skip("between the hosts measured (32 cores: one GPU; 64: two)")
    monkeypatch.setenv("TUNEDSL_TUNE_DEVICES", "2")
    monkeypatch.setattr(device_plan, "_seen", {})
    req = mm_request(1024, space_configs("large"), "cuda")
    assert len(req.variants) >= 1000
    m = measurers.maybe_multi_device(req)
    if slots <= 32:
        # 32 cores compile what one GPU measures (two measured fewer under a 20 s budget):
        # unbudgeted or budgeted, the caller's GPU alone.
        assert m is None
        for budget in (10.0, 20.0):
            assert measurers.maybe_multi_device(req, budget) is None, budget
    else:
        assert m is not None and len(m.devices) == 2
        m.close()
    # Under 7 s a cold worker would measure for 1 s: the caller's GPU alone, on any host.
    multi_device.shutdown_workers()
    isolated.shutdown_workers()
    monkeypatch.setattr(device_plan, "_seen", {})
    assert measurers.maybe_multi_device(req, 7.0) is None


@pytest.mark.parametrize("isolate", [False, True])
def test_tensors_on_another_gpu_than_the_current_one_get_an_error_naming_the_fix(
    isolate: bool,
) -> None:
    # Triton launches on the current device: GPU 1's tensors with GPU 0 current fail at
    # launch in every configuration (or, tuned in a worker, at the launch after tuning).
    # The miss says which argument is where and how to call it; under the right device the
    # same site tunes and launches there, and GPU 0's tensors still run on GPU 0.
    import triton
    import triton.language as tl

    from tunedsl import autotune_launch, cdiv
    from tunedsl.errors import UsageError

    @triton.jit
    def add_on_device(a, b, c, n, TILE: tl.constexpr):
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
        m = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

    n = 1 << 16

    def call(a, b, c):  # type: ignore[no-untyped-def]
        return autotune_launch(
            add_on_device, space={"tile": [256, 1024]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile},
            name=f"gpu-other-device-{isolate}", isolate=isolate,
        )  # fmt: skip

    on_1 = [torch.randn(n, device="cuda:1") for _ in range(2)] + [torch.zeros(n, device="cuda:1")]
    torch.cuda.set_device(0)
    with pytest.raises(UsageError) as caught:
        call(*on_1)
    message = str(caught.value)
    assert "'a'" in message and "cuda:1" in message and "cuda:0" in message, message
    assert "torch.cuda.device(1)" in message, message
    with torch.cuda.device(1):
        assert call(*on_1).source == "tuned"
        torch.cuda.synchronize()
    torch.testing.assert_close(on_1[2], on_1[0] + on_1[1])
    on_0 = [torch.randn(n, device="cuda:0") for _ in range(2)] + [torch.zeros(n, device="cuda:0")]
    call(*on_0)  # GPU 0's decision is the same model's: decided in memory, launched on GPU 0
    torch.cuda.synchronize()
    torch.testing.assert_close(on_0[2], on_0[0] + on_0[1])


@pytest.mark.parametrize("passed_in", ["descriptors", "a tuple"])
def test_a_launch_whose_tensors_are_all_inside_descriptors_or_a_tuple_tunes_on_their_gpu(
    passed_in: str,
) -> None:
    # The compile pool's threads start on GPU 0 and compile for the GPU of the arguments'
    # tensors; a launch passing its tensors only inside host-side TensorDescriptors (or a
    # tuple) showed none, so every configuration was compiled and loaded on GPU 0 while the
    # caller's GPU was 1, and the miss's device check let GPU 1's tensors through with GPU 0
    # current (the launch hit an illegal memory access).
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    from tunedsl import autotune_launch, cdiv
    from tunedsl.errors import UsageError

    @triton.jit
    def double_tiles_on(src_desc, dst_desc, M, TILES: tl.constexpr):
        rows: tl.constexpr = src_desc.block_shape[0]
        for t in range(TILES):
            row = (tl.program_id(0) * TILES + t) * rows
            if row < M:
                col = tl.program_id(1) * src_desc.block_shape[1]
                dst_desc.store([row, col], src_desc.load([row, col]) * 2)

    @triton.jit
    def double_pair_on(pair, n, TILES: tl.constexpr):
        offs = tl.program_id(0) * TILES * 128 + tl.arange(0, TILES * 128)
        m = offs < n
        tl.store(pair[1] + offs, tl.load(pair[0] + offs, mask=m) * 2, mask=m)

    M, N = 512, 64
    name = f"gpu-all-inside-{passed_in.replace(' ', '-')}"

    def call(x, y):  # type: ignore[no-untyped-def]
        if passed_in == "descriptors":
            src, dst = (TensorDescriptor.from_tensor(t, [16, 16]) for t in (x, y))
            return autotune_launch(
                double_tiles_on, space={"TILES": [1, 2, 4], "num_warps": [1, 2, 4]},
                grid=lambda cfg: (cdiv(M, 16 * cfg.TILES), cdiv(N, 16)),
                args=(src, dst, M), kwargs=lambda cfg: {"TILES": cfg.TILES}, name=name,
            )  # fmt: skip
        return autotune_launch(
            double_pair_on, space={"TILES": [1, 2, 4], "num_warps": [1, 2, 4]},
            grid=lambda cfg: (cdiv(M * N, 128 * cfg.TILES),),
            args=((x, y), M * N), kwargs=lambda cfg: {"TILES": cfg.TILES}, name=name,
        )  # fmt: skip

    x1, y1 = torch.randn(M, N, device="cuda:1"), torch.zeros(M, N, device="cuda:1")
    torch.cuda.set_device(0)
    with pytest.raises(UsageError, match=r"on cuda:1 but the current device is cuda:0"):
        call(x1, y1)
    with torch.cuda.device(1):
        result = call(x1, y1)
        torch.cuda.synchronize()
    assert result.source == "tuned"
    failed = {str(c): r.reason for c, r in result.timings.items() if r.status != "ok"}
    assert not failed, failed
    assert len(result.timings) == 9
    torch.testing.assert_close(y1, 2 * x1)
    # Compiled and loaded for GPU 1 alone: Triton's JIT keeps a table of compiled kernels
    # per device (3.6 to 3.9), and the compile pool filled GPU 0's with every configuration.
    kernel = double_tiles_on if passed_in == "descriptors" else double_pair_on
    on_gpu_0 = kernel.device_caches.get(0)
    assert not (on_gpu_0 and on_gpu_0[0]), f"compiled on GPU 0: {list(on_gpu_0[0])[:2]}"


def test_graph_timed_tunings_on_two_gpus_each_capture_on_their_own_gpu() -> None:
    # torch.cuda.graph's default capture stream is one per process, made on the device current
    # at the first capture, and a capture on it makes that device current. A graph-timed tuning
    # on GPU 1 that made it left every later capture on GPU 0 (a tuning's, the program's own)
    # running on GPU 1's stream with GPU 0's tensors: every configuration failed with
    # "Pointer argument (at 0) cannot be accessed from Triton".
    import triton
    import triton.language as tl

    from tunedsl import autotune_launch, cdiv

    @triton.jit
    def double_on(x, y, n, TILE: tl.constexpr):
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
        m = offs < n
        tl.store(y + offs, tl.load(x + offs, mask=m) * 2, mask=m)

    n = 1 << 12

    def call(x, y, name):  # type: ignore[no-untyped-def]
        return autotune_launch(
            double_on, space={"tile": [256, 1024]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, y, n), kwargs=lambda cfg: {"TILE": cfg.tile},
            name=name, timing="graph",
        )  # fmt: skip

    default_stream = torch.cuda.graph.default_capture_stream
    torch.cuda.set_device(0)
    with torch.cuda.device(1):
        x1, y1 = torch.randn(n, device="cuda:1"), torch.zeros(n, device="cuda:1")
        assert call(x1, y1, "graph-timed-gpu-1").source == "tuned"
        torch.cuda.synchronize()
    x0, y0 = torch.randn(n, device="cuda:0"), torch.zeros(n, device="cuda:0")
    result = call(x0, y0, "graph-timed-gpu-0")
    torch.cuda.synchronize()
    failed = {str(c): r.reason for c, r in result.timings.items() if r.status != "ok"}
    assert result.source == "tuned" and not failed, failed
    torch.testing.assert_close(y0, 2 * x0)
    torch.testing.assert_close(y1, 2 * x1)
    assert torch.cuda.current_device() == 0
    # PyTorch's own default capture stream is left to the program
    assert torch.cuda.graph.default_capture_stream is default_stream
