"""The runtime on a real CUDA GPU: tuning end to end, event timing, L2 flush, direct launch.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import os

import pytest

from tunedsl import knobs

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if knobs.triton_interpret_env() or not torch.cuda.is_available():
    # Skip before importing triton: importing it here would fix Triton's interpreter
    # setting for the whole test process (see tests/conftest.py).
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from shared_kernels import vadd, vadd_even  # noqa: E402

from tunedsl import Config, autotune_launch, cdiv  # noqa: E402
from tunedsl.backends import timers, torch_compile  # noqa: E402
from tunedsl.backends import triton as bt  # noqa: E402


@triton.jit
def read_sum(x, partial, n, TILE: tl.constexpr):
    # One partial sum per block (no atomics: contention on one address would dominate).
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(partial + tl.program_id(0), tl.sum(tl.load(x + offs, mask=offs < n, other=0.0)))


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
    # timing="auto": a kernel this short is graph-timed throughout (events for longer ones)
    assert first.record.context["timer"] in ("cuda-events", "cuda-graph")
    assert first.record.device["type"] == "cuda" and first.record.device["capability"]
    ok = [r for r in first.timings.values() if r.status == "ok"]
    assert len(ok) == 4 and all(r.reps >= 1 and r.median_ms > 0 for r in ok)
    # Racing: clear losers stop after a few repetitions; the winner's timing is from the
    # final race of the leaders, side by side (the last round).
    assert first.timings[first.config].round == max(r.round for r in ok)
    assert first.record.signature["a"] == "*fp32:D"  # Triton's specialization: 16-byte aligned
    c.zero_()
    second = launch(a, b, c)
    torch.cuda.synchronize()
    assert second.source == "memory" and second.config == first.config
    torch.testing.assert_close(c, a + b)


@triton.jit
def vadd_small_tiles(a, b, c, n, TILE: tl.constexpr):
    tl.static_assert(TILE <= 1024, "TILE over 1024")  # a compile error for larger tiles
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


def test_post_hook_sees_a_configuration_that_does_not_compile() -> None:
    """As with triton.autotune: post_hook(args, exception=...) for a configuration whose
    compile fails, None for one that ran."""
    n = 1 << 16
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    seen: list[tuple[int, str | None]] = []

    def post_hook(args, exception=None):
        seen.append((args["TILE"], None if exception is None else type(exception).__name__))

    res = autotune_launch(
        vadd_small_tiles, space={"tile": [256, 2048]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, post_hook=post_hook,
        name="gpu-post-hook",
    )  # fmt: skip
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert res.source == "tuned" and res.config.tile == 256
    assert res.timings[Config(tile=2048)].status == "failed"
    assert (256, None) in seen
    assert [e for t, e in seen if t == 2048] and all(e for t, e in seen if t == 2048)


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
    timer = timers.CudaEventTimer()
    small = torch.randn(1 << 12, device="cuda")
    big = torch.randn(1 << 26, device="cuda")
    t_small = sorted(timer.sample(lambda: small.mul_(1.0), lambda: None, 20))[10]
    t_big = sorted(timer.sample(lambda: big.mul_(1.0), lambda: None, 20))[10]
    assert 0 < t_small < t_big
    # 256 MiB read+write at under 4 TB/s takes well over 0.1 ms.
    assert t_big > 0.1


class _HotTimer(timers.CudaEventTimer):
    """The same timer, but instead of flushing L2 it keeps the GPU busy with a sleep that
    touches no memory: only the L2 contents differ from the real timer."""

    def flush_l2(self) -> None:
        torch.cuda._sleep(500_000)  # ~0.25 ms at 2 GHz: longer than enqueueing the launch


def test_l2_flush_makes_repetitions_cold() -> None:
    # Apples to apples: both timings come from CudaEventTimer.sample, so in both the GPU
    # is busy while the CPU enqueues the start event and the launch. (Events recorded on
    # an idle GPU around a JIT launch time the CPU's launch latency, ~20 us, not the
    # kernel: that made the plain loop look slower than the flushed one.)
    facts = bt.device_facts()
    timer = timers.CudaEventTimer()
    assert timer.flush_buffer.numel() >= 2 * facts["l2_bytes"]
    # A read-only working set of a third of L2: it stays in L2 between hot repetitions,
    # and its DRAM read (~5 us on an H100) is most of a cold repetition.
    n = max(1 << 20, facts["l2_bytes"] // 3 // 4)
    x = torch.randn(n, device="cuda")
    partial = torch.empty(triton.cdiv(n, 4096), device="cuda")
    grid = (triton.cdiv(n, 4096),)

    def run():
        read_sum[grid](x, partial, n, TILE=4096)

    run()
    torch.cuda.synchronize()
    cold = sorted(timer.sample(run, lambda: None, 51))[25]
    hot = sorted(_HotTimer().sample(run, lambda: None, 51))[25]
    torch.testing.assert_close(partial.sum(), x.sum(), rtol=1e-3, atol=1e-2)
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


# -- warm start: a new process loads the stored binary instead of compiling ---------------

_WARM_SCRIPT = """
import json, sys, warnings
import torch, triton, triton.language as tl
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import triton_binaries
from tunedsl.errors import CacheWarning


