"""A fourth batch of other autotuners' test suites, ported to tunedsl: Triton's autotune
listener tests (what a tuning reports, and when), its free-threading and parallel-compile
autotuner tests (threads tuning one site at once, compile pools of any size), the
heuristics compositions of Triton, FlagGems and Unsloth, argument specialization inside a
``key=`` bucket (Triton's test_specialize/test_cache), Helion's private copies of the
arguments (a worker's copies keep each tensor's layout), Inductor's user-kernel tests under
``torch.compile`` and a Kernel Tuner restriction check.

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through DSL macros compiled by ``tunedsl.frontend``
or through ``autotune_launch``.

Not ported, for want of a counterpart: Triton's listener ``duration`` of a disk hit (a
record keeps the tuning's own ``tuning_s``), its concurrent-devices test (one CPU here;
tests/integration/test_multi_device.py keys decisions per device), its check that the
interpreter never initialises a GPU driver (a CPU build of PyTorch has none to
initialise), and its listener that waits for another thread's tuning
(test_autotuner_listener_can_wait_for_another_tuning_thread): tunedsl has no listener, and
its hooks run inside the process's measurement, which one tuning holds at a time, so a
hook that waits for another thread's tuning waits until that tuning can start. Not ported
yet: test_cache.py::test_kernel_global_var_change (a ``tl.constexpr`` global reassigned in
the same process after a key is decided: Triton's JIT raises; tunedsl keys the kernel's
globals once per process).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_process, record_files

from tunedsl import Config, UsageError, autotune_launch, cdiv
from tunedsl.frontend.compile import compile_source

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv
from ported_kernels_more import copy
from ported_kernels_third import copy_plus
from ported_kernels_fourth import add_scale, capped, copy_halves, copy_scaled, copy_unspecialized, row_copy
from ported_kernels_fourth import add_as, add_one_strided, fill_value, special_params
from ported_kernels_more import total_two

plain = lambda dst, src, N, pre, post: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    pre_hook=pre, post_hook=post, copy(dst, src, N, BLOCK=$block))
single = lambda dst, src, N: autotune(space=dict(block=[64]), blocks=cdiv(N, $block),
    copy(dst, src, N, BLOCK=$block))
scaled = lambda dst, src, N, scale: autotune(space=dict(block=[32, 64, 128, 256]), blocks=cdiv(N, $block),
    copy_scaled(dst, src, N, SCALE=scale, BLOCK=$block))
restored = lambda src, N, scale: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    restore_value=["src"], add_scale(src, N, SCALE=scale, BLOCK=$block))
staged = lambda dst, src, N: autotune(space=dict(block=[64], num_stages=[2, 3]), blocks=cdiv(N, $block),
    copy(dst, src, N, BLOCK=$block))
halves = lambda dst, src, N: autotune(space=dict(block=[64, 128]), blocks=cdiv(N, $block),
    copy_halves(dst, src, N, BLOCK=$block))
halves_passed = lambda dst, src, N: autotune(space=dict(block=[64, 128]), blocks=cdiv(N, $block),
    copy_halves(dst, src, N, HALF=$block // 2, BLOCK=$block))
rows = lambda dst, src, M, N: autotune(space=dict(rows=[1, 2]), blocks=cdiv(M, $rows), key=M // 64,
    row_copy(dst, src, M, N, ROWS=$rows))
capping = lambda dst, src, N, cap: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    capped(dst, src, N, CAP=cap, BLOCK=$block))
optional = lambda dst, src, N, bias: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    key=N // 1024, copy_plus(dst, src, N, BLOCK=$block, bias=bias))
bucketed = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    key=N // 4096, copy(dst, src, N, BLOCK=$block))
unspecialized = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    key=N // 4096, copy_unspecialized(dst, src, N, BLOCK=$block))
filled = lambda dst, v: autotune(space=dict(block=[8, 16]), blocks=1, key="one bucket",
    fill_value(dst, v, BLOCK=$block))


@triton.heuristics({"EVEN": lambda args: args["N"] % args["BLOCK"] == 0})
@triton.heuristics({"PARTS": lambda args: 2})
@triton.jit
def copy_parts(dst, src, N, EVEN: tl.constexpr, PARTS: tl.constexpr, BLOCK: tl.constexpr):
    for part in tl.static_range(PARTS):
        offs = tl.program_id(0) * BLOCK + part * (BLOCK // PARTS) + tl.arange(0, BLOCK // PARTS)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


parts = lambda dst, src, N: autotune(space=dict(block=[64, 128]), blocks=cdiv(N, $block),
    copy_parts(dst, src, N, BLOCK=$block))
hinted = lambda dst, src, N, pre, post: autotune(space=dict(block=[32, 128], num_warps=[2, 8]),
    blocks=cdiv(N, $block), num_stages=3, pre_hook=pre, post_hook=post, copy(dst, src, N, BLOCK=$block))
strided = lambda x, restore: autotune(space=dict(block=[32, 128]), blocks=cdiv(x.numel(), $block),
    restore_value=restore, add_one_strided(x, x.numel(), x.stride(0), BLOCK=$block))
accumulated = lambda x, a, b, N, pre: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    reset_to_zero=["out_a", "out_b"], pre_hook=pre, total_two(x, out_a=a, out_b=b, N=N, BLOCK=$block))
special_passed = lambda src, dst, N: autotune(space=dict(block=[64, 128]), blocks=cdiv(N, $block),
    special_params(src, dst, N, BLOCK=$block, num_warps=4, num_stages=3))
special_hinted = lambda src, dst, N: autotune(space=dict(block=[64, 128]), blocks=cdiv(N, $block),
    num_warps=4, num_stages=3, special_params(src, dst, N, BLOCK=$block))


def summed(x):
    out_a, out_b = torch.zeros(1), torch.zeros(1)
    autotune(space=dict(block=[32, 128]), blocks=cdiv(x.numel(), $block), reset_to_zero=["out_a", "out_b"],
        total_two(x, out_a, out_b, x.numel(), BLOCK=$block))
    return out_a + out_b


def added(x, y, dtype_torch, dtype_triton):
    out = torch.zeros_like(x).to(dtype=dtype_torch)
    autotune(space=dict(block=[2, 4]), blocks=cdiv(x.numel(), $block),
        add_as(x, y, out, x.numel(), DTYPE=dtype_triton, BLOCK=$block))
    return out
"""


