"""A fifteenth batch of other autotuners' test suites, ported to tunedsl: Helion's autotuner
tests (test/test_autotuner.py: its configuration filter that drops or rewrites
configurations, its seed configurations in every search's first population, its random
seed, its time budget of zero, its accuracy check's tolerance chosen from the output's
dtype, float8 and float32 outputs side by side), Triton's test_autotuner.py
(``reset_to_zero`` of an optional argument passed as ``None``, an ``early_config_prune``
that keeps nothing) and Kernel Tuner's test_runners.py (a block size named
``block_dim_x``, checked against an answer with ``None`` entries) and
test_util_functions.py (restrictions computed with numpy).

Found and fixed: ``verify=`` without ``rtol=``/``atol=`` compared every float output within
1e-3, finer than a bfloat16 output's own precision (8 bits: one unit is 0.0078 at 1.5). Two
block sizes summing a row in another order store sums one bfloat16 unit apart, so the
second was rejected as wrong and the tuning chose among the others, with ``verify=True``
(compared with the first configuration) and with a reference computed in float32 alike. A
float output is compared within at least its dtype's precision now (its eps as ``rtol``;
float16's is below 1e-3, so only bfloat16 and float8 change), as Helion sets its tolerance
from the output's dtype; a tolerance given is kept
(test_a_bfloat16_output_one_unit_apart_is_no_mismatch,
test_a_tolerance_given_is_kept_for_a_bfloat16_output). A ``Space`` constraint written as
one numpy (or torch) expression over several of Kernel Tuner's restrictions returns an array
of truth values: numpy's "truth value of an array ... is ambiguous" was raised from inside
the space, naming neither the constraint nor the configuration; it is a ``UsageError`` at
the site naming both and ``bool(x.all())``
(test_a_constraint_answering_with_an_array_is_named).

Looked at and found sound: ``reset_to_zero`` naming an argument passed as ``None`` (skipped,
as Triton's pre-hook does; ``None`` and a tensor are two keys, each read back from disk); a
``prune=`` returning nothing, named in ``on`` and ``cached`` modes; a ``prune=`` dropping
the fastest configuration (never measured, never chosen, read back from disk) or rewriting
``num_warps`` (the rewritten configurations measured and recorded, read back while ``prune``
returns them, tuned again with a warning once it does not, and under ``mode="cached"`` the
space's first configuration launched rather than the stored rewritten one); ``default=``
in the first batch of the random, pattern and model searches over 400 configurations; the
random search's draws following ``seed=`` (the same seed draws the same configurations, as
far as the budget goes; another seed others); ``budget=0``, a negative or NaN budget and the
same in ``TUNEDSL_BUDGET`` refused before anything runs; Kernel Tuner's five block sizes
each verified against ``{"c": ref}``, and a stored choice that fails a wrong answer in a new
process not used. Also probed without a port of its own: ``seed=`` of -1, 2**32 and 2**70
in every search; ``seed=``, ``search=``, ``effort=``, ``mode=``, ``isolate=``, ``timing=``,
``rtol=`` and ``atol=`` of a wrong type or spelling (each a ``UsageError``); NaN outputs
under ``verify=`` (equal where the reference has them); boolean, string and ``None``
arguments to ``tl.constexpr`` and pointer parameters, each its own key; ``1``, ``True`` and
``1.0`` in one axis, three configurations.

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through ``autotune_launch``.

Not ported, for want of a counterpart or because another file has it: Helion's
differential evolution, LFBO and surrogate searches' internals (tunedsl's strategies are
its own: test_ported_autotuners_third.py and tests/unit/engine), its CuTe and Pallas
backends, its best-of-k trials, its benchmark providers and fork precompile (tunedsl's
measurers and isolated workers: test_isolated_measure.py), its ``HELION_ASSERT_CACHE_HIT``
and ``HELION_SKIP_CACHE`` (tunedsl has ``mode="cached"`` and no mode that skips writing);
Triton's ``ir_override`` (no counterpart), ``test_exceed_tmem`` and ``test_exceed_threads``
(out-of-resource failures of a GPU: under the interpreter every ``num_warps`` runs), its
``perf_model``/``top_k`` pruning (``prune=`` is one user function: docs/triton-autotune.md)
and its ``test_cache.py`` closure and recreated-kernel cases (the interpreter rewrites a
kernel from its source and drops its closure, a ``NameError`` in plain Triton too); Kernel
Tuner's simulation-mode runs over a cache file, ``smem_args`` and Bayesian strategies (no
counterpart).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import triton
from runtime_helpers import new_api_process, record_files

from tunedsl import CacheWarning, Config, Space, TuningError, UsageError, autotune_launch, cdiv
from tunedsl.warn import forget

pytestmark = pytest.mark.needs_triton


# --- Triton test_autotuner: reset_to_zero of an optional argument passed as None ------------


def fill(src: Any, dst: torch.Tensor, n: int, *, by_keyword: bool) -> Any:
    """Triton's ``test_reset_to_zero``: ``reset_to_zero=['src']`` on a kernel whose ``src``
    is optional; the launch passes it positionally or by keyword (``pass_kwargs_to_kernel``)."""
    from ported_kernels_fifteenth import fill_src_or_dst

    common: dict[str, Any] = dict(
        space={"BLOCK_SIZE": [32, 128]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
        reset_to_zero=["src"],
        name=f"triton-reset-none-{by_keyword}",
    )
    if by_keyword:
        return autotune_launch(
            fill_src_or_dst,
            kwargs=lambda cfg: {"src": src, "dst": dst, "N": n, "BLOCK_SIZE": cfg.BLOCK_SIZE},
            **common,
        )
    return autotune_launch(
        fill_src_or_dst,
        args=(src, dst, n),
        kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
        **common,
    )


@pytest.mark.parametrize("by_keyword", [False, True])
def test_reset_to_zero_skips_an_argument_passed_as_none(by_keyword: bool) -> None:
    """``reset_to_zero`` names ``src``, which some calls pass as ``None`` (an optional
    buffer): Triton's default pre-hook skips it. Here a call with ``src=None`` tunes and
    writes ones into ``dst``; a call with a tensor ``src`` is another key (``None`` and a
    tensor are told apart), tuned, its ``src`` zeroed before each launch and ending as ones,
    ``dst`` untouched; in a new process both keys are read from disk and do the same."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_reset_to_zero
    n = 1024
    for sources in (("tuned", "tuned"), ("disk", "disk")):
        dst = torch.full((n,), 2.0)
        res = fill(None, dst, n, by_keyword=by_keyword)
        assert res.source == sources[0] and res.key["args"]["src"] is None
        assert torch.equal(dst, torch.ones(n))
        src, dst = torch.full((n,), 3.0), torch.full((n,), 2.0)
        res = fill(src, dst, n, by_keyword=by_keyword)
        assert res.source == sources[1] and res.key["args"]["src"] is not None
        assert torch.equal(src, torch.ones(n)) and torch.equal(dst, torch.full((n,), 2.0))
        new_api_process()