@triton.jit
def vadd_warm(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


compiles = []  # every triton.compile call (cache hits included) reports to the listener
triton.knobs.compilation.listener = lambda **kw: compiles.append(bool(kw.get("cache_hit")))
n = 1 << 20
a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
outs = [torch.zeros_like(a), torch.zeros_like(a)]
results = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for c in outs:  # one site: the first call decides, the second takes the hot path
        results.append(autotune_launch(
            vadd_warm, space={"tile": [256, 1024], "num_warps": [2, 4]},
            grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.tile}, name="gpu-warm",
        ))
torch.cuda.synchronize()
res = results[0]
jit_entries = sum(len(caches[0]) for caches in vadd_warm.device_caches.values())
print(json.dumps({
    "source": res.source, "config": str(res.config), "second": results[1].source,
    "ok": all(bool(torch.equal(c, a + b)) for c in outs),
    "compiles": len(compiles), "jit_entries": jit_entries,
    "loaded": triton_binaries.stats["loaded"], "stored": triton_binaries.stats["stored"],
    "warnings": [str(w.message) for w in caught if issubclass(w.category, CacheWarning)],
}))
"""


def _warm_child(tmp_path, triton_cache: str) -> dict:
    import json
    import subprocess
    import sys

    script = tmp_path / "warm_child.py"
    script.write_text(_WARM_SCRIPT)
    # The cache is not named "tunedsl": the script's directory is first on sys.path, and a
    # directory of that name there would hide an editable install of tunedsl.
    env = dict(
        os.environ,
        TUNEDSL_CACHE_DIR=str(tmp_path / "tunedsl-cache"),
        TRITON_CACHE_DIR=str(tmp_path / triton_cache),
    )
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _kernel_files(folder) -> list[str]:
    return sorted(p.name for p in folder.rglob("vadd_warm*")) if folder.exists() else []


def test_warm_process_loads_the_stored_binary_without_compiling(tmp_path) -> None:
    cold = _warm_child(tmp_path, "triton-cold")
    assert cold["source"] == "tuned" and cold["ok"]
    assert cold["stored"] == 1 and cold["compiles"] >= 4  # every configuration compiled
    # A new process with an empty Triton cache: any triton.compile would fill it.
    warm = _warm_child(tmp_path, "triton-warm")
    assert warm["source"] == "disk" and warm["config"] == cold["config"]
    assert warm["second"] == "memory"
    assert warm["ok"], "wrong result from the stored binary"
    assert warm["loaded"] == 1 and warm["stored"] == 0
    assert warm["compiles"] == 0 and warm["jit_entries"] == 0
    assert _kernel_files(tmp_path / "triton-warm") == []
    assert warm["warnings"] == []


def test_a_damaged_stored_binary_is_compiled_again(tmp_path) -> None:
    cold = _warm_child(tmp_path, "triton-cold")
    assert cold["stored"] == 1
    (cubin,) = (tmp_path / "tunedsl-cache" / "binaries").rglob("*.cubin")
    data = bytearray(cubin.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cubin.write_bytes(bytes(data))
    warm = _warm_child(tmp_path, "triton-warm")
    assert warm["source"] == "disk" and warm["ok"]
    assert warm["loaded"] == 0 and warm["compiles"] == 1  # the chosen variant only
    assert len(warm["warnings"]) == 1 and "sha256" in warm["warnings"][0]
    assert warm["stored"] == 1  # the damaged entry was replaced by the fresh binary
    again = _warm_child(tmp_path, "triton-again")
    assert again["ok"] and again["loaded"] == 1 and again["compiles"] == 0


DSL_VADD = """
from tunedsl import autotune, cdiv

