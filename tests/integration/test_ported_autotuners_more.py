"""More of other autotuners' test suites, ported to tunedsl: the parts of Triton's
``triton.autotune`` tests (python/test/unit/runtime/test_autotuner.py) that
test_ported_autotuners.py leaves out, PyTorch Inductor's coordinate-descent tuner and
autotune-cache tests, Helion's and Kernel Tuner's autotuner tests, and vLLM's tuned-config
lookup.

Each test names the test it ports. Real kernels under Triton's interpreter, through DSL
macros compiled by ``tunedsl.frontend`` (``SCRIPT``). Where tunedsl deliberately differs,
the test pins tunedsl's documented behaviour and says where it is documented.

Not ported, for want of a counterpart: Triton's ``ir_override`` configurations (tunedsl
launches the kernel's own source), ``prune_configs_by`` with a fractional ``top_k`` and its
two-stage early-prune/perf-model pipeline (``prune=`` is one function of the user's, whose
result is used as given), ``do_bench``'s ``warmup=``/``rep=``/``quantiles=`` (tunedsl sizes its
own measurements and records median, minimum and spread: docs/runtime.md "Benchmarking");
Inductor's radius-2 neighbours and per-field size limits (tunedsl's neighbours are one step
along one axis and its limits are the space's own values); Kernel Tuner's observers and
user metrics, and its ``verify=`` comparison function (tunedsl compares within rtol/atol).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_process, record_files

from tunedsl import CacheWarning, Config, Space, TuningError, UsageError
from tunedsl.frontend.compile import compile_source
from tunedsl.warn import forget

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import triton
import triton.language as tl
from tunedsl import Space, autotune, cdiv
from ported_kernels_more import add_one_both, copy, copy_any_n, copy_bump, copy_rows, sum_pair, to_int, total_two
from ported_kernels import add_bias, copy_small_only


@triton.heuristics({"EVEN": lambda args: args["N"] % args["BLOCK"] == 0})
@triton.jit
def copy_even(dst, src, N, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(dst + offs, tl.load(src + offs))
    else:
        tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def relu(x):
    return tl.maximum(x, 0.0)


@triton.jit
def negate(x):
    return -x


@triton.jit
def apply(dst, src, N, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, FN(tl.load(src + offs, mask=offs < N)), mask=offs < N)


restore_two = lambda x, y, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    restore_value=["x", "y"], add_one_both(x, y, N, BLOCK=$block))
reset_two = lambda x, a, b, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    reset_to_zero=["out_a", "out_b"], total_two(x, a, b, N, BLOCK=$block))
grown = lambda dst, src, N, pre: autotune(space=dict(block=BLOCKS), blocks=cdiv(N, $block),
    pre_hook=pre, mode=MODE, copy(dst, src, N, BLOCK=$block))
pruned = lambda dst, src, N, prune, pre: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    prune=prune, pre_hook=pre, copy(dst, src, N, BLOCK=$block))
heuristic = lambda dst, src, N: autotune(space=dict(block=[64, 128, 256]), blocks=cdiv(N, $block),
    copy_even(dst, src, N, BLOCK=$block))
restricted = lambda dst, src, N, keep, pre: autotune(
    space=Space(block=[16, 32, 64, 128, 256], num_warps=[1, 2, 4], constraint=keep),
    blocks=cdiv(N, $block), pre_hook=pre, copy(dst, src, N, BLOCK=$block))
rows = lambda dst, src: autotune(space=dict(block=[64, 128]), blocks=src.shape[0],
    copy_rows(dst, src, src.shape[0], src.shape[1], src.stride(0), src.stride(1), BLOCK=$block))
small_only = lambda dst, src, N: autotune(space=dict(block=[256, 32, 64]), blocks=cdiv(N, $block),
    copy_small_only(dst, src, N, BLOCK=$block))
grown_failing = lambda dst, src, N, post: autotune(space=dict(block=BLOCKS), blocks=cdiv(N, $block),
    post_hook=post, copy_small_only(dst, src, N, BLOCK=$block))
any_n = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), key=N // 64,
    copy_any_n(dst, src, N, BLOCK=$block))
epilogue = lambda dst, src, N, fn: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    apply(dst, src, N, FN=fn, BLOCK=$block))
pair = lambda dst, srcs, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    sum_pair(dst, srcs, N, BLOCK=$block))
hinted = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    num_warps=WARPS, copy(dst, src, N, BLOCK=$block))
off = lambda dst, src, N, pre: autotune(space=dict(block=[32, 64, 128]), blocks=cdiv(N, $block),
    mode="off", default=dict(block=64), pre_hook=pre, copy(dst, src, N, BLOCK=$block))
efforted = lambda dst, src, N, effort: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    effort=effort, copy(dst, src, N, BLOCK=$block))
biased = lambda x, out, N, ref: autotune(space=dict(bias=[0.5, 0.25]), blocks=cdiv(N, 64),
    verify=ref, add_bias(x, out, N, BIAS=$bias, BLOCK=64))
bumping = lambda dst, src, N: autotune(space=dict(bump=[False, True]), blocks=cdiv(N, 64),
    verify=True, copy_bump(dst, src, N, BUMP=$bump, BLOCK=64))
tiny_bias = lambda x, out, N, ref: autotune(space=dict(bias=[1e-9, 0.0]), blocks=cdiv(N, 64),
    verify=ref, rtol=0.0, atol=1e-12, add_bias(x, out, N, BIAS=$bias, BLOCK=64))
rounded = lambda x, out, N, ref: autotune(space=dict(round=[False, True]), blocks=cdiv(N, 64),
    verify=ref, rtol=0.0, atol=0.5, to_int(x, out, N, ROUND=$round, BLOCK=64))
"""