# --- Triton test_autotuner: a prune that keeps nothing ----------------------------------------


def copy_site(dst: torch.Tensor, src: torch.Tensor, n: int, name: str, **options: Any) -> Any:
    from ported_kernels_fifteenth import copy

    return autotune_launch(
        copy,
        space=options.pop("space", {"BLOCK_SIZE": [32, 64, 128], "num_warps": [4]}),
        grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
        args=(dst, src, n),
        kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
        name=name,
        **options,
    )


@pytest.mark.parametrize("mode", ["on", "cached"])
def test_a_prune_that_keeps_nothing_is_named(mode: str) -> None:
    """Triton raises "No valid autotuner configs after pruning. `early_config_prune` should
    return at least one config." tunedsl's ``prune=`` returning an empty list is a
    ``UsageError`` naming ``prune=`` and what it must return, when tuning may run and when
    only stored records may be used (``mode="cached"``, where no configuration could be
    launched either); nothing is launched and no record is written."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_prune_all_configs
    n = 1024
    src, dst = torch.randn(n), torch.zeros(n)
    with pytest.raises(UsageError, match=r"prune=.* returned no configuration; it must return"):
        copy_site(dst, src, n, f"triton-prune-all-{mode}", prune=lambda configs, args: [],
                  mode=mode)  # fmt: skip
    assert not dst.any() and not record_files()


# --- Helion TestConfigFilter: a filter that drops or rewrites configurations ------------------


def test_a_prune_dropping_the_fastest_configuration_never_picks_it() -> None:
    """Helion's ``autotune_config_filter`` returning ``None`` for a configuration leaves it
    out of the tuning, and the winner is never a filtered one. tunedsl's ``prune=`` drops
    the widest block (under the interpreter, the one fewest programs run: the fastest): it
    is never measured, the record lists only what ``prune`` kept, the winner is one of them,
    and a new process with the same ``prune`` reads that decision from disk."""
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_config_filter_skips_filtered_configs
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_config_filter_affects_autotune_winner
    n = 4096
    seen: list[list[int]] = []

    def drop_wide(configs: list[Config], args: dict[str, Any]) -> list[Config]:
        seen.append([c.BLOCK_SIZE for c in configs])
        return [c for c in configs if c.BLOCK_SIZE < 128]

    for source in ("tuned", "disk"):
        src, dst = torch.randn(n), torch.zeros(n)
        res = copy_site(dst, src, n, "helion-filter-drop", prune=drop_wide)
        assert res.source == source and torch.equal(dst, src)
        assert res.config.BLOCK_SIZE in (32, 64)
        assert {c.BLOCK_SIZE for c in res.timings} == {32, 64}
        assert all(r.status == "ok" for r in res.timings.values())
        new_api_process()
    assert seen and all(s == [32, 64, 128] for s in seen)


def test_a_prune_rewriting_a_launch_option_is_measured_and_recorded_as_rewritten() -> None:
    """Helion's filter may return a modified configuration (``num_warps`` set to 2 for
    all): the rewritten ones are what is benchmarked. tunedsl's ``prune=`` returning
    configurations of its own: those are measured and recorded, the winner has
    ``num_warps=2``, and a new process whose ``prune`` returns them again reads it from
    disk. A ``prune`` that no longer rewrites makes the stored choice no candidate: the key
    is tuned again among the space's own configurations, and under ``mode="cached"`` the
    space's first configuration is launched, never the stored ``num_warps=2`` one."""
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_config_filter_can_override_config
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_config_filter_none_is_noop
    n = 4096

    def two_warps(configs: list[Config], args: dict[str, Any]) -> list[Config]:
        return [Config(BLOCK_SIZE=c.BLOCK_SIZE, num_warps=2) for c in configs]

    def keep(configs: list[Config], args: dict[str, Any]) -> list[Config]:
        return list(configs)

    def run(prune: Any, **options: Any) -> Any:
        src, dst = torch.randn(n), torch.zeros(n)
        res = copy_site(dst, src, n, "helion-filter-override", prune=prune, **options)
        assert torch.equal(dst, src)
        return res

    res = run(two_warps)
    assert res.source == "tuned" and res.config.num_warps == 2
    assert {c.num_warps for c in res.timings} == {2} and len(res.timings) == 3
    new_api_process()
    res = run(two_warps)
    assert res.source == "disk" and res.config.num_warps == 2
    new_api_process()
    # The stored choice was prune='s own, never in the space: "not in the current space"
    # implied the space had changed.
    with pytest.warns(CacheWarning) as caught:
        res = run(keep, mode="cached")
    (text,) = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert re.search(r"chose Config\(BLOCK_SIZE=\d+, num_warps=2\), which is neither", text)
    assert "among those prune= returns for this key" in text, text
    assert "not in the current space" not in text, text
    assert text.endswith("; not used"), text  # mode="cached" tunes nothing: not "tuning again"
    assert res.source == "default" and res.config == Config(BLOCK_SIZE=32, num_warps=4)
    new_api_process()
    forget()  # the warning, given again where tuning is on, says so (the record timed only
    # prune='s rewritten configurations, none of this space's)
    with pytest.warns(CacheWarning, match=r"among those prune= .*; tuning again \(it timed none"):
        res = run(keep)
    assert res.source == "tuned" and res.config.num_warps == 4
    assert {c.num_warps for c in res.timings} == {4}


