"""Other autotuners' test suites, ported to tunedsl: Triton's ``triton.autotune`` tests
(python/test/unit/runtime/test_autotuner.py), Helion's and Kernel Tuner's.

Each test names the behaviour it ports and where it comes from. Real kernels under Triton's
interpreter, called through DSL macros compiled by ``tunedsl.frontend`` (``SCRIPT``) or
through ``autotune_launch``. Where tunedsl deliberately differs (docs/runtime.md), the test
pins tunedsl's documented behaviour and says so.
"""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from tunedsl import Config, autotune_launch, cdiv
from tunedsl.errors import TunedslSyntaxError, UsageError
from tunedsl.frontend.compile import compile_source
from tunedsl.warn import forget

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import triton
import triton.language as tl
from tunedsl import autotune, cdiv
from ported_kernels import add_bias, add_one, convert, copy_2d, copy_small_only, maybe_copy, scale_bias, staged_copy, total, write_one
from shared_kernels import vadd_even


@triton.jit
def same(x):
    return x * 1.0


@triton.jit
def copy_spin(dst, src, N, SPIN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < N)
    for _ in range(SPIN):
        x = same(x)
    tl.store(dst + offs, x, mask=offs < N)


copy_kw = lambda dst, src, M, N: autotune(space=dict(bm=[32, 128]), blocks=cdiv(M, $bm), key=M,
    copy_2d(dst=dst, M=M, src=src, BLOCK_N=N, stride_m=N, BLOCK_M=$bm))
keyed_by_name = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), key=["N"],
    copy_spin(dst, src, N, SPIN=0, BLOCK=$block))
restore_pos = lambda src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), restore_value=["src"],
    add_one(src, N, BLOCK=$block))
restore_kw = lambda src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), restore_value=["src"],
    add_one(src=src, N=N, BLOCK=$block))
reset_pos = lambda src, dst, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), reset_to_zero=["src"],
    write_one(src, dst, N, BLOCK=$block))
reset_kw = lambda src, dst, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), reset_to_zero=["src"],
    write_one(src=src, dst=dst, N=N, BLOCK=$block))
restore_alias_kw = lambda src, dst, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), restore_value=["src"],
    write_one(src=src, dst=dst, N=N, BLOCK=$block))
total_hooked = lambda x, out, N, pre: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), pre_hook=pre,
    total(x=x, out=out, N=N, BLOCK=$block))
total_reset = lambda x, out, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block), reset_to_zero=["out"],
    total(x=x, out=out, N=N, BLOCK=$block))
staged = lambda src, dst, N, pre, post: autotune(space=dict(block=[4096, 32]), blocks=1, pre_hook=pre, post_hook=post,
    staged_copy(src, dst, N, N_STAGES=64 if N == 4096 else 4, BLOCK=$block))
add_even_site = lambda a, b, c, n, pre: autotune(space=dict(tile=[64, 128, 256]), blocks=cdiv(n, $tile), pre_hook=pre,
    vadd_even(a, b, c, n, TILE=$tile, EVEN=n % $tile == 0))
pruned = lambda dst, src, N, prune: autotune(space=dict(block=[32, 128, 256]), blocks=cdiv(N, $block), prune=prune,
    copy_spin(dst, src, N=N, SPIN=0, BLOCK=$block))
fastest = lambda dst, src, N: autotune(space=dict(spin=[400, 0, 200]), blocks=cdiv(N, 64),
    copy_spin(dst, src, N, SPIN=$spin, BLOCK=64))
hinted = lambda dst, src, N, pre: autotune(space=dict(num_warps=[2, 4], num_stages=[1, 3]), blocks=cdiv(N, 64),
    pre_hook=pre, copy_spin(dst, src, N, SPIN=0, BLOCK=64))
failing = lambda dst, src, N, post: autotune(space=dict(block=[256, 32]), blocks=cdiv(N, $block), post_hook=post,
    copy_small_only(dst, src, N, BLOCK=$block))