def load(path: Path, text: str = SCRIPT) -> dict[str, Any]:
    """``text`` written to ``path``, expanded by the front end and run as a module."""
    path.write_text(text, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_fourth", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    return load(tmp_path / "ported_fourth.py")


def nothing(*args: Any, **kwargs: Any) -> None:
    return None


# --- Triton test_autotune_listener: what a tuning reports, and when ------------------------


# ported from: triton-lang/triton python/test/unit/runtime/test_autotune_listener.py::test_autotune_listener_fresh
def test_a_fresh_tuning_reports_every_configuration_and_its_time(dsl: dict[str, Any]) -> None:
    """Triton's listener on a fresh benchmark (fired once, not a cache hit, the best config
    among the timed ones, every config timed, a duration > 0): the result of the call that
    tunes says ``tuned``, its record holds a measured result for both configurations and
    the choice among them, and the tuning's duration is positive."""
    src, dst = torch.randn(1024), torch.zeros(1024)
    res = dsl["plain"](dst, src, 1024, nothing, nothing)
    assert res.source == "tuned" and torch.equal(dst, src)
    assert set(res.timings) == {Config(block=32), Config(block=128)}
    assert res.config in res.timings and all(r.status == "ok" for r in res.timings.values())
    assert res.time_ms() is not None and res.time_ms() > 0
    assert res.record is not None and res.record.tuning_s > 0
    [record] = record_files()
    assert json.loads(record.read_text())["chosen"] == res.config.to_json()


# ported from: triton-lang/triton python/test/unit/runtime/test_autotune_listener.py::test_autotune_listener_in_memory_cache_hit
def test_a_hit_in_memory_neither_tunes_nor_writes(dsl: dict[str, Any], tune_count: list) -> None:
    """Triton's listener does not fire on an in-memory hit: the second call with the same
    key says ``memory``, tunes nothing, runs no hook and leaves the record as it was."""
    hooks: list[str] = []
    src, dst = torch.randn(1024), torch.zeros(1024)
    first = dsl["plain"](dst, src, 1024, lambda a: hooks.append("pre"), nothing)
    [record] = record_files()
    before, stamp = record.read_bytes(), record.stat().st_mtime_ns
    ran = len(hooks)
    dst.zero_()
    again = dsl["plain"](dst, src, 1024, lambda a: hooks.append("pre"), nothing)
    assert (first.source, again.source) == ("tuned", "memory") and len(tune_count) == 1
    assert again.config == first.config and torch.equal(dst, src)
    assert len(hooks) == ran and record.read_bytes() == before
    assert record.stat().st_mtime_ns == stamp


# ported from: triton-lang/triton python/test/unit/runtime/test_autotune_listener.py::test_autotune_listener_disk_cache_hit
def test_a_new_process_reads_the_decision_and_its_timings_without_tuning(
    tmp_path: Path, tune_count: list
) -> None:
    """Triton's listener on a disk hit (``cache_hit=True``, no new duration): a new process
    says ``disk``, tunes nothing, and reports the stored timings and tuning time as they
    were written, with the same choice."""
    path = tmp_path / "ported_fourth.py"
    src, dst = torch.randn(1024), torch.zeros(1024)
    first = load(path)["plain"](dst, src, 1024, nothing, nothing)
    new_process()
    dst.zero_()
    hit = load(path)["plain"](dst, src, 1024, nothing, nothing)
    assert (first.source, hit.source) == ("tuned", "disk") and len(tune_count) == 1
    assert hit.config == first.config and torch.equal(dst, src)
    assert hit.record is not None and first.record is not None
    assert hit.record.tuning_s == first.record.tuning_s
    assert {c: r.median_ms for c, r in hit.timings.items()} == {
        c: r.median_ms for c, r in first.timings.items()
    }


# ported from: triton-lang/triton python/test/unit/runtime/test_autotune_listener.py::test_autotune_listener_single_config
def test_one_configuration_reports_no_timings_and_writes_no_record(
    dsl: dict[str, Any], tune_count: list
) -> None:
    """Triton's listener does not fire for a single configuration (nothing benchmarked):
    the call says ``default``, has no record and no timings, and nothing is written."""
    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["single"](dst, src, 300)
    assert res.source == "default" and res.record is None and not res.timings
    assert res.time_ms() is None and not record_files() and not tune_count
    assert torch.equal(dst, src)


# --- Triton test_free_threading_autotune: threads tuning one site at once ------------------


def in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """``fn(*args)`` started in a thread; the dict gets its ``result`` or ``error``."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn(*args)
        except BaseException as err:  # handed to the test
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# ported from: triton-lang/triton python/test/unit/runtime/test_free_threading_autotune.py::test_autotuner_concurrent_failure_retries_cleanly
def test_a_tuning_that_fails_in_one_thread_is_tuned_cleanly_by_the_waiting_one(
    dsl: dict[str, Any],
) -> None:
    """Triton: the first thread's benchmark fails while a second thread waits for the same
    key; the first gets its error, the second tunes the key itself and one decision is
    cached. Here the first tuning's ``pre_hook`` raises (the caller's error, which stops a
    tuning) once the second thread calls; that thread then tunes and launches correctly,
    and the key has one record."""
    entered, second_called = threading.Event(), threading.Event()
    calls: list[int] = []

    def pre(args: Any) -> None:
        calls.append(args["BLOCK"])
        if len(calls) == 1:
            entered.set()
            assert second_called.wait(60)
            raise RuntimeError("first benchmark failed")

    src = torch.randn(1024)
    dst_a, dst_b = torch.zeros(1024), torch.zeros(1024)
    first, out_a = in_thread(dsl["plain"], dst_a, src, 1024, pre, nothing)
    assert entered.wait(60)
    second, out_b = in_thread(dsl["plain"], dst_b, src, 1024, pre, nothing)
    second_called.set()
    first.join(120)
    second.join(120)
    assert "first benchmark failed" in str(out_a.get("error"))
    assert "error" not in out_b, out_b.get("error")
    assert out_b["result"].source == "tuned" and torch.equal(dst_b, src)
    assert len(record_files()) == 1


# ported from: triton-lang/triton python/test/unit/runtime/test_free_threading_autotune.py::test_autotuner_concurrent_keys_keep_listener_timings_together
def test_two_keys_tuned_by_two_threads_keep_their_own_arguments_and_timings(
    dsl: dict[str, Any],
) -> None:
    """Triton: two threads tune two keys of one autotuner at once, and each key's
    listener gets its own best config and timings. Here the hooks of each key's tuning
    see that key's arguments only, each record is of its own shape, with a result for
    every configuration, and both outputs are right."""
    seen: dict[int, set[int]] = {300: set(), 3000: set()}
    started = threading.Event()

    def pre_for(n: int) -> Any:
        def pre(args: Any) -> None:
            seen[n].add(args["N"])
            if n == 300:
                assert started.wait(60)

        return pre

    srcs = {n: torch.randn(n) for n in seen}
    dsts = {n: torch.zeros(n) for n in seen}
    one, out_one = in_thread(dsl["plain"], dsts[300], srcs[300], 300, pre_for(300), nothing)
    two, out_two = in_thread(dsl["plain"], dsts[3000], srcs[3000], 3000, pre_for(3000), nothing)
    started.set()
    one.join(120)
    two.join(120)
    assert "error" not in out_one and "error" not in out_two
    assert seen == {300: {300}, 3000: {3000}}
    for n, out in ((300, out_one), (3000, out_two)):
        res = out["result"]
        assert res.source == "tuned" and torch.equal(dsts[n], srcs[n])
        assert res.key["args"]["src"]["shape"] == [n] and len(res.timings) == 2
    assert out_one["result"].digest != out_two["result"].digest and len(record_files()) == 2


# --- Triton test_parallel_autotuner: compile pools of any size -----------------------------


# ported from: triton-lang/triton python/test/unit/runtime/test_parallel_autotuner.py::test_correctness
@pytest.mark.parametrize("workers", ["1", "2", "4"])
def test_any_number_of_compile_workers_tunes_correctly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """Triton (sequential, parallel, parallel with overlap; a new SCALE per mode so no mode
    reads another's cache): each way of compiling the configurations gives the right
    output and a choice. Here with 1, 2 and 4 compile workers: every configuration is
    measured, the output is right and the choice is one of them."""
    monkeypatch.setenv("TUNEDSL_COMPILE_WORKERS", workers)
    scale = 100 + int(workers)
    src, dst = torch.randn(4096), torch.zeros(4096)
    res = load(tmp_path / "ported_fourth.py")["scaled"](dst, src, 4096, float(scale))
    assert res.source == "tuned" and torch.allclose(dst, src * scale)
    assert len(res.timings) == 4 and all(r.status == "ok" for r in res.timings.values())
    assert res.config in res.timings and res.time_ms() > 0


# ported from: triton-lang/triton python/test/unit/runtime/test_parallel_autotuner.py::test_restore
@pytest.mark.parametrize("workers", ["1", "2"])
def test_restore_value_holds_with_any_number_of_compile_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """Triton: ``restore_value`` restores the tensor between benchmarks on every compile
    path, so an in-place ``src += SCALE`` leaves ``SCALE`` after tuning."""
    monkeypatch.setenv("TUNEDSL_COMPILE_WORKERS", workers)
    scale = 200 + int(workers)
    src = torch.zeros(1024)
    res = load(tmp_path / "ported_fourth.py")["restored"](src, 1024, float(scale))
    assert res.source == "tuned" and len(res.timings) == 2
    assert torch.equal(src, torch.full_like(src, float(scale)))


# --- Triton test_do_bench / test_autotuner: repetitions and configurations ----------------


# ported from: triton-lang/triton python/test/unit/runtime/test_do_bench.py::test_fixed_n_warmup_and_n_repeat
def test_a_pre_hook_runs_before_the_warm_up_and_every_counted_repetition(
    dsl: dict[str, Any],
) -> None:
    """Triton: ``do_bench(fn, n_warmup=3, n_repeat=7)`` calls ``fn`` exactly 1 + 3 + 7
    times. tunedsl sizes its own repetitions (a race measures a near candidate again and
    keeps the fresh samples), and ``pre_hook`` runs before every launch of a
    configuration: each configuration ran its hook at least once more than the
    repetitions its record counts (``reps``, the warm-up), and a later call, which tunes
    nothing, runs no hook."""
    launches: dict[int, int] = {}

    def pre(args: Any) -> None:
        launches[args["BLOCK"]] = launches.get(args["BLOCK"], 0) + 1

    src, dst = torch.randn(1024), torch.zeros(1024)
    res = dsl["plain"](dst, src, 1024, pre, nothing)
    reps = {cfg.block: r.reps for cfg, r in res.timings.items()}
    assert set(launches) == set(reps) == {32, 128} and all(n >= 1 for n in reps.values())
    assert all(launches[block] >= n + 1 for block, n in reps.items()), (launches, reps)
    counted = dict(launches)
    assert dsl["plain"](dst, src, 1024, pre, nothing).source == "memory"
    assert launches == counted


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_config_ir_override_changes_disk_cache_key
def test_configurations_differing_in_a_launch_option_are_stored_apart(
    dsl: dict[str, Any], tmp_path: Path
) -> None:
    """Triton: two configs that differ only in ``ir_override`` print differently, since the
    persisted cache is keyed on ``str(config)``. tunedsl's counterpart of a configuration
    that differs only in how it is compiled is a launch option: ``num_stages=2`` and ``3``
    are two results in the record, read back apart by a new process."""
    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["staged"](dst, src, 300)
    configs = {Config(block=64, num_stages=2), Config(block=64, num_stages=3)}
    assert set(res.timings) == configs and len({str(c) for c in configs}) == 2
    new_process()
    again = load(tmp_path / "ported_fourth.py")["staged"](dst, src, 300)
    assert again.source == "disk" and set(again.timings) == configs
    assert again.config == res.config


# --- Heuristics: stacked, computed from the arguments, normalising a passed flag -----------


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_hooks
# (``@triton.autotune`` over ``@triton.heuristics``; here two ``@triton.heuristics`` stacked)
def test_stacked_heuristics_are_each_computed_per_configuration(dsl: dict[str, Any]) -> None:
    """Two ``@triton.heuristics`` layers, one computing ``HALF`` from ``BLOCK`` and one
    ``EVEN`` from ``N`` and ``BLOCK``: both are computed for every configuration tried and
    for the launch (N=192: unmasked copies are right for block=64 alone, and each half of a
    program is ``BLOCK // 2``)."""
    src, dst = torch.randn(192), torch.zeros(192)
    res = dsl["halves"](dst, src, 192)
    assert res.source == "tuned" and len(res.timings) == 2
    assert all(r.status == "ok" for r in res.timings.values())
    assert torch.equal(dst, src)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_hooks
def test_a_launch_passing_what_an_inner_heuristic_computes_is_a_usage_error(
    dsl: dict[str, Any],
) -> None:
    """Triton's ``Heuristics.run`` replaces a passed value with the heuristic's, in every
    layer: a launch that passes ``HALF=$block // 2`` to a kernel whose inner
    ``@triton.heuristics`` computes ``HALF`` would tune a value Triton never launches. It
    is named as for one layer, before anything runs."""
    src, dst = torch.randn(192), torch.zeros(192)
    with pytest.raises(UsageError, match="HALF"):
        dsl["halves_passed"](dst, src, 192)
    assert not dst.any() and not record_files()


# ported from: flagos-ai/FlagGems src/flag_gems/ops/log_softmax.py (a heuristic computes the
# tile from the row width, ``TILE_N = triton.next_power_of_2(N)``, apart from the tuned key)
def test_a_heuristic_of_an_argument_outside_the_key_is_computed_on_every_call(
    dsl: dict[str, Any],
) -> None:
    """FlagGems' row kernels compute their tile from the row width by a heuristic
    (``next_power_of_2(N)``). On a site keyed on a bucket of ``M`` alone, calls of other
    widths share a decision, and each launch computes its own ``BLOCK_N``: every row is
    copied whole, whatever width the first call had."""
    got = []
    for n in (8, 100, 33):
        src, dst = torch.randn(64, n), torch.zeros(64, n)
        got.append(dsl["rows"](dst, src, 64, n))
        assert torch.equal(dst, src), n
    assert [r.source for r in got] == ["tuned", "memory", "memory"]


# ported from: unslothai/unsloth unsloth/kernels/cross_entropy_loss.py
# (``@triton.heuristics({"DO_SOFTCAPPING": lambda args: bool(args["DO_SOFTCAPPING"])})``)
def test_a_heuristic_normalising_a_passed_flag_is_launched_with_each_calls_flag(
    dsl: dict[str, Any],
) -> None:
    """Unsloth passes flags (``DO_SOFTCAPPING=...``) to kernels whose heuristics turn them
    into bools: the value passed does not depend on the configuration, so the launch is
    accepted, and each flag is launched as passed: capped only when asked."""
    src = torch.linspace(-3.0, 3.0, 300)
    for cap in (True, 0, 1, False):
        dst = torch.zeros(300)
        dsl["capping"](dst, src, 300, cap)
        assert torch.equal(dst, src.clamp(max=1.0) if cap else src), cap


# ported from: unslothai/unsloth unsloth/kernels/cross_entropy_loss.py (as above, through the
# plain API: a flag a ``kwargs=`` function returns alike for every configuration is accepted,
# one that follows the configuration is the mistake it always was)
def test_a_heuristics_parameter_from_a_kwargs_function_is_checked_by_what_it_depends_on() -> None:
    from ported_kernels_fourth import capped

    src = torch.linspace(-3.0, 3.0, 300)

    def launch(dst: torch.Tensor, space: Any, kwargs: Any, name: str) -> Any:
        return autotune_launch(
            capped,
            space=space,
            grid=lambda cfg: (cdiv(300, cfg.block),),
            args=(dst, src, 300),
            kwargs=kwargs,
            name=name,
        )

    dst = torch.zeros(300)
    alike = {"block": [32, 128]}
    res = launch(dst, alike, lambda cfg: {"CAP": True, "BLOCK": cfg.block}, "flag-alike")
    assert res.source == "tuned" and torch.equal(dst, src.clamp(max=1.0))
    dst = torch.zeros(300)
    with pytest.raises(UsageError, match="computes `CAP` that the launch gives too"):
        per_config = {"block": [32, 128], "cap": [False, True]}
        launch(dst, per_config, lambda cfg: {"CAP": cfg.cap, "BLOCK": cfg.block}, "flag-per-config")
    assert not dst.any()


# --- Triton test_specialize / test_cache: specialization inside one key= bucket -----------


# ported from: triton-lang/triton python/test/unit/runtime/test_specialize.py::test_specialize_impl
# (``None`` is specialized as ``("constexpr", None)``, a tensor as a pointer) and
# test_autotuner.py::test_restore_with_none (an optional pointer passed as ``None``)
def test_an_optional_tensor_and_none_are_decided_apart_in_one_key_bucket(
    dsl: dict[str, Any],
) -> None:
    """``bias=None`` compiles a kernel without the bias, a tensor one with it: within one
    ``key=`` bucket the two are decided apart and each launch adds the bias only when one
    is given."""
    src, bias = torch.randn(300), torch.randn(300)
    got = []
    for b in (None, bias, None, bias):
        dst = torch.zeros(300)
        got.append(dsl["optional"](dst, src, 300, b))
        assert torch.allclose(dst, src if b is None else src + bias)
    assert [r.source for r in got] == ["tuned", "tuned", "memory", "memory"]
    assert got[0].digest != got[1].digest


# ported from: triton-lang/triton python/test/unit/runtime/test_specialize.py::test_specialize_impl
# (a tensor is specialized as a pointer of its dtype: ``*fp32`` is another kernel than ``*fp16``)
def test_another_dtype_in_one_key_bucket_is_tuned_apart(dsl: dict[str, Any]) -> None:
    """``key=N // 4096`` replaces the shapes, never the dtypes: a float16 call in the
    bucket of a float32 one gets its own decision and a float16 copy."""
    got = []
    for dtype in (torch.float32, torch.float16, torch.float32):
        src, dst = torch.randn(300).to(dtype), torch.zeros(300, dtype=dtype)
        got.append(dsl["bucketed"](dst, src, 300))
        assert torch.equal(dst, src)
    assert [r.source for r in got] == ["tuned", "tuned", "memory"]
    assert got[0].key["args"]["src"] != got[1].key["args"]["src"]


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_specialize
def test_ints_in_one_key_bucket_are_split_by_their_specialization_class(
    dsl: dict[str, Any],
) -> None:
    """Triton's int specialization (``N`` divisible by 16 is another kernel than ``N``
    odd): within one ``key=`` bucket, 320 and 336 share a decision and 321 does not."""
    got = []
    for n in (320, 336, 321):
        src, dst = torch.randn(n), torch.zeros(n)
        got.append(dsl["bucketed"](dst, src, n))
        assert torch.equal(dst, src)
    assert [r.source for r in got] == ["tuned", "memory", "tuned"]


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_specialize
# (its ``kernel_nospec``, ``do_not_specialize=["i"]``: one binary for every value)
def test_do_not_specialize_keeps_the_safe_side_of_the_int_classes(dsl: dict[str, Any]) -> None:
    """An int named in ``do_not_specialize`` is one binary for all its values in Triton;
    tunedsl keys it by Triton's classes all the same (docs/runtime.md "The cache key"), the
    safe side: each class tunes once per ``key=`` bucket, and every copy is right."""
    got = []
    for n in (320, 321, 336, 1):
        src, dst = torch.randn(n), torch.zeros(n)
        got.append(dsl["unspecialized"](dst, src, n))
        assert torch.equal(dst, src)
    assert [r.source for r in got] == ["tuned", "tuned", "memory", "tuned"]


# --- Helion test_autotune_clone_alignment: what a worker's copies keep ----------------------


def contract(t: torch.Tensor) -> tuple[Any, ...]:
    """What Triton and the kernel see of a tensor: layout, offset, 16-byte alignment."""
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.data_ptr() % 16)


# ported from: pytorch/helion test/test_autotune_clone_alignment.py::test_private_clone_alignment_boundaries
@pytest.mark.parametrize("offset", [0, 1, 8])
def test_a_workers_copies_keep_offset_alignment_and_aliasing(offset: int) -> None:
    """Helion's private clones keep each tensor's shape, strides, storage offset and
    alignment (``data_ptr() % 256``), and which arguments share a storage: a candidate is
    benchmarked on the layout the caller launches. With ``isolate=True`` the worker's
    copies, as its ``pre_hook`` sees them, have the caller's layout, offset and 16-byte
    alignment (another alignment is another Triton specialization), the two views of one
    storage still share one, and the caller's tensors come out right."""
    from ported_kernels_more import copy

    base = torch.arange(2 * 300 + offset, dtype=torch.float32)
    src, dst = base[offset : offset + 300], base[offset + 300 :]
    want = {"src": contract(src), "dst": contract(dst)}
    expected = src.clone()

    def pre(args: Any) -> None:
        got = {name: contract(args[name]) for name in want}
        if got != want:
            raise AssertionError(f"worker copies differ: {got} != {want}")
        shared = (
            args["src"].untyped_storage().data_ptr() == args["dst"].untyped_storage().data_ptr()
        )
        if not shared:
            raise AssertionError("the views of one storage do not share it in the worker")

    res = autotune_launch(
        copy,
        space={"block": [32, 128]},
        grid=lambda cfg: (cdiv(300, cfg.block),),
        args=(dst, src, 300),
        kwargs=lambda cfg: {"BLOCK": cfg.block},
        pre_hook=pre,
        isolate=True,
        name=f"clone-alignment-{offset}",
    )
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert torch.equal(dst, expected) and torch.equal(src, expected)


# --- Inductor test_triton_kernels: launch-option names, torch.compile ----------------------


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_special_params
def test_parameters_named_like_launch_options_take_the_launchs_values(
    dsl: dict[str, Any],
) -> None:
    """Inductor: a kernel whose parameters are called ``num_warps`` and ``num_stages`` gets
    the values the launch passes (``x * num_stages + num_warps``). Passed in the launch,
    they reach the parameters; given as static hints only, the launch passes nothing for
    them, which is named before anything runs, with the fix."""
    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["special_passed"](src, dst, 300)
    assert res.source == "tuned" and torch.allclose(dst, src * 3 + 4)
    dst.zero_()
    with pytest.raises(
        UsageError, match=r"passes nothing for `num_warps`, `num_stages`.*pass them in the launch"
    ):
        dsl["special_hinted"](src, dst, 300)
    assert not dst.any()


def load_module(tmp_path: Path) -> Any:
    """``SCRIPT`` as an imported module (Dynamo resolves a function's globals by module)."""
    import sys
    import types

    path = tmp_path / "ported_fourth_compiled.py"
    path.write_text(SCRIPT, encoding="utf-8")
    module = types.ModuleType("ported_fourth_compiled")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    exec(compile_source(path.read_bytes(), str(path)), module.__dict__)
    return module


needs_compile = pytest.mark.skipif(
    not hasattr(torch.compiler, "substitute_in_graph"), reason="needs PyTorch 2.6 or later"
)


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_reset_to_zero
@needs_compile
def test_reset_to_zero_inside_torch_compile_leaves_one_launchs_sum(
    tmp_path: Path, fresh_dynamo: None
) -> None:
    """Inductor refuses ``reset_to_zero`` inside ``torch.compile`` ("Only configs, keys, and
    restore_value are supported"). A tunedsl site with ``reset_to_zero`` traces with
    ``fullgraph=True``: the accumulators are zeroed before each repetition of the tuning
    and the compiled function returns one launch's sums, like the eager one, on the call
    that tunes and on later ones."""
    module = load_module(tmp_path)
    x = torch.randn(300)
    want = x.sum() * 3
    assert torch.allclose(module.summed(x), want, atol=1e-4)
    fn = torch.compile(module.summed, fullgraph=True, backend="aot_eager")
    for _ in range(2):
        assert torch.allclose(fn(x), want, atol=1e-4)


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_triton_dtype
@needs_compile
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_triton_dtype_constexpr_inside_torch_compile_is_decided_per_dtype(
    tmp_path: Path, dynamic: bool, fresh_dynamo: None
) -> None:
    """Inductor: a kernel given a Triton dtype as a constexpr (``tl.float32``, then
    ``tl.bfloat16``) gives the eager result under ``torch.compile`` for each. Here each
    dtype is its own decision, eager and compiled agree, and the output has the dtype
    (float16 for bfloat16: Triton's interpreter stores bfloat16 wrongly, with or without
    tunedsl)."""
    import triton.language as tl

    module = load_module(tmp_path)
    x, y = torch.randn(4), torch.randn(4)
    fn = torch.compile(module.added, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    for dtype_torch, dtype_triton in ((torch.float32, tl.float32), (torch.float16, tl.float16)):
        eager = module.added(x, y, dtype_torch, dtype_triton)
        out = fn(x, y, dtype_torch, dtype_triton)
        assert out.dtype == dtype_torch and torch.equal(out, eager)
        assert torch.allclose(out.float(), (x + y).to(dtype_torch).float(), atol=0.01)
    sites = [v for k, v in vars(module).items() if k.startswith("__tunedsl_site_")]
    assert sum(len(site._by_digest) for site in sites) == 2


# ported from: triton-lang/triton python/test/unit/runtime/test_free_threading_autotune.py::test_autotuner_concurrent_keys_keep_listener_timings_together
# (the cold-miss lock covers one key: a key already decided is not held up by another's)
def test_a_decided_key_launches_while_another_key_of_the_site_tunes(dsl: dict[str, Any]) -> None:
    """While a thread tunes a new key of a site (held inside its ``pre_hook``), a call of a
    key the site decided before is launched at once, not queued behind the tuning: the
    hook waits for that call to finish, and both end."""
    src, dst = torch.randn(300), torch.zeros(300)
    assert dsl["plain"](dst, src, 300, nothing, nothing).source == "tuned"
    hit_done, tuning = threading.Event(), threading.Event()

    def pre(args: Any) -> None:
        tuning.set()
        if not hit_done.wait(60):
            raise RuntimeError("the decided key waited for the tuning")

    src2, dst2 = torch.randn(3000), torch.zeros(3000)
    thread, out = in_thread(dsl["plain"], dst2, src2, 3000, pre, nothing)
    assert tuning.wait(60)
    dst.zero_()
    hit = dsl["plain"](dst, src, 300, nothing, nothing)
    hit_done.set()
    thread.join(120)
    assert hit.source == "memory" and torch.equal(dst, src)
    assert "error" not in out, out.get("error")
    assert out["result"].source == "tuned" and torch.equal(dst2, src2)


# --- Kernel Tuner: restrictions that name a parameter the space does not have ---------------


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_restrictions
def test_a_constraint_reading_a_field_the_space_lacks_is_named() -> None:
    """Kernel Tuner checks each restriction against the tunable parameters and fails on
    one it cannot evaluate. A ``Space`` constraint that reads a misspelled field fails
    before anything is launched, naming the field and the fields there are."""
    from ported_kernels_more import copy

    from tunedsl import Space

    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises((UsageError, AttributeError), match=r"blok.*block"):
        autotune_launch(
            copy,
            space=Space(block=[32, 128], constraint=lambda c: c.blok >= 32),
            grid=lambda cfg: (cdiv(300, cfg.block),),
            args=(dst, src, 300),
            kwargs=lambda cfg: {"BLOCK": cfg.block},
            name="misspelled-constraint",
        )
    assert not dst.any()


# ported from: triton-lang/triton python/test/unit/runtime/test_specialize.py::test_specialize_impl
# (an int of 64 bits is ``i64``, another kernel than an ``i32`` one)
def test_a_64_bit_int_is_decided_apart_from_a_32_bit_one_in_one_key_bucket(
    dsl: dict[str, Any],
) -> None:
    """Triton passes an int that does not fit 32 bits as ``i64``, another kernel: in one
    ``key=`` bucket, 5 and 7 share a decision, ``2**40 + 3`` gets its own, and every value
    is stored whole."""
    got = []
    for v in (5, 2**40 + 3, 7, 2**40 + 5):
        dst = torch.zeros(16, dtype=torch.int64)
        got.append(dsl["filled"](dst, v))
        assert (dst[:8] == v).all(), v
    assert [r.source for r in got] == ["tuned", "tuned", "memory", "memory"]
    assert got[0].digest != got[1].digest


# --- Triton test_autotuner: restore and reset, on every path -------------------------------


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_reset_to_zero
# (pass_kwargs_to_kernel=True; the zeroing runs before the user's pre_hook, as Triton's
# default pre-hook does, and on a hit read from disk)
def test_reset_to_zero_runs_before_the_pre_hook_and_on_a_hit_of_a_new_process(
    tmp_path: Path,
) -> None:
    """Triton zeroes ``reset_to_zero`` arguments before each benchmark run, ahead of the
    user's ``pre_hook``: every ``pre_hook`` call sees both accumulators at zero (passed by
    keyword), and a new process that reads the decision from disk zeroes them before its
    launch too: each call leaves one launch's sums, however they were filled before."""
    path = tmp_path / "ported_fourth.py"
    seen: list[tuple[float, float]] = []

    def pre(args: Any) -> None:
        seen.append((args["out_a"].item(), args["out_b"].item()))

    x = torch.ones(300)
    for source in ("tuned", "disk"):
        a, b = torch.full((1,), 7.0), torch.full((1,), 7.0)
        res = load(path)["accumulated"](x, a, b, 300, pre)
        assert res.source == source and (a.item(), b.item()) == (300.0, 600.0)
        new_process()
    assert seen and set(seen) == {(0.0, 0.0)}


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_restore
# (on a strided view: pytorch/helion test/test_autotune_clone_alignment.py::test_storage_aliases_flags_and_partial_selection, "strided")
@pytest.mark.parametrize("restore", [["x"], None])
def test_restoring_a_strided_view_leaves_the_elements_between_alone(
    dsl: dict[str, Any], restore: Any
) -> None:
    """An in-place kernel on every other element of a buffer (a view of stride 2), with
    ``restore_value=["x"]`` or found in place by the watch: after tuning the view holds one
    launch's update, and the elements between, which no launch touches, keep their values."""
    from tunedsl.warn import forget

    forget()  # the warning is once a process: test_ported_autotuners_eighth.py's kernel of this name
    base = torch.arange(600, dtype=torch.float32)
    before = base.clone()
    view = base[::2]
    if restore is None:
        with pytest.warns(UserWarning, match=r"changes 'x' in place"):
            res = dsl["strided"](view, restore)
    else:
        res = dsl["strided"](view, restore)
    assert res.source == "tuned" and len(res.timings) == 2
    assert torch.equal(base[::2], before[::2] + 1) and torch.equal(base[1::2], before[1::2])


# ported from: pytorch/helion test/test_autotune_clone_alignment.py::test_storage_aliases_flags_and_partial_selection
@pytest.mark.parametrize("kind", ["strided", "broadcast", "empty"])
def test_a_workers_copy_of_a_strided_broadcast_or_empty_view_keeps_its_layout(kind: str) -> None:
    """Helion's private clones keep a view's strides and offset (``as_strided((3, 4), (9,
    2), 1)``, ``base[1:2].expand(3, 4)``, ``base[1:1]``). The worker of ``isolate=True``
    gets copies whose layout, as its ``pre_hook`` sees it, is the caller's, and the row copy
    measured there is the caller's copy."""
    from ported_kernels_more import copy_rows

    base = torch.arange(128, dtype=torch.float32)
    if kind == "strided":
        src = base.as_strided((3, 4), (9, 2), 1)
    elif kind == "broadcast":
        src = base[1:2].expand(3, 4)
    else:  # rows of no elements: the grid still launches, so the copy is measured
        src = base[1:1].view(4, 0)
    dst = torch.zeros(src.shape)
    want = contract(src)

    def pre(args: Any) -> None:
        if contract(args["src"]) != want:
            raise AssertionError(f"worker copy differs: {contract(args['src'])} != {want}")

    res = autotune_launch(
        copy_rows,
        space={"block": [4, 8]},
        grid=(src.shape[0],),
        args=(dst, src, src.shape[0], src.shape[1], src.stride(0), src.stride(1)),
        kwargs=lambda cfg: {"BLOCK": cfg.block},
        pre_hook=pre,
        isolate=True,
        name=f"worker-layout-{kind}",
    )
    assert res.source == "tuned" and torch.equal(dst, src)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_hooks
# and test_autotune_listener.py::test_autotune_listener_fresh ("fn is unwrapped to JITFunction")
def test_an_edited_inner_heuristic_is_tuned_again_in_a_new_process(tmp_path: Path) -> None:
    """A kernel under two ``@triton.heuristics`` layers is recorded under its function's
    name, and both layers are part of the kernel: a new process reuses the decision while
    neither changes, and tunes again once the inner one is edited (``PARTS`` 2 -> 4)."""
    path = tmp_path / "ported_fourth.py"
    src = torch.randn(300)
    first = load(path)["parts"](torch.zeros(300), src, 300)
    assert first.source == "tuned" and first.record is not None
    assert first.record.kernel["qualname"] == "copy_parts"
    new_process()
    assert load(path)["parts"](torch.zeros(300), src, 300).source == "disk"
    old = '@triton.heuristics({"PARTS": lambda args: 2})'
    assert SCRIPT.count(old) == 1
    new_process()
    dst = torch.zeros(300)
    edited = load(path, SCRIPT.replace(old, old.replace("2", "4")))["parts"](dst, src, 300)
    assert edited.source == "tuned" and torch.equal(dst, src)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_restore
# (pass_kwargs_to_kernel=True, through the plain API's kwargs= function)
@pytest.mark.parametrize("form", ["restore_value", "reset_to_zero"])
def test_restore_and_reset_of_a_tensor_a_kwargs_function_passes(form: str) -> None:
    """Triton restores ``src`` (or zeroes it) whether it is passed by position or by
    keyword. With ``autotune_launch``, a tensor a ``kwargs=`` function returns is restored
    (zeroed) like a positional one, before every launch of the tuning and on a hit: the
    in-place ``src += 1`` leaves one launch's update each call."""
    from ported_kernels_fourth import add_scale

    src = torch.zeros(1024)
    expected = 1.0
    for source in ("tuned", "memory"):
        res = autotune_launch(
            add_scale,
            space={"block": [32, 128]},
            grid=lambda cfg: (cdiv(1024, cfg.block),),
            kwargs=lambda cfg: {"src": src, "N": 1024, "SCALE": 1.0, "BLOCK": cfg.block},
            name=f"kwargs-{form}",
            **{form: ["src"]},
        )
        assert res.source == source
        assert torch.equal(src, torch.full_like(src, expected)), (source, src[:4])
        if form == "restore_value":
            expected += 1.0


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_hooks
# (Triton calls the hooks with ``{**named_args, **config.all_kwargs()}``: the arguments, the
# configuration's values and its launch options)
def test_hooks_see_each_configurations_launch_options_and_the_static_hints(
    dsl: dict[str, Any],
) -> None:
    """``pre_hook`` and ``post_hook`` get what Triton's get: the arguments by name, the
    configuration's kernel values (``BLOCK``) and its launch options, a space field
    (``num_warps``) and a static hint (``num_stages=3``) alike, for every configuration
    launched (the interpreter, which has no warps, launches one of the configurations that
    differ only in launch options and records the others as timed by it)."""
    pre_seen: set[tuple[Any, ...]] = set()
    post_seen: set[tuple[Any, ...]] = set()

    def pre(args: Any) -> None:
        pre_seen.add((args["N"], args["BLOCK"], args["num_warps"], args["num_stages"]))

    def post(args: Any, exception: Any = None) -> None:
        post_seen.add((args["N"], args["BLOCK"], args["num_warps"], args["num_stages"]))

    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["hinted"](dst, src, 300, pre, post)
    launched = {c for c, r in res.timings.items() if "timed as" not in (r.reason or "")}
    assert {c.block for c in launched} == {32, 128} and len(res.timings) == 4
    want = {(300, c.block, c.num_warps, 3) for c in launched}
    assert res.source == "tuned" and torch.equal(dst, src)
    assert pre_seen == want and post_seen == want