# --- Helion: seed configurations, the random seed and the budget -----------------------------

#: 4 block sizes x 100 variants: 400 configurations, more than a search measures whole.
LARGE = {"BLOCK_SIZE": [16, 32, 64, 128], "VARIANT": list(range(100))}


def variant_site(name: str, **options: Any) -> Any:
    from ported_kernels_fifteenth import copy_variant

    n = 256
    src, dst = torch.randn(n), torch.zeros(n)
    res = autotune_launch(
        copy_variant,
        space=Space(**LARGE),
        grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
        args=(dst, src, n),
        kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE, "VARIANT": cfg.VARIANT},
        name=name,
        **options,
    )
    assert torch.equal(dst, src)
    return res


@pytest.mark.parametrize("search", ["random", "pattern", "model"])
def test_the_default_configuration_joins_every_searchs_first_batch(search: str) -> None:
    """Helion's ``autotune_seed_configs`` are put into the initial population of its
    searches. tunedsl's ``default=`` joins the first batch of every search: over 400
    configurations with a budget of a fraction of a second, the random, pattern and model
    searches each measure the default (far from the space's first point) among far fewer
    than the space holds, and the record says which search, seed and budget chose."""
    # ported from: pytorch/helion test/test_autotuner.py::test_random_initial_population_includes_seed_configs
    # ported from: pytorch/helion test/test_autotuner.py::test_best_available_initial_population_includes_seed_configs
    seed_config = Config(BLOCK_SIZE=64, VARIANT=77)
    res = variant_site(f"helion-seed-{search}", search=search, budget=0.5, default=seed_config)
    assert res.source == "tuned"
    assert seed_config in res.timings and res.timings[seed_config].status == "ok"
    assert len(res.timings) < 400
    assert (res.record.strategy, res.record.seed, res.record.budget_s) == (search, 0, 0.5)