def add(a, b, c, n):
    return autotune(space=dict(tile=[256, 1024], num_warps=[2, 4]), blocks=cdiv(n, $tile),
                    vadd(a, b, c, n, TILE=$tile))
"""


@pytest.mark.parametrize("fused", [True, False], ids=["C-form", "generic-path"])
def test_fused_launch_on_the_dsl_hot_path(fused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A repeated layout launches through the entry's C fused launch (runtime/fused.py; the
    # expansion's site.launch is then that object), or with TUNEDSL_SAFE=fused through the
    # generic path and its repeat check; other layouts, a launch hook and a cleared site
    # take the generic path, and every result is right.
    from tunedsl.frontend.compile import compile_source
    from tunedsl.runtime import native as native_module

    monkeypatch.setenv("TUNEDSL_SAFE", "" if fused else "fused")
    namespace: dict = {"vadd": vadd, "__name__": f"gpu_fused_{fused}"}
    exec(compile_source(DSL_VADD, filename=f"{__file__}:fused:{fused}"), namespace)
    add, site = namespace["add"], namespace["__tunedsl_site_0__"]
    base_a = torch.randn(5000, device="cuda")
    base_b = torch.randn(5000, device="cuda")

    def call(offset: int, n: int) -> None:
        a, b = base_a[offset : offset + n], base_b[offset : offset + n]
        c = torch.full((n,), float("nan"), device="cuda")
        add(a, b, c, n)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b, msg=f"offset={offset} n={n}")

    def current() -> object:  # what a repeat of the last layout runs
        return site._fast if fused else site._last

    for _ in range(3):
        call(0, 4096)
    last = current()
    assert last is not None, "the repeated layout should skip its call key"
    if fused:
        assert native_module.fused_type() is not None, native_module.status()
        assert type(last).__name__ == "Fused"
        if torch_compile.whole_calls():
            assert site.launch is last
        else:  # this PyTorch's Dynamo is loaded and cannot trace a C type's call
            assert site.launch == site._call
    else:
        assert site._fast is None and site.launch == site._call
        assert site._last.launcher_object.dyn0 is not None  # its launcher launches directly
    for offset, n in [(1, 4096), (0, 4000), (0, 4096), (4, 1), (0, 16), (0, 4096)]:
        call(offset, n)
    assert current() is last  # built once per entry, back in use with its layout
    seen: list = []

    def hook(*args: object, **kwargs: object) -> None:
        seen.append(1)

    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        call(0, 4096)
        assert seen, "a launch hook must see the launch (the direct path gives way to the JIT)"
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    count = len(seen)
    call(0, 4096)
    assert len(seen) == count
    site.clear()
    assert current() is None
    for _ in range(3):
        call(0, 4096)
    assert current() is not None and current() is not last


DSL_SCRATCH = """
from tunedsl import autotune, cdiv

def add_into_scratch(a, b, n, scratch):
    return autotune(space=dict(tile=[256, 1024]), blocks=cdiv(n, $tile),
                    vadd(a, b, n=n, c=scratch(cdiv(n, $tile) * $tile), TILE=$tile))