"""


def load(path: Path, text: str = SCRIPT) -> dict[str, Any]:
    """``text`` written to ``path``, expanded by the front end and run as a module."""
    path.write_text(text, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_sites", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    """The functions of ``SCRIPT``, as a module."""
    return load(tmp_path / "ported_sites.py")


def test_keyword_call_in_any_order_and_key_change_retunes(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_kwargs: a kernel launched with keyword arguments in any
    order; a new ``key`` value tunes again, the same one reuses the decision."""
    M, N = 256, 16
    src = torch.randn(M * N)
    dst = torch.zeros(M * N)
    first = dsl["copy_kw"](dst, src, M, N)
    assert first.source == "tuned" and torch.equal(dst, src)
    dst.zero_()
    half = dsl["copy_kw"](dst, src, M // 2, N)
    assert half.source == "tuned" and half.key != first.key
    assert torch.equal(dst[: M * N // 2], src[: M * N // 2]) and not dst[M * N // 2 :].any()
    dst.zero_()
    again = dsl["copy_kw"](dst, src, M, N)
    assert again.source == "memory" and again.config == first.config and torch.equal(dst, src)


def test_a_key_of_parameter_names_is_a_usage_error(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner (key=["M"] names arguments): tunedsl's key= is a value, so a
    list of parameter names would key every call alike; it is named with the fix."""
    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=r"key=\['N'\] names parameters.* key=N$") as info:
        dsl["keyed_by_name"](dst, src, 300)
    names = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert names[-2].endswith("ported_sites.py") and names[-1].endswith("site.py")  # the site
    assert not dst.any()


def test_a_key_of_one_parameter_name_as_a_string_is_a_usage_error() -> None:
    """Triton's ``key=["N"]`` ported as ``key="N"``: the string is the same on every call,
    so calls of every ``N`` would share the first one's decision; it is named with the fix."""
    from ported_kernels import add_one

    src = torch.zeros(300)
    with pytest.raises(UsageError, match=r"key='N' names a parameter.* key=N$"):
        autotune_launch(add_one, space={"block": [32, 128]}, grid=lambda c: (cdiv(300, c.block),),
                        args=(src, 300), kwargs=lambda c: {"BLOCK": c.block}, key="N")  # fmt: skip
    assert not src.any()


@pytest.mark.parametrize("form", ["restore_pos", "restore_kw"])
def test_restore_value_leaves_one_launch_applied(dsl: dict[str, Any], form: str) -> None:
    """Triton test_autotuner test_restore (positional and keyword arguments): with
    ``restore_value`` the tuning's launches are undone and the result is one launch's."""
    src = torch.zeros(1024)
    res = dsl[form](src, 1024)
    assert res.source == "tuned" and len(res.timings) == 2
    torch.testing.assert_close(src, torch.ones(1024))
    dsl[form](src, 1024)  # a hit restores nothing: one more launch
    torch.testing.assert_close(src, torch.full((1024,), 2.0))


@pytest.mark.parametrize("form", ["reset_pos", "reset_kw", "restore_alias_kw"])
@pytest.mark.parametrize("src_is_none", [False, True])
def test_reset_or_restore_of_an_alias_or_of_none(
    dsl: dict[str, Any], form: str, src_is_none: bool
) -> None:
    """Triton test_autotuner test_reset_to_zero / test_restore_with_none: ``reset_to_zero``
    or ``restore_value`` of an argument that is another's alias, or None (skipped), passed
    by position or keyword."""
    dst = torch.full((1024,), 2.0)
    res = dsl[form](None if src_is_none else dst, dst, 1024)
    assert res.source == "tuned"
    torch.testing.assert_close(dst, torch.ones(1024))


def test_hooks_and_reset_see_tensors_passed_by_keyword(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_hooks / test_reset_to_zero (keyword form): hooks and
    ``reset_to_zero`` reach a tensor the launch passes by keyword, in tuning and on hits."""
    x = torch.ones(300)
    out = torch.zeros(1)
    seen: list[tuple[int, bool]] = []

    def pre(args: dict[str, Any]) -> None:
        seen.append((args["BLOCK"], args["out"] is out))
        args["out"].zero_()

    res = dsl["total_hooked"](x, out, 300, pre)
    assert {b for b, _ in seen} == {32, 128} and all(same for _, same in seen)
    # One launch on the caller's data, as with isolate=True: the hook's writes are undone.
    assert res.source == "tuned" and out.item() == 300.0
    out.fill_(7.0)
    assert dsl["total_reset"](x, out, 300).source == "tuned" and out.item() == 300.0
    out.fill_(7.0)
    assert dsl["total_reset"](x, out, 300).source == "memory" and out.item() == 300.0


def test_hooks_per_configuration_with_a_heuristic_argument(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_hooks (with @triton.heuristics): tunedsl documents a
    deliberate difference, ``pre_hook`` before every repetition and ``post_hook`` once per
    configuration (docs/runtime.md, "The hook rule"); both see the heuristic's value."""
    src = torch.randn(4096)
    dst = torch.zeros(4096)
    pre: list[tuple[int, int]] = []
    post: list[tuple[int, Any]] = []
    res = dsl["staged"](
        src,
        dst,
        4096,
        lambda args: pre.append((args["BLOCK"], args["N_STAGES"])),
        lambda args, exception: post.append((args["BLOCK"], exception)),
    )
    assert res.source == "tuned" and torch.equal(dst, src)
    assert sorted(post, key=lambda p: p[0]) == [(32, None), (4096, None)]
    assert {b for b, _ in pre} == {32, 4096} and {s for _, s in pre} == {64}


def test_an_error_in_pre_hook_stops_the_tuning(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner (only OutOfResources-like errors skip a config; a hook's error
    propagates): a ``pre_hook`` that raises under one configuration stops the tuning with
    an error naming the hook, instead of dropping that configuration in silence."""
    src, dst = torch.randn(4096), torch.zeros(4096)

    def pre(args: dict[str, Any]) -> None:
        if args["BLOCK"] == 32:
            raise KeyError("SPLIT_K")

    with pytest.raises(UsageError, match=r"pre_hook= raised KeyError: 'SPLIT_K' \(at .*py:\d+\)"):
        dsl["staged"](src, dst, 4096, pre, None)
    assert not dst.any()  # the caller's data, as before the call


def test_a_heuristic_of_the_configuration_is_computed_per_configuration(
    dsl: dict[str, Any],
) -> None:
    """Triton @triton.heuristics (EVEN_K-style flags of META): a keyword computed from a
    configuration field is recomputed for every configuration tried and launched."""
    n = 192  # a multiple of 64 only: EVEN (unmasked) is right for tile=64 alone
    a, b = torch.randn(n), torch.randn(n)
    seen: dict[int, bool] = {}
    c = torch.zeros(n)
    res = dsl["add_even_site"](a, b, c, n, lambda args: seen.update({args["TILE"]: args["EVEN"]}))
    assert seen == {64: True, 128: False, 256: False}
    assert all(r.status == "ok" for r in res.timings.values())
    torch.testing.assert_close(c, a + b)


def test_prune_sees_named_arguments_and_one_kept_configuration_is_not_benchmarked(
    dsl: dict[str, Any],
) -> None:
    """Triton test_autotuner test_prune_configs / test_pruned_single_config_skips_benchmark:
    ``prune`` gets the configurations and the call's arguments by name (keywords too); one
    configuration kept is launched as is, never measured."""
    src, dst = torch.randn(300), torch.zeros(300)
    seen: list[tuple[list[int], set[str], int]] = []

    def prune(configs: list[Config], args: dict[str, Any]) -> list[Config]:
        seen.append(([c.block for c in configs], set(args), args["N"]))
        return [configs[1]]

    res = dsl["pruned"](dst, src, 300, prune)
    assert seen[-1] == ([32, 128, 256], {"dst", "src", "N", "SPIN"}, 300)
    assert res.config == Config(block=128) and res.source == "default" and res.record is None
    assert torch.equal(dst, src)


def test_prune_as_a_perf_model_with_top_k(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_prune_configs (perf_model, top_k): ``prune`` ranking by a
    model and keeping the top k is how tunedsl spells it; only those k are measured."""
    src, dst = torch.randn(300), torch.zeros(300)

    def top_2(configs: list[Config], args: dict[str, Any]) -> list[Config]:
        return sorted(configs, key=lambda c: -c.block)[:2]  # the model: bigger is faster

    res = dsl["pruned"](dst, src, 300, top_2)
    assert set(res.timings) == {Config(block=256), Config(block=128)}
    assert res.config in res.timings and torch.equal(dst, src)


def test_prune_keeping_nothing_is_a_usage_error(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_prune_all_configs: a prune that keeps no configuration is
    an error saying it must keep one (Triton: "should return at least one config")."""
    src, dst = torch.randn(300), torch.zeros(300)

    def nothing(configs: list[Config], args: dict[str, Any]) -> list[Config]:
        return []

    with pytest.raises(UsageError, match=r"prune=.*nothing returned no configuration"):
        dsl["pruned"](dst, src, 300, nothing)
    assert not dst.any()


@pytest.mark.parametrize(("name", "instead"), [("do_bench", "timing="), ("warmup", "effort=")])
def test_tritons_bench_options_name_their_counterparts(
    tmp_path: Path, name: str, instead: str
) -> None:
    """Triton test_autotuner (do_bench= override, warmup=/rep=): a deliberate difference,
    tunedsl takes neither (docs/runtime.md, "Benchmarking"); each is refused, in the macro
    and in autotune_launch, with the tunedsl option to use instead."""
    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=f"`{name}=` is triton.autotune's; in tunedsl: {instead}"):
        tune_field(load(tmp_path / "s.py")["copy_spin"], "spin", [0, 1], (dst, src, 300),
                   name=f"triton-{name}", **{name: lambda *a: 1})  # fmt: skip
    text = (
        SCRIPT + f"bad = lambda n: autotune(space=dict(b=[1, 2]), blocks=$b, {name}=1, f(n, $b))\n"
    )
    with pytest.raises(TunedslSyntaxError, match=f"unknown keyword `{name}=`") as info:
        load(tmp_path / "bad.py", text)
    assert f"in tunedsl: {instead}" in str(info.value)


def test_the_fastest_configuration_is_chosen(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner (the bench picks the minimum), Kernel Tuner's best config: the
    configuration chosen is the one with the lowest measured time, not the first one."""
    src, dst = torch.randn(64), torch.zeros(64)
    res = dsl["fastest"](dst, src, 64)
    ok = {c: r.median_ms for c, r in res.timings.items() if r.status == "ok"}
    assert len(ok) == 3 and res.config == min(ok, key=ok.__getitem__)
    assert res.config == Config(spin=0) and torch.equal(dst, src)


def test_num_warps_and_num_stages_are_launch_options(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner (Config(num_warps=..., num_stages=...)): space fields named
    like launch hints are launch options, never kernel arguments; hooks see them."""
    src, dst = torch.randn(300), torch.zeros(300)
    seen: set[tuple[int, int]] = set()
    res = dsl["hinted"](dst, src, 300, lambda a: seen.add((a["num_warps"], a["num_stages"])))
    assert torch.equal(dst, src) and len(res.timings) == 4
    # Under the interpreter, configurations that differ only in hints are timed once.
    assert seen and seen <= {(c.num_warps, c.num_stages) for c in res.timings}


def test_a_failing_configuration_is_skipped_and_post_hook_gets_its_error(
    dsl: dict[str, Any],
) -> None:
    """Triton test_autotuner test_exceed_threads / test_exceed_tmem (OutOfResources), Kernel
    Tuner's skipped failing config: the failing configuration is dropped with its reason and
    ``post_hook`` receives its exception; the working one is launched."""
    src, dst = torch.randn(300), torch.zeros(300)
    errors: dict[int, Any] = {}
    res = dsl["failing"](dst, src, 300, lambda a, exception: errors.update({a["BLOCK"]: exception}))
    assert res.config == Config(block=32) and torch.equal(dst, src)
    assert errors[32] is None and isinstance(errors[256], Exception)
    assert res.timings[Config(block=256)].status == "failed"


def test_a_dtype_constexpr_gets_its_own_decision(dsl: dict[str, Any]) -> None:
    """Triton test_autotuner test_dtype_cache_results: a ``tl.dtype`` constexpr argument is
    part of the key; each dtype is tuned once and converts correctly."""
    import triton.language as tl

    src = torch.randn(300)
    got = []
    for dtype, torch_dtype in ((tl.float16, torch.float16), (tl.float32, torch.float32)) * 2:
        dst = torch.empty(300, dtype=torch_dtype)
        got.append(
            autotune_launch(
                dsl["convert"],
                space={"block": [64, 128]},
                grid=lambda cfg: (cdiv(300, cfg.block),),
                args=(dst, src, 300, dtype),
                kwargs=lambda cfg: {"BLOCK": cfg.block},
            )
        )
        torch.testing.assert_close(dst, src.to(torch_dtype))
    assert [r.source for r in got] == ["tuned", "tuned", "memory", "memory"]
    assert got[0].digest != got[1].digest


def tune_field(kernel: Any, field: str, values: list, args: tuple, **options: Any) -> Any:
    """``kernel`` tuned over one field, passed as its upper-case constexpr (and BLOCK=64);
    each caller names its own site (``name=``)."""
    return autotune_launch(
        kernel,
        space={field: values},
        grid=(cdiv(300, 64),),
        args=args,
        kwargs=lambda cfg: {field.upper(): cfg[field], "BLOCK": 64},
        **options,
    )


@pytest.mark.parametrize(("atol", "accepted"), [(0.1, True), (1e-4, False)])
def test_verify_against_a_reference_within_atol(
    dsl: dict[str, Any], atol: float, accepted: bool
) -> None:
    """Kernel Tuner test_core (answer= with atol=), Helion's accuracy check: a configuration
    whose output is off by 0.01 passes ``verify=fn`` under atol=0.1 and is rejected under
    atol=1e-4, and no warning takes that output for an in-place write."""
    x, out = torch.zeros(300), torch.zeros(300)
    reference = lambda inputs: {"out": inputs["x"].clone()}  # noqa: E731
    forget()  # warnings already given in this process are given again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = tune_field(dsl["add_bias"], "bias", [0.01, 0.0], (x, out, 300), verify=reference,
                         atol=atol, rtol=0.0, name=f"bias-{atol}")  # fmt: skip
    assert res.timings[Config(bias=0.01)].status == ("ok" if accepted else "rejected")
    assert not [w for w in caught if "in place" in str(w.message)]
    if not accepted:
        assert res.config == Config(bias=0.0) and not out.any()


def test_verify_true_compares_with_the_first_configuration(dsl: dict[str, Any]) -> None:
    """Helion's accuracy check compares with a baseline; tunedsl's ``verify=True`` compares
    with the first configuration that runs (a documented difference, docs/runtime.md "The
    verify rule"): when that one is wrong the right one is rejected, so ``verify=fn`` (the
    test above) is the baseline form."""
    x, out = torch.zeros(300), torch.zeros(300)
    res = tune_field(dsl["add_bias"], "bias", [0.01, 0.0], (x, out, 300), verify=True,
                     atol=1e-4, rtol=0.0, name="bias-first")  # fmt: skip
    assert res.timings[Config(bias=0.0)].status == "rejected" and res.config == Config(bias=0.01)


def test_verify_of_an_in_place_kernel_whose_first_configuration_is_wrong(
    dsl: dict[str, Any],
) -> None:
    """Helion test_autotuner (accuracy check of a kernel that mutates its input): the wrong
    configuration is rejected, the in-place write is still found and named, and the caller
    gets one launch of the right one on the original data."""
    x = torch.arange(300, dtype=torch.float32)
    original = x.clone()
    forget()
    with pytest.warns(UserWarning, match="changes 'x' in place"):
        res = tune_field(dsl["scale_bias"], "bias", [0.5, 0.0], (x, 300),
                         verify=lambda inputs: {"x": inputs["x"] * 2}, name="scale-bias")  # fmt: skip
    assert res.timings[Config(bias=0.5)].status == "rejected" and res.config == Config(bias=0.0)
    torch.testing.assert_close(x, original * 2)


@pytest.mark.parametrize("verify", ["reference", "first"])
def test_a_configuration_that_writes_nothing_is_not_passed_by_an_earlier_output(
    dsl: dict[str, Any], verify: str
) -> None:
    """Kernel Tuner test_core (outputs reset before each verification run): a configuration
    that never writes its output is rejected, not passed by the output an earlier
    configuration left in the buffer."""
    src, dst = torch.randn(300), torch.zeros(300)
    check = (lambda inputs: {"dst": inputs["src"].clone()}) if verify == "reference" else True
    res = tune_field(dsl["maybe_copy"], "write", [True, False], (dst, src, 300), verify=check,
                     name=f"maybe-{verify}")  # fmt: skip
    assert res.timings[Config(write=False)].status == "rejected"
    assert res.config == Config(write=True) and torch.equal(dst, src)


@pytest.mark.parametrize(
    "edit",
    [
        (
            "x = tl.load(src + offs, mask=offs < N)\n",
            "x = tl.load(src + offs, mask=offs < N) + 0\n",
        ),
        ("return x * 1.0", "return x * 1.0 + 0.0"),  # a @jit function the kernel calls
    ],
    ids=["kernel", "called-function"],
)
def test_an_edited_kernel_is_tuned_again_in_a_new_process(
    tmp_path: Path, edit: tuple[str, str]
) -> None:
    """Kernel Tuner's cache file / Helion's autotune cache (keyed on the kernel's source): a
    stored decision serves a new process while the kernel is the same, never once its
    source or a function it calls changed (the stored choice may not suit the new kernel)."""
    from tunedsl.runtime import verified

    path = tmp_path / "ported_sites.py"
    src, dst = torch.randn(300), torch.zeros(300)
    keep_all = lambda configs, args: configs  # noqa: E731
    assert load(path)["pruned"](dst, src, 300, keep_all).source == "tuned"
    verified.clear()  # what a new process starts without
    assert load(path)["pruned"](dst, src, 300, keep_all).source == "disk"
    assert SCRIPT.count(edit[0]) == 1
    dst.zero_()
    assert load(path, SCRIPT.replace(*edit))["pruned"](dst, src, 300, keep_all).source == "tuned"
    assert torch.equal(dst, src)