def test_the_random_seed_decides_which_configurations_are_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Helion's ``autotune_random_seed`` makes its random search repeatable. tunedsl's
    random search draws in the order ``seed=`` gives: tuned again from scratch
    (``TUNEDSL_FORCE_RETUNE=1``, a new process) with the same seed, the configurations of
    the run that drew fewer are among those of the other (the budget decides how far the
    draws go, the seed what they are); another seed draws others (the default joins every
    first batch, so it is drawn under each)."""
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_random_seed_from_settings
    default = Config(BLOCK_SIZE=16, VARIANT=0)
    drawn = []
    for seed in (3, 3, 4):
        res = variant_site("helion-random-seed", search="random", seed=seed, budget=0.5)
        assert res.source == "tuned" and res.record.seed == seed
        drawn.append(set(res.timings))
        monkeypatch.setenv("TUNEDSL_FORCE_RETUNE", "1")
        new_api_process()
    first, again, other = drawn
    assert first <= again or again <= first
    assert len(other) >= 3 and not other <= first | again
    assert default in first & again & other


@pytest.mark.parametrize("budget", [0, -1.5, float("nan")])
def test_a_budget_that_leaves_no_time_is_refused(
    budget: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helion's ``autotune_budget_seconds=0`` exhausts its budget at once. tunedsl's search
    always measures one configuration, so a budget of zero (or less, or not a number) is a
    ``UsageError`` naming ``budget=`` or ``TUNEDSL_BUDGET`` and the fix, before anything
    is launched; no record is written."""
    # ported from: pytorch/helion test/test_autotuner.py::test_budget_zero_immediately_exhausts
    # ported from: pytorch/helion test/test_autotuner.py::test_setting_from_env_var
    n = 300
    src, dst = torch.randn(n), torch.zeros(n)
    with pytest.raises(UsageError, match=rf"budget={budget} must be a positive, finite number"):
        copy_site(dst, src, n, "helion-budget-zero", budget=budget)
    monkeypatch.setenv("TUNEDSL_BUDGET", str(budget))
    with pytest.raises(UsageError, match=r"TUNEDSL_BUDGET='.*' must be a positive, finite"):
        copy_site(dst, src, n, "helion-budget-zero-env")
    assert not dst.any() and not record_files()


# --- Kernel Tuner test_runners: another block size name, checked against an answer ---------


def vadd_site(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, verify: Any) -> Any:
    from ported_kernels_fifteenth import vector_add

    n = a.numel()
    return autotune_launch(
        vector_add,
        space={"block_dim_x": [128 + 64 * i for i in range(5)]},
        grid=lambda cfg: (cdiv(n, cfg.block_dim_x),),
        args=(c, a, b, n),
        kwargs=lambda cfg: {
            "block_dim_x": cfg.block_dim_x,
            "PADDED": triton.next_power_of_2(cfg.block_dim_x),
        },
        verify=verify,
        name="kt-alt-block-names",
    )