"""


def test_a_tensor_made_per_call_for_a_keyword_is_the_tensor_launched() -> None:
    # `c=scratch(...)` uses `$`: a configuration-dependent keyword argument, a new tensor on
    # every call. The direct launch compared it with the first launch's by `==` (an
    # elementwise tensor): the second call raised "Boolean value of Tensor with more than
    # one value is ambiguous"; the interpreter never takes that path.
    from tunedsl.frontend.compile import compile_source

    namespace: dict = {"vadd": vadd, "__name__": "gpu_scratch"}
    exec(compile_source(DSL_SCRATCH, filename=f"{__file__}:scratch"), namespace)
    made: list = []

    def scratch(size: int) -> object:
        made.append(torch.full((size,), float("nan"), device="cuda"))
        return made[-1]

    n = 4000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    for _ in range(4):
        namespace["add_into_scratch"](a, b, n, scratch)
        torch.cuda.synchronize()
        torch.testing.assert_close(made[-1][:n], a + b)


def test_an_unaligned_call_after_the_direct_launch_is_turned_back_on_runs_its_own_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The site meets its kernel with TUNEDSL_SAFE=direct; once it is unset, a new key's
    # launcher launches directly. Its key had no alignment, so an unaligned call of the same
    # size ran the kernel compiled for 16-byte-aligned pointers.
    base_a = torch.randn(5000, device="cuda")
    base_b = torch.randn(5000, device="cuda")
    monkeypatch.setenv("TUNEDSL_SAFE", "direct")
    c = torch.empty(4096, device="cuda")
    launch(base_a[:4096], base_b[:4096], c, name="gpu-align-later")
    monkeypatch.delenv("TUNEDSL_SAFE")
    for offset in (0, 0, 1, 1):
        a, b = base_a[offset : offset + 4000], base_b[offset : offset + 4000]
        c = torch.full((4000,), float("nan"), device="cuda")
        launch(a, b, c, name="gpu-align-later")
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b, msg=f"offset={offset}")


def test_an_unaligned_tensor_gets_its_own_decision_and_record() -> None:
    # Triton compiles a pointer 16-byte aligned or not into the kernel (vector loads or
    # none): a slice one float in is another kernel, as an n not divisible by 16 is, so it
    # gets its own decision and record; a slice 16 bytes in is aligned again.
    src = torch.randn(1 << 16, device="cuda")
    n = 4096
    calls = [("tuned", 0), ("tuned", 1), ("memory", 4), ("memory", 5)]
    for source, offset in calls:
        a, b = src[offset : offset + n], src[offset + n : offset + 2 * n]
        c = torch.empty(n, device="cuda")
        res = launch(a, b, c, name="gpu-unaligned")
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b)
        assert res.source == source, (offset, res.key)
        assert ("aligned" in res.key["args"]["a"]) == (offset % 4 != 0)


@pytest.mark.parametrize("isolate", [False, True])
def test_a_site_called_on_a_side_stream_waits_for_that_streams_writes(isolate: bool) -> None:
    # The inputs are written on a side stream behind a long sleep and the site is called
    # on that stream with nothing synchronized: tuning (its measuring, the copies an
    # isolated worker gets, the in-place restore) and the launches after it must all be
    # ordered after those writes, as any CUDA work on the caller's stream is.
    stream = torch.cuda.Stream()
    n = 1 << 20
    src_a, src_b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    a, b, c = (torch.zeros(n, device="cuda") for _ in range(3))
    torch.cuda.synchronize()
    name = f"gpu-side-stream-{isolate}"
    with torch.cuda.stream(stream):
        for expect in ("tuned", "memory"):
            torch.cuda._sleep(50_000_000)  # tens of milliseconds of work ahead of the writes
            a.copy_(src_a)
            b.copy_(src_b)
            res = launch(a, b, c, name=name, isolate=isolate)
            assert res.source == expect
            stream.synchronize()
            torch.testing.assert_close(c, src_a + src_b)
            a.zero_()
            b.zero_()
            c.zero_()

    @triton.jit
    def double_in_place(x, n, TILE: tl.constexpr):
        offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.zeros(n, device="cuda")
    produced = torch.arange(n, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)
        x.copy_(produced)
        autotune_launch(
            double_in_place, space={"tile": [256, 1024]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, n), kwargs=lambda cfg: {"TILE": cfg.tile}, restore_value=["x"],
            name=f"gpu-side-stream-double-{isolate}", isolate=isolate,
        )  # fmt: skip
        stream.synchronize()
    torch.testing.assert_close(x, produced * 2)


@triton.jit
def bump_in_place(x, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


@pytest.mark.parametrize("room", ["to compare", "to copy"])
def test_an_in_place_kernel_tuned_without_room_for_copies_leaves_its_argument_right(
    room: str,
) -> None:
    # x += 1 with x too large for the in-place watch's device copies (the allocator capped):
    # with room for one copy but not to compare with it, every tuning failed (out of memory
    # in each configuration); with no room for a copy, nothing was restored and the caller
    # got x plus one a launch. Now the copies are restored before every launch, or taken
    # in host memory and put back: the call leaves x + 1.
    import warnings

    n = 1 << 28  # 1 GiB of float32
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    size, flush = 4 * n, 2**28  # the event timer's L2 flush buffer: 256 MiB
    extra = size + flush + size * 2 // 5 if room == "to compare" else flush + size // 2
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(
        min(1.0, (torch.cuda.memory_reserved() + extra) / total)
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = autotune_launch(
                bump_in_place, space={"tile": [1024, 4096], "num_warps": [4, 8]},
                grid=lambda cfg: (cdiv(n, cfg.tile),), args=(x, n),
                kwargs=lambda cfg: {"TILE": cfg.tile}, name=f"gpu-no-room-{room.split()[1]}",
            )  # fmt: skip
        torch.cuda.synchronize()
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert res.source == "tuned"
    assert float(x.min()) == float(x.max()) == 1.0
    said = " ".join(str(w.message) for w in caught)
    assert ("compare" if room == "to compare" else "host memory") in said, said


@triton.heuristics({"FULL": lambda args: args["n"] % args["TILE"] == 0})
@triton.jit
def add_one_even(x, y, n, TILE: tl.constexpr, FULL: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if FULL:
        tl.store(y + offs, tl.load(x + offs) + 1)
    else:
        tl.store(y + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


@pytest.mark.parametrize("n", [4096, 4000])
def test_a_kernel_under_triton_heuristics_tunes_on_the_gpu(n) -> None:
    """The tuning's compiles of a ``@triton.heuristics`` kernel compiled the bare JIT
    function without the parameters the heuristics give: every configuration failed."""
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    got = autotune_launch(
        add_one_even, space={"TILE": [128, 256], "num_warps": [2, 4]},
        grid=lambda c: (cdiv(n, c.TILE),), args=(x, y, n),
        kwargs=lambda c: {"TILE": c.TILE}, name=f"gpu-heuristics-{n}",
    )  # fmt: skip
    torch.cuda.synchronize()
    assert got.source == "tuned" and got.record is not None
    assert sorted(r.status for r in got.record.results) == ["ok"] * 4
    torch.testing.assert_close(y, x + 1)


# A first call in a fresh process (Triton's driver not started), Triton's cache directory
# as given; prints the error's class and message, or OK.
FIRST_CALL_IN_A_FRESH_PROCESS = """
import torch, triton, triton.language as tl
from tunedsl import autotune_launch, cdiv