BLOCKS_LINE = "BLOCKS = [32, 128]\nWARPS = 4\nMODE = 'on'\n"


def load(path: Path, text: str = SCRIPT, head: str = BLOCKS_LINE) -> dict[str, Any]:
    """``head + text`` written to ``path``, expanded by the front end and run as a module."""
    path.write_text(head + text, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_more", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    return load(tmp_path / "ported_more.py")


# --- Triton test_autotuner: the cases test_ported_autotuners.py leaves out -------------------


def test_restore_value_of_two_arguments(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_restore, with several names in ``restore_value``: every
    named argument is put back before each launch, so the caller sees exactly one launch
    on each, in tuning and again (one more launch) on a hit."""
    x, y = torch.zeros(1000), torch.zeros(1000)
    res = dsl["restore_two"](x, y, 1000)
    assert res.source == "tuned" and len(res.timings) == 2
    torch.testing.assert_close(x, torch.ones(1000))
    torch.testing.assert_close(y, torch.full((1000,), 2.0))
    assert dsl["restore_two"](x, y, 1000).source == "memory"
    torch.testing.assert_close(x, torch.full((1000,), 2.0))
    torch.testing.assert_close(y, torch.full((1000,), 4.0))


def test_reset_to_zero_of_two_accumulators(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_reset_to_zero, with several names: each accumulator is
    zeroed before every launch (tuning and hits), so each holds one launch's sum."""
    x = torch.ones(300)
    a, b = torch.full((1,), 7.0), torch.full((1,), 7.0)
    assert dsl["reset_two"](x, a, b, 300).source == "tuned"
    assert (a.item(), b.item()) == (300.0, 600.0)
    a.fill_(7.0)
    b.fill_(7.0)
    assert dsl["reset_two"](x, a, b, 300).source == "memory"
    assert (a.item(), b.item()) == (300.0, 600.0)


def test_prune_may_return_a_configuration_of_its_own(tmp_path: Path) -> None:
    """Triton test_autotuner test_prune_configs (``early_config_prune`` may return configs
    it made, as Triton's matmul prune changes num_stages): such a configuration is measured
    and may be chosen; a new process whose prune returns it again reuses the record, one
    whose prune no longer returns it tunes again."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    made = lambda configs, args: [Config(block=256)]  # noqa: E731 (a configuration of its own)
    both = lambda configs, args: [*configs, Config(block=256)]  # noqa: E731
    seen: list[int] = []
    dst = torch.zeros(300)
    res = load(path)["pruned"](dst, src, 300, both, lambda a: seen.append(a["BLOCK"]))
    assert res.source == "tuned" and set(res.timings) == {Config(block=b) for b in (32, 128, 256)}
    assert set(seen) == {32, 128, 256} and torch.equal(dst, src)
    new_process()
    dst = torch.zeros(300)
    again = load(path)["pruned"](dst, src, 300, both, lambda a: None)
    assert again.source == "disk" and again.config == res.config and torch.equal(dst, src)
    # A prune that keeps only its own configuration launches it as is.
    new_process()
    dst = torch.zeros(300)
    alone = load(path)["pruned"](dst, src, 300, made, lambda a: None)
    assert alone.config == Config(block=256) and torch.equal(dst, src)


def test_a_single_kept_configuration_prints_no_tuning_report(
    dsl: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Triton test_autotuner test_pruned_single_config_skips_benchmark (with
    ``autotuning.print`` on, nothing is reported for a prune that keeps one config): under
    ``TRITON_PRINT_AUTOTUNING=1`` a call whose prune keeps one configuration prints no
    tuning report; one that tunes prints its key, winner and every configuration's time."""
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    src = torch.randn(300)
    one = dsl["pruned"](torch.zeros(300), src, 300, lambda cs, a: [cs[1]], lambda a: None)
    assert one.source == "default"
    out = capfd.readouterr()
    assert "tunedsl: tuned" not in out.out + out.err
    both = dsl["pruned"](torch.zeros(301), torch.randn(301), 301, lambda cs, a: cs, lambda a: None)
    report = "".join(capfd.readouterr())
    assert both.source == "tuned" and "tunedsl: tuned" in report
    assert f"winner: {both.config}" in report and "Config(block=32)" in report


def test_a_kernel_wrapped_in_heuristics_gets_each_configurations_value(
    dsl: dict[str, Any],
) -> None:
    """Triton test_autotuner test_hooks (``@triton.autotune`` over ``@triton.heuristics``):
    a kernel wrapped in ``@triton.heuristics`` is launched through the wrapper, whose
    heuristic is computed for every configuration tried and for the launch (N=192: EVEN,
    unmasked, is right for block=64 alone)."""
    src = torch.randn(192)
    dst = torch.zeros(192)
    res = dsl["heuristic"](dst, src, 192)
    assert all(r.status == "ok" for r in res.timings.values()) and len(res.timings) == 3
    assert torch.equal(dst, src)


def test_an_edited_heuristic_is_tuned_again_in_a_new_process(tmp_path: Path) -> None:
    """Triton's autotune cache (``cache_results``, keyed on the kernel's source) and Helion's
    (keyed on the kernel's code): a kernel's ``@triton.heuristics`` is part of the kernel
    it compiles, so a stored decision serves a new process only while the heuristic is the
    same; once it is edited, the stored choice may not suit the new kernel."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(192)
    assert load(path)["heuristic"](torch.zeros(192), src, 192).source == "tuned"
    new_process()
    assert load(path)["heuristic"](torch.zeros(192), src, 192).source == "disk"
    old = 'lambda args: args["N"] % args["BLOCK"] == 0'
    assert SCRIPT.count(old) == 1
    new_process()
    dst = torch.zeros(192)
    edited = load(path, SCRIPT.replace(old, "lambda args: False"))["heuristic"](dst, src, 192)
    assert edited.source == "tuned" and torch.equal(dst, src)


# --- Triton / Helion / Inductor: what counts as the same key ------------------------------


def test_the_same_layout_reuses_a_decision_and_another_layout_or_dtype_tunes(
    dsl: dict[str, Any],
) -> None:
    """Inductor's autotune cache (test_max_autotune: a new tensor of the same size, stride
    and dtype hits; a transposed input or another dtype is another benchmark key) and
    Helion's cache key (dtype and layout): a stored decision is reused where the compiled
    kernel is the same, never across strides or dtypes."""
    base = torch.randn(32, 48)
    results = []
    for src in (base, torch.randn(32, 48), base.t().contiguous().t(), base.half()):
        dst = torch.zeros(32, 48, dtype=src.dtype)
        results.append(dsl["rows"](dst, src))
        assert torch.equal(dst, src)
    assert [r.source for r in results] == ["tuned", "memory", "tuned", "tuned"]
    assert len({r.digest for r in results}) == 3


def test_an_int_triton_does_not_specialize_still_keys_by_its_class(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner (key=["N"]) with ``@triton.jit(do_not_specialize=["N"])``: one
    binary serves every N. tunedsl still keys an int by Triton's usual classes (1, a
    multiple of 16, other) within a ``key=`` bucket, the safe side: such a kernel tunes
    once per class, not once per bucket (docs/runtime.md, "The cache key"); every launch
    is right."""
    got = []
    for n in (17, 33, 16, 48, 1, 50):
        src, dst = torch.randn(n), torch.zeros(n)
        got.append(dsl["any_n"](dst, src, n).source)
        assert torch.equal(dst, src)
    assert got == ["tuned", "memory", "tuned", "memory", "tuned", "memory"]


def test_a_jit_function_argument_is_keyed_by_its_code_in_every_process(tmp_path: Path) -> None:
    """Helion test_cache test_kernel["matmul"] (an epilogue passed as an argument: the same
    epilogue hits the cache, another one misses): a ``@triton.jit`` function given to a
    ``tl.constexpr`` parameter is keyed by its name and code, so a new process reuses the
    decision for the same epilogue, another epilogue gets its own, and an edited one is
    tuned again (its printed form, an address under the interpreter, would match nothing
    in a new process, and only a name on a GPU, whatever the body)."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    expected = {"relu": src.clamp(min=0), "negate": -src}

    def run(module: dict[str, Any], name: str) -> str:
        dst = torch.zeros(300)
        res = module["epilogue"](dst, src, 300, module[name])
        assert torch.equal(dst, expected[name])
        return res.source

    first = load(path)
    assert [run(first, "relu"), run(first, "negate")] == ["tuned", "tuned"]
    new_process()
    again = load(path)
    assert [run(again, "relu"), run(again, "negate")] == ["disk", "disk"]
    new_process()
    edited = load(path, SCRIPT.replace("return -x", "return -x + 0.0"))
    assert [run(edited, "relu"), run(edited, "negate")] == ["disk", "tuned"]


def test_every_tensor_of_a_tuple_argument_is_in_the_key(dsl: dict[str, Any]) -> None:
    """Helion test_cache test_kernel["list_tensor"] and ["list_tensor_different_shapes"] (a
    list of tensors: same shapes hit, and the key holds every tensor's shape, not only the
    first's): a tuple argument is keyed element by element, so a second element of another
    shape or dtype is another decision."""
    n = 16
    a = torch.randn(n)
    pairs = [(a, torch.randn(n)), (torch.randn(n), torch.randn(n)), (a, torch.randn(2 * n)),
             (a, torch.randn(n, dtype=torch.float64))]  # fmt: skip
    got = []
    for first, second in pairs:
        dst = torch.zeros(n, dtype=second.dtype)
        got.append(dsl["pair"](dst, (first, second), n).source)
        torch.testing.assert_close(dst, (first + second[:n]).to(dst.dtype))
    assert got == ["tuned", "memory", "tuned", "tuned"]


def test_a_changed_static_hint_is_tuned_again_in_a_new_process(tmp_path: Path) -> None:
    """Helion's cache key (the settings a kernel is compiled with) and Inductor's (the
    launch's num_warps): a decision stored under ``num_warps=4`` is not served once the
    site's static hint is ``num_warps=8``; going back to 4 finds the first record."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    first = load(path)["hinted"](torch.zeros(300), src, 300)
    new_process()
    changed = load(path, head=BLOCKS_LINE.replace("WARPS = 4", "WARPS = 8"))["hinted"](
        torch.zeros(300), src, 300
    )
    assert (first.source, changed.source) == ("tuned", "tuned")
    assert changed.digest != first.digest
    new_process()
    assert load(path)["hinted"](torch.zeros(300), src, 300).source == "disk"


def test_a_tritons_cache_invalidating_variable_is_part_of_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton test_cache (``TRITON_DEFAULT_FP_FUSION`` and the other variables in Triton's
    cache key make another binary): a decision stored under one value is not served under
    another."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)
    first = load(path)["hinted"](torch.zeros(300), src, 300)
    new_process()
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    other = load(path)["hinted"](torch.zeros(300), src, 300)
    assert (first.source, other.source) == ("tuned", "tuned") and other.digest != first.digest


@pytest.mark.parametrize(
    ("name", "value"), [("PTXAS_OPTIONS", "--maxrregcount=32"), ("TRITON_DEBUG", "1")]
)
def test_a_variable_triton_reads_into_its_compile_options_is_part_of_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """``PTXAS_OPTIONS`` and ``TRITON_DEBUG`` change the code Triton compiles (ptxas's
    flags; device asserts and debug code) through the compile options, which Triton's own
    cache key covers but its list of cache-invalidating variables does not: a decision
    tuned under one was served without it, and the other way round."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    monkeypatch.delenv(name, raising=False)
    first = load(path)["hinted"](torch.zeros(300), src, 300)
    new_process()
    monkeypatch.setenv(name, value)
    other = load(path)["hinted"](torch.zeros(300), src, 300)
    assert (first.source, other.source) == ("tuned", "tuned") and other.digest != first.digest
    new_process()
    assert load(path)["hinted"](torch.zeros(300), src, 300).source == "disk"


@pytest.mark.parametrize("mode", ["on", "cached"])
def test_a_stored_choice_removed_from_the_space_is_never_launched(
    tmp_path: Path, mode: str
) -> None:
    """Inductor's autotune cache (runtime/autotune_cache.py: the stored best config is keyed
    on the hash of the configs offered, so a changed list is a miss): a record whose
    choice is no longer in the space is not used; with tuning on the key is tuned again
    among the new space, and in ``cached`` mode the space's first configuration is
    launched, never the removed one."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    first = load(path)["grown"](torch.zeros(300), src, 300, lambda a: None)
    gone = first.config.block
    kept = [b for b in (32, 128) if b != gone]
    new_process()
    head = BLOCKS_LINE.replace("[32, 128]", f"[{kept[0]}, 256]").replace("'on'", repr(mode))
    dst = torch.zeros(300)
    forget()  # warnings already given in this process are given again
    with pytest.warns(CacheWarning, match="not in the current space|no longer"):
        res = load(path, head=head)["grown"](dst, src, 300, lambda a: None)
    assert res.config.block != gone and torch.equal(dst, src)
    assert res.source == ("tuned" if mode == "on" else "default")


def test_the_timings_of_a_tuning_are_ordered_summaries(dsl: dict[str, Any]) -> None:
    """Triton test_testing / test_autotuner (``do_bench(..., quantiles=...)`` returns ordered
    quantiles; a configuration that fails is no timing): every measured configuration
    records a minimum no larger than its median, a spread and a repetition count;
    ``time_ms`` gives the median and None for a failed configuration."""
    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["small_only"](dst, src, 300)
    ok = {c: r for c, r in res.timings.items() if r.status == "ok"}
    assert set(ok) == {Config(block=32), Config(block=64)} and torch.equal(dst, src)
    for c, r in ok.items():
        assert 0 < r.min_ms <= r.median_ms and r.spread >= 0 and r.reps >= 1
        assert res.time_ms(c) == r.median_ms
    assert res.timings[Config(block=256)].status == "failed"
    assert res.time_ms(Config(block=256)) is None and res.time_ms() == ok[res.config].median_ms


# --- Kernel Tuner: restrictions, cache files ----------------------------------------------


def test_a_restriction_keeps_out_the_configurations_it_rejects(dsl: dict[str, Any]) -> None:
    """Kernel Tuner test_core / test_util (``restrictions=``: a configuration that breaks
    one is never compiled or run): a ``Space`` constraint, given to the DSL's ``space=``,
    keeps such configurations out of the launches and the record."""
    src, dst = torch.randn(300), torch.zeros(300)
    seen: set[tuple[int, int]] = set()
    keep = lambda c: c.block // c.num_warps >= 32  # noqa: E731
    res = dsl["restricted"](dst, src, 300, keep, lambda a: seen.add((a["BLOCK"], a["num_warps"])))
    allowed = {Config(block=b, num_warps=w) for b in (16, 32, 64, 128, 256) for w in (1, 2, 4)}
    allowed = {c for c in allowed if keep(c)}
    assert set(res.timings) == allowed and res.config in allowed
    assert seen and all(b // w >= 32 for b, w in seen) and torch.equal(dst, src)


def test_a_restriction_that_keeps_nothing_is_a_usage_error(dsl: dict[str, Any]) -> None:
    """Kernel Tuner (restrictions that leave no configuration: "no valid configurations"):
    a constraint that rejects the whole space is an error naming it, and nothing runs."""
    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match="constraint"):
        dsl["restricted"](dst, src, 300, lambda c: False, lambda a: None)
    assert not dst.any()


def test_a_grown_space_measures_the_new_configuration_and_only_the_leaders_again(
    tmp_path: Path,
) -> None:
    """Kernel Tuner test_cache_file (a tuning run resumed from its cache file benchmarks
    only the configurations the file lacks): the new configuration is measured and the
    stored timings of the others are kept, except the few leaders, which tunedsl races
    again side by side with it (timings of two processes are never compared: a deliberate
    difference, docs/runtime.md "Records and the cache CLI"); the record covers all six."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    old = [16, 32, 64, 128, 256]
    head = BLOCKS_LINE.replace("[32, 128]", str(old))
    first = load(path, head=head)["grown"](torch.zeros(300), src, 300, lambda a: None)
    assert first.source == "tuned" and len(first.timings) == 5
    new_process()
    seen: set[int] = set()
    dst = torch.zeros(300)
    grown = head.replace(str(old), str([*old, 512]))
    more = load(path, head=grown)["grown"](dst, src, 300, lambda a: seen.add(a["BLOCK"]))
    assert more.source == "tuned" and set(more.timings) == {Config(block=b) for b in [*old, 512]}
    assert 512 in seen and torch.equal(dst, src)
    kept = [Config(block=b) for b in old if b not in seen]
    assert len(seen - {512}) <= 3 and len(kept) >= 2  # at most the 3 leaders raced again
    for c in kept:  # not measured again: the first run's timing stands
        assert more.timings[c].median_ms == first.timings[c].median_ms


def test_a_failure_measured_here_is_not_compiled_again_when_the_space_grows(
    tmp_path: Path,
) -> None:
    """Kernel Tuner test_cache_file (a configuration the cache file records as failing is not
    compiled again when the run resumes): a configuration this user's record saw fail is a
    verdict for the key, so a grown space compiles the new configuration, not it, and the
    new record still says it failed. (A failure in a record from anywhere else is only a
    hint: docs/runtime.md, "Records and the cache CLI".)"""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    head = BLOCKS_LINE.replace("[32, 128]", "[256, 32]")
    prepared: list[tuple[int, bool]] = []
    post = lambda a, exception: prepared.append((a["BLOCK"], exception is not None))  # noqa: E731
    first = load(path, head=head)["grown_failing"](torch.zeros(300), src, 300, post)
    assert first.timings[Config(block=256)].status == "failed" and (256, True) in prepared
    new_process()
    prepared.clear()
    dst = torch.zeros(300)
    grown = load(path, head=head.replace("[256, 32]", "[256, 32, 16]"))["grown_failing"](
        dst, src, 300, post
    )
    assert (16, False) in prepared and 256 not in {b for b, _ in prepared}
    assert grown.timings[Config(block=256)].status == "failed" and torch.equal(dst, src)


def test_a_torn_record_is_a_miss_that_is_tuned_and_written_again(tmp_path: Path) -> None:
    """Kernel Tuner test_cache_file (a cache file cut off mid-entry by a crash is read up to
    the damage) and Helion's corrupted cache entry: a torn record is a miss with one
    warning, the key is tuned again, and the record written then serves the next process."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    assert load(path)["grown"](torch.zeros(300), src, 300, lambda a: None).source == "tuned"
    [record] = record_files()
    record.write_bytes(record.read_bytes()[: len(record.read_bytes()) // 2])
    new_process()
    dst = torch.zeros(300)
    with pytest.warns(CacheWarning):
        again = load(path)["grown"](dst, src, 300, lambda a: None)
    assert again.source == "tuned" and torch.equal(dst, src)
    json.loads(record.read_text())  # whole again
    new_process()
    assert load(path)["grown"](torch.zeros(300), src, 300, lambda a: None).source == "disk"


# --- Helion: effort levels, accuracy checks, config validation ----------------------------


def test_mode_off_launches_the_default_without_tuning_or_a_record(dsl: dict[str, Any]) -> None:
    """Helion test_autotuner (``autotune_effort="none"``: the default config, no search):
    tunedsl's counterpart is ``mode="off"``, which launches ``default=`` without measuring
    anything and writes no record."""
    src, dst = torch.randn(300), torch.zeros(300)
    seen: list[int] = []
    res = dsl["off"](dst, src, 300, lambda a: seen.append(a["BLOCK"]))
    assert res.source == "default" and res.config == Config(block=64) and res.record is None
    assert not seen and not record_files() and torch.equal(dst, src)


def test_mode_cached_on_a_miss_launches_the_first_configuration_and_says_so(
    tmp_path: Path,
) -> None:
    """Helion test_cache test_assert_cache_hit (``HELION_ASSERT_CACHE_HIT=1``: a miss raises
    instead of tuning): tunedsl's ``mode="cached"`` never tunes either, but a miss is no
    error, a deliberate difference (docs/runtime.md, "Modes"): it launches the first
    configuration, writes nothing, and says ``source="default"``; a hit says ``"disk"``."""
    path = tmp_path / "ported_more.py"
    src = torch.randn(300)
    cached = BLOCKS_LINE.replace("'on'", "'cached'")
    seen: list[int] = []
    dst = torch.zeros(300)
    miss = load(path, head=cached)["grown"](dst, src, 300, lambda a: seen.append(a["BLOCK"]))
    assert (miss.source, miss.config, seen, record_files()) == ("default", Config(block=32), [], [])
    assert torch.equal(dst, src)
    new_process()
    load(path)["grown"](torch.zeros(300), src, 300, lambda a: None)  # tuned and stored
    new_process()
    hit = load(path, head=cached)["grown"](torch.zeros(300), src, 300, lambda a: None)
    assert hit.source == "disk"


@pytest.mark.parametrize("effort", ["quick", "thorough"])
def test_an_effort_level_tunes_the_whole_small_space(dsl: dict[str, Any], effort: str) -> None:
    """Helion test_autotuner (effort levels "quick" / "full" change how long the search
    runs, never what is correct): each of tunedsl's ``effort=`` levels measures every
    configuration of a small space and launches the fastest."""
    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["efforted"](dst, src, 300, effort)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert len(res.timings) == 2 and torch.equal(dst, src)


def test_an_unknown_effort_level_is_a_usage_error_naming_the_levels(dsl: dict[str, Any]) -> None:
    """Helion test_autotuner (an unknown ``autotune_effort`` is refused, naming the
    choices): ``effort="full"`` (Helion's word) is an error listing tunedsl's levels."""
    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=r"effort.*full.*quick.*default.*thorough"):
        dsl["efforted"](dst, src, 300, "full")
    assert not dst.any()


def test_a_default_outside_the_space_is_a_usage_error(tmp_path: Path) -> None:
    """Helion test_autotuner (a config with a key the kernel does not have, or a value not in
    its spec, is rejected before any run): ``default=`` with a misspelled field or a value
    outside the space is an error naming it, and nothing runs."""
    src = torch.randn(300)
    for bad in ("dict(blok=64)", "dict(block=48)"):
        text = SCRIPT.replace("default=dict(block=64)", f"default={bad}")
        dst = torch.zeros(300)
        with pytest.raises(UsageError, match="default="):
            load(tmp_path / "ported_more.py", text)["off"](dst, src, 300, lambda a: None)
        assert not dst.any()


def test_every_configuration_failing_the_accuracy_check_is_a_tuning_error(
    dsl: dict[str, Any],
) -> None:
    """Helion test_autotuner (every config fails the accuracy check: an error, not a
    launch of a wrong one) and Kernel Tuner test_core (verification fails everywhere): a
    ``TuningError`` naming each rejected configuration; the caller's output is untouched."""
    x, out = torch.zeros(300), torch.zeros(300)
    with pytest.raises(TuningError) as info:
        dsl["biased"](x, out, 300, lambda inputs: {"out": inputs["x"].clone()})
    lines = str(info.value).splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == [
        "Config(bias=0.5)",
        "Config(bias=0.25)",
    ]
    assert all("differs from the reference: max abs difference" in line for line in lines)
    assert not out.any()


def test_a_configuration_that_also_writes_an_input_is_rejected(dsl: dict[str, Any]) -> None:
    """Helion test_autotuner test_accuracy_check_filters_bad_config_wrong_arg_mutation (a
    config whose output is right but which also changes an input is filtered out):
    ``verify=True`` compares every tensor argument, inputs included, so that configuration
    is rejected and the caller's input is left as it was."""
    src = torch.randn(300)
    original = src.clone()
    dst = torch.zeros(300)
    res = dsl["bumping"](dst, src, 300)
    assert res.timings[Config(bump=True)].status == "rejected"
    assert "'src'" in str(res.timings[Config(bump=True)].reason)
    assert res.config == Config(bump=False) and torch.equal(dst, src) and torch.equal(src, original)


def test_a_float64_output_is_compared_in_float64(dsl: dict[str, Any]) -> None:
    """Kernel Tuner test_core (verification compares the output as the kernel wrote it,
    float64 included) and Helion's accuracy check: a float64 configuration off by 1e-9 is
    rejected under atol=1e-12, not passed by a comparison rounded to float32."""
    x = torch.ones(300, dtype=torch.float64)
    out = torch.zeros(300, dtype=torch.float64)
    res = dsl["tiny_bias"](x, out, 300, lambda inputs: {"out": inputs["x"].clone()})
    assert res.timings[Config(bias=1e-9)].status == "rejected"
    assert res.config == Config(bias=0.0) and torch.equal(out, x)


def test_a_reference_in_a_wider_dtype_is_not_cast_down_to_the_output(dsl: dict[str, Any]) -> None:
    """Kernel Tuner test_core (a reference of another dtype than the output is never
    compared as if it had the output's; Kernel Tuner refuses it): an int32 output checked
    against a float reference within atol=0.5 passes when rounded (2 for 1.9) and is
    rejected when truncated (1), instead of the reference being truncated to 1 first."""
    x = torch.full((300,), 1.9)
    out = torch.zeros(300, dtype=torch.int32)
    res = dsl["rounded"](x, out, 300, lambda inputs: {"out": inputs["x"].clone()})
    assert res.timings[Config(round=False)].status == "rejected"
    assert res.config == Config(round=True) and torch.equal(
        out, torch.full((300,), 2, dtype=torch.int32)
    )


def test_a_reference_function_that_raises_stops_the_tuning_naming_it(
    dsl: dict[str, Any],
) -> None:
    """Helion test_autotuner test_autotune_baseline_fn_raises_on_failure ("Custom baseline
    function failed while computing baseline"): a ``verify=fn`` that raises stops the
    tuning with a ``UsageError`` naming ``verify=fn``, its error and where it was raised,
    before any configuration runs; the traceback ends at the user's frames."""
    import traceback

    def baseline(inputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("Baseline computation failed!")

    out = torch.zeros(300)
    with pytest.raises(
        UsageError,
        match=r"verify=fn raised RuntimeError: Baseline computation failed! \(at .*\.py:\d+\)",
    ) as info:
        dsl["biased"](torch.zeros(300), out, 300, baseline)
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert not any("/tunedsl/backends/" in f or "/tunedsl/engine/" in f for f in frames)
    assert not out.any()


def test_a_float8_output_is_checked_against_a_float32_reference() -> None:
    """Helion test_autotuner test_autotune_fp8_automatic_tolerance (fp8 outputs are checked
    against the baseline): a float8 output is compared with a float32 reference (torch
    promotes no float8 dtype, so the comparison must not ask it to); values float8 holds
    exactly pass at zero tolerance."""
    import triton.language as tl
    from ported_kernels import convert

    from tunedsl import autotune_launch, cdiv

    src = torch.tensor([0.5, 1.0, 1.5, 2.0, -3.0, 0.0]).repeat(50)
    dst = torch.zeros(300, dtype=torch.float8_e4m3fn)
    res = autotune_launch(
        convert,
        space={"block": [64, 128]},
        grid=lambda cfg: (cdiv(300, cfg.block),),
        args=(dst, src, 300, tl.float8e4nv),
        kwargs=lambda cfg: {"BLOCK": cfg.block},
        verify=lambda inputs: {"dst": inputs["src"].clone()},
        rtol=0.0,
        atol=0.0,
    )
    assert all(r.status == "ok" for r in res.timings.values()) and len(res.timings) == 2
    assert torch.equal(dst.float(), src)


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        (lambda inputs: {"out": None}, "is None"),
        (lambda inputs: {"out": inputs["x"][:10]}, r"has shape \(10,\), the output \(300,\)"),
    ],
    ids=["none", "shape"],
)
def test_a_reference_that_cannot_be_compared_is_a_usage_error(
    dsl: dict[str, Any], reference: Any, problem: str
) -> None:
    """Kernel Tuner test_core (_default_verify_function: an answer whose size differs from
    the kernel argument is a TypeError before anything is compared; a None entry is not
    compared): a ``verify=fn`` reference of None or of another shape is one error naming
    the output and the fix, before any configuration runs, instead of every configuration
    failing or being rejected for it. (Kernel Tuner's list needs None to skip an entry;
    tunedsl's dict leaves the name out, so None is taken for a forgotten ``return``.)"""
    x, out = torch.zeros(300), torch.zeros(300)
    seen: list[Any] = []
    with pytest.raises(UsageError, match=rf"verify=fn: the reference for 'out' {problem}; return"):
        dsl["biased"](x, out, 300, lambda inputs: seen.append(1) or reference(inputs))
    assert seen == [1] and not out.any()


# --- Inductor: coordinate descent ---------------------------------------------------------


class CostMeasurer:
    """A ``Measurer`` whose configuration costs ``cost(config)`` ms, as Inductor's
    coordinate-descent tests benchmark a function of the configuration."""

    compile_workers = 1

    def __init__(self, cost: Any) -> None:
        self.cost = cost
        self.prepared: list[Config] = []

    def prepare(self, configs: Any) -> Any:
        from tunedsl.engine.seams import Prepared

        for cfg in configs:
            self.prepared.append(cfg)
            yield Prepared(cfg)

    def sample(self, config: Config, reps: int) -> list[float]:
        return [self.cost(config)] * reps

    def close(self) -> None:
        pass


def test_pattern_search_walks_to_the_minimum_of_a_cost(tmp_path: Path) -> None:
    """Inductor test_coordinate_descent_tuner test_abs_function (the time is
    |XBLOCK - 15|, from XBLOCK=1 the tuner reaches 16): tunedsl's ``pattern`` search (a
    climb along one axis at a time) finds XBLOCK=16 on a log-scale axis, with RBLOCK
    tuned alike. With time left the search goes on restarting (until every point is
    measured here), but the climb reaches the best among its first few dozen points."""
    from tunedsl.engine.driver import run_search
    from tunedsl.engine.search import make_strategy
    from tunedsl.model.space import Axis

    space = Space(XBLOCK=Axis.pow2(1, 4096), RBLOCK=Axis.pow2(1, 4096), num_warps=[8])
    cost = lambda c: 1 + abs(c.XBLOCK - 15) + abs(c.RBLOCK - 100) / 10  # noqa: E731
    m = CostMeasurer(cost)
    out = run_search(space, make_strategy("pattern", seed=0), m, budget_s=5.0)
    best = Config(XBLOCK=16, RBLOCK=128, num_warps=8)
    assert out.chosen == best
    assert m.prepared.index(best) < 40  # 8 random starts, then the climb (of 169 points)


def test_a_space_without_neighbours_keeps_its_only_point(tmp_path: Path) -> None:
    """Inductor test_coordinate_descent_tuner test_no_neighbors (a field with no other
    value to try keeps its value) and test_get_neighbour_values: a one-value axis has no
    neighbours, a climb on it returns the one point, and an ordered axis's neighbours are
    one step either way (tunedsl's radius is 1, Inductor's default 2)."""
    from tunedsl.engine.driver import run_search
    from tunedsl.engine.search import make_strategy
    from tunedsl.model.space import Axis

    only = Space(XBLOCK=[1], num_warps=[8])
    assert list(only.neighbours(Config(XBLOCK=1, num_warps=8))) == []
    out = run_search(only, make_strategy("pattern"), CostMeasurer(lambda c: 1.0), budget_s=1.0)
    assert out.chosen == Config(XBLOCK=1, num_warps=8)
    two = Space(num_stages=Axis.ordered(range(1, 6)), num_warps=[1, 2, 4, 8])
    near = set(two.neighbours(Config(num_stages=2, num_warps=2)))
    assert {(c.num_stages, c.num_warps) for c in near} == {(1, 2), (3, 2), (2, 1), (2, 4)}


# --- vLLM: the nearest tuned batch size ---------------------------------------------------


def test_the_nearest_swept_size_is_nearest_in_log2_not_in_batch_rows() -> None:
    """vLLM fused_moe get_moe_configs (``configs[min(keys, key=lambda x: abs(x - M))]``:
    the tuned batch size nearest M in rows): tunedsl's nearest-key map compares sizes in
    log2 (docs/shapes.md, "2. Build"), a deliberate difference: between 16 and 64, M=36
    takes 64's pick (36/16 > 64/36), where vLLM takes 16's; M=31 takes 16's in both."""
    from tunedsl.model.rule_features import key_features
    from tunedsl.model.rule_near import nearest

    def point(m: int) -> dict[str, float]:
        key = {"args": {"a": {"dtype": "float16", "shape": [m, 512], "stride": "s1"}}}
        return key_features(key)[1]

    swept = [(point(16), 16), (point(64), 64)]
    vllm = lambda m: min((16, 64), key=lambda x: abs(x - m))  # noqa: E731
    assert (nearest(swept, point(36)), vllm(36)) == (64, 16)
    assert nearest(swept, point(31)) == vllm(31) == 16
    assert math.log2(36 / 16) > math.log2(64 / 36)