def test_another_block_size_name_checked_against_an_answer_with_nones() -> None:
    """Kernel Tuner's vector add, its block size named ``block_dim_x``
    (``block_size_names=["block_dim_x"]``, ``grid_div_x=["block_dim_x"]``), checked
    against ``answer=[ref, None, None, None]`` (``None``: not compared): tunedsl's
    ``verify=`` returns ``{"c": ref}`` and leaves the others out. Every one of the five
    block sizes is measured and passes (``len(result) == len(tune_params[...])``), and
    ``c`` holds ``a + b``. In a new process given a wrong answer, the stored choice fails
    it (not used, with a warning) and every configuration is rejected: a ``TuningError``
    listing the five, and ``c`` is left as the caller gave it."""
    # ported from: KernelTuner/kernel_tuner test/test_runners.py::test_sequential_runner_alt_block_size_names
    torch.manual_seed(0)
    a, b = torch.randn(100), torch.randn(100)
    c = torch.zeros(100)
    res = vadd_site(c, a, b, lambda inputs: {"c": inputs["a"] + inputs["b"]})
    assert res.source == "tuned" and torch.equal(c, a + b)
    assert len(res.timings) == 5 and all(r.status == "ok" for r in res.timings.values())
    new_api_process()
    c = torch.zeros(100)
    wrong = lambda inputs: {"c": inputs["a"] + inputs["b"] + 5}  # noqa: E731
    with pytest.warns(CacheWarning, match="fails verify= here"), pytest.raises(TuningError) as e:
        vadd_site(c, a, b, wrong)
    assert str(e.value).count("block_dim_x=") == 5
    assert not c.any()


# --- Helion: the accuracy check's tolerance follows the output's dtype -----------------------

#: 0.375 of a float32 unit at 1.5: two of them make 0.75 unit together and nothing one at a time.
_S = 0.375 * 2.0**-23


def row_sums(out: torch.Tensor, verify: Any, name: str, **options: Any) -> Any:
    """Four rows of ``[1.5, -s, 2**-7, -s]`` summed by ``row_sum`` with 1, 2 or 4 lanes:
    one lane adds in order and drops each ``-s``; two lanes add ``-s + -s`` first and keep
    it, a float32 unit below ``1.5 + 2**-7``; stored as bfloat16 the two sums are one
    bfloat16 unit apart (the interpreter's cast truncates; a GPU's rounds to nearest, where
    a sum at a tie differs the same way)."""
    from ported_kernels_fifteenth import row_sum

    x = torch.tensor([[1.5, -_S, 2.0**-7, -_S]] * 4)
    return autotune_launch(
        row_sum,
        space={"BLOCK": [1, 2, 4]},
        grid=lambda cfg: (4,),
        args=(x, out, 4),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        verify=verify,
        name=name,
        **options,
    )


@pytest.mark.parametrize("verify", [True, "reference", "isolated"])
def test_a_bfloat16_output_one_unit_apart_is_no_mismatch(verify: Any) -> None:
    """Helion sets the accuracy check's tolerance from the output's dtype. A bfloat16
    output has 8 bits of precision: two block sizes summing a row in another order may
    store sums one bfloat16 unit apart (0.0078 at 1.5), far outside tunedsl's default
    1e-3, so the configuration was rejected as wrong, and the tuning chose among the
    others (with ``verify=True`` every configuration is compared with the first). With no
    ``rtol=``/``atol=`` given, a float output is compared within at least its own
    precision: every block size passes, against the first configuration (in this process
    or in an ``isolate=True`` worker) and against a reference computed in float32; a
    reference 2% off is still a mismatch."""

    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_fp8_automatic_tolerance
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_baseline_tolerance
    def reference(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"out": inputs["x"].sum(1)}

    out = torch.empty(4, dtype=torch.bfloat16)
    isolate = verify == "isolated"  # the check made in a worker process
    res = row_sums(out, reference if verify == "reference" else True, f"helion-bf16-{verify}",
                   isolate=isolate)  # fmt: skip
    assert {c.BLOCK: r.status for c, r in res.timings.items()} == {1: "ok", 2: "ok", 4: "ok"}
    assert torch.allclose(out.float(), torch.full((4,), 1.5 + 2.0**-7), rtol=0, atol=2.0**-7)
    new_api_process()
    with pytest.raises(TuningError, match=r"verify: output 'out' differs"):
        row_sums(out, lambda inputs: {"out": inputs["x"].sum(1) * 1.02}, "helion-bf16-off")