@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
c = torch.empty_like(a)
try:
    autotune_launch(vadd, space={"tile": [256, 1024]}, grid=lambda cfg: (cdiv(4096, cfg.tile),),
                    args=(a, b, c, 4096), kwargs=lambda cfg: {"TILE": cfg.tile}, name="open-cache")
    print("OK")
except Exception as err:
    print(type(err).__name__, str(err).splitlines()[0])
"""


def test_a_first_call_with_a_triton_cache_others_can_write_fails_before_anything_is_put_there(
    tmp_path,
) -> None:
    # Triton's driver, started by the first call, built its C utilities (cuda_utils) into
    # TRITON_CACHE_DIR and loaded them from there before any check of that directory: in one
    # another user can write, their library would run as you. The first call now fails with
    # the UsageError naming the directory, and nothing is written there.
    import subprocess
    import sys

    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # another user can write here (sticky or not: they own what they make)
    script = tmp_path / "first_call.py"
    script.write_text(FIRST_CALL_IN_A_FRESH_PROCESS)
    env = dict(os.environ, TRITON_CACHE_DIR=str(open_dir), TUNEDSL_CACHE_DIR=str(tmp_path / "c"))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    out = proc.stdout.strip().splitlines()
    assert out and out[-1].startswith("UsageError"), proc.stdout + proc.stderr
    assert f"Triton's cache directory {open_dir}" in out[-1], out[-1]
    assert os.listdir(open_dir) == [], "something was written in the open Triton cache"
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    env["TRITON_CACHE_DIR"] = str(own)
    ok = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    assert ok.stdout.strip().splitlines()[-1:] == ["OK"], ok.stdout + ok.stderr