def test_a_tolerance_given_is_kept_for_a_bfloat16_output() -> None:
    """Helion's explicit tolerances override the automatic one. With ``rtol=``/``atol=``
    given, the bfloat16 sums one unit apart are compared within them: the two-lane block
    size is rejected (its reason names the tolerance given), the others pass; a float32
    output of the same sums (a float32 unit apart) passes within the default."""
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_fp8_explicit_tolerance_override
    out = torch.empty(4, dtype=torch.bfloat16)
    res = row_sums(out, True, "helion-bf16-given", rtol=1e-3, atol=1e-3)
    assert {c.BLOCK: r.status for c, r in res.timings.items()} == {
        1: "ok", 2: "rejected", 4: "ok"}  # fmt: skip
    assert "rtol=0.001, atol=0.001" in str(res.timings[Config(BLOCK=2)].reason)
    res = row_sums(torch.empty(4), True, "helion-fp32-default")
    assert all(r.status == "ok" for r in res.timings.values())


def test_a_float8_output_beside_a_float32_one_is_checked_exactly_where_it_agrees() -> None:
    """Helion's mixed float8 and float32 outputs: a cast to float8 and a doubling in
    float32, checked with ``verify=True``: both block sizes agree (no accuracy failure:
    the float8 values are equal, whatever the tolerance), and the float32 output is the
    doubled input."""
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_mixed_fp8_and_fp32_output
    from ported_kernels_fifteenth import cast_and_double

    x = torch.randn(64)
    out8, out32 = torch.empty(64, dtype=torch.float8_e4m3fn), torch.empty(64)
    res = autotune_launch(
        cast_and_double,
        space={"BLOCK": [16, 32]},
        grid=lambda cfg: (cdiv(64, cfg.BLOCK),),
        args=(x, out8, out32, 64),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        verify=True,
        name="helion-fp8-mixed",
    )
    assert all(r.status == "ok" for r in res.timings.values()) and len(res.timings) == 2
    # (The interpreter's float8 cast is not torch's rounding: the float8 values are the
    # kernel's, which both block sizes agreed on.)
    assert torch.isfinite(out8.float()).all() and torch.equal(out32, x * 2)


# --- Kernel Tuner: restrictions computed with numpy ------------------------------------------


@pytest.mark.parametrize("array", ["numpy", "torch"])
def test_a_constraint_answering_with_an_array_is_named(array: str) -> None:
    """Kernel Tuner's restrictions all hold or the configuration is skipped; written as one
    numpy (or torch) expression over several conditions, a constraint returns an array of
    truth values. Its truth was taken by ``bool()`` inside the space, which raised numpy's
    "truth value of an array with more than one element is ambiguous" (torch's "Boolean
    value of Tensor with more than one value"), naming neither the constraint nor the
    configuration. It is a ``UsageError`` at the site naming both, the array and the fix
    (``bool(x.all())``); nothing is launched and no record is written. An array of one
    value is one condition and is taken."""
    # ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_restrictions
    import numpy as np

    make = np.array if array == "numpy" else torch.tensor
    n = 300
    src, dst = torch.randn(n), torch.zeros(n)
    both = Space(BLOCK_SIZE=[32, 64, 128], constraint=lambda c: make([c.BLOCK_SIZE > 32, True]))
    with pytest.raises(UsageError, match=r"returned an array of shape \(2,\) for Config\(") as e:
        copy_site(dst, src, n, f"kt-array-{array}", space=both)
    assert "test_ported_autotuners_fifteenth.py:" in str(e.value) and "bool(x.all())" in str(
        e.value
    )
    assert not dst.any() and not record_files()
    one = Space(BLOCK_SIZE=[32, 64, 128], constraint=lambda c: make([c.BLOCK_SIZE > 32]))
    res = copy_site(dst, src, n, f"kt-array-one-{array}", space=one)
    assert res.source == "tuned" and {c.BLOCK_SIZE for c in res.timings} == {64, 128}
    assert torch.equal(dst, src)
