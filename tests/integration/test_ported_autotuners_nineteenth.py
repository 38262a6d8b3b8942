"""A nineteenth batch of other autotuners' test suites, ported to tunedsl: Triton's
``reset_to_zero`` (python/test/unit/runtime/test_autotuner.py::test_reset_to_zero) on a
split-K product whose configurations store or add, added to a site after a tuning without it
(as Inductor's autotune cache is invalidated by a changed config, test_max_autotune.py);
FlagGems' in-place leaky ReLU (its ``restore_value=["input_ptr"]`` fix: input and output one
tensor); Liger-Kernel's and FlagGems' row kernels keyed on the dtype and on ``n_cols`` rounded
to a power of two; Kernel Tuner's cache file of other tunable parameters
(test/test_cache_file.py); Triton's perf model ranking what an early prune kept, with a
fractional ``top_k`` (test_prune_configs_fractional_top_k_after_early_prune,
test_prune_configs_fractional_top_k_keeps_one) and its ``early_config_prune`` made per call;
Helion's shape buckets (``static_shapes=False``) and ``key=`` function (test_cache.py);
Kernel Tuner's strategies evaluating no configuration twice (test/strategies).

Found and fixed: a configuration ``verify=`` rejected while its output was not zeroed stayed
rejected once ``reset_to_zero=`` was added. A split-K configuration adds into ``Y``; without
``reset_to_zero=["Y"]`` it adds onto what the caller's ``Y`` held and is rejected, while the
configuration that stores passes. Adding ``reset_to_zero=["Y"]`` (the fix Triton's test is
about) changed nothing: the record decided the key from disk, its check (the reference and
the tolerances) being the same, and the split-K configurations were never measured again; so
too with a zeroing ``pre_hook=`` added (Triton's ``Config`` pre-hook ported). The names
``reset_to_zero=`` zeroes, and whether a ``pre_hook=`` runs, are now part of the check a
record states
(test_a_rejection_made_without_the_output_zeroed_is_measured_again_once_it_is). Triton's
``early_config_prune`` ported as a prune a factory makes on every call from the caller's
value (``prune=at_most(limit)``, or ``functools.partial(keep, limit=limit)``) held a value no
key held, hidden in the factory's closure: the decision made under ``limit=128`` (BLOCK=128)
was launched from memory for ``limit=32``, whose prune keeps only BLOCK=32. The ``prune=``
expression (and, where it names a local, what the caller assigned to it) is now read from
the call's source, and a local of the caller it passes is named on the first call as a lambda
reading it is
(test_a_prune_made_per_call_from_a_local_is_named_not_launched_where_it_drops,
test_a_macros_prune_made_from_a_local_is_named). A small space whose search ``budget=4``
cut short (Kernel Tuner's time limit) decided the key for good once a later run dropped the
budget at ``effort="quick"``: the quick preset's 4 s, which applies to large spaces only, was
compared with the record's budget, so the configurations never measured stayed so; a site
without a budget now measures the rest
(test_a_search_its_budget_cut_short_is_finished_by_a_site_without_one).

Looked at and found sound (and kept so by a test): one tensor passed as input and output,
with ``restore_value`` on either name or none, ``verify=True``, in process and isolated, left
leaky-ReLU'd once by the tuning call and by a decided call; a ``key=`` of a ``torch.dtype``
and a rounded size sharing a decision between sizes of one bucket and Triton class, read back
from disk; a space with another axis tuned apart from the record of the space without it,
each read back; a perf model over an early prune's survivors measuring only its top share;
sizes of one ``key=`` bucket (Helion's ``static_shapes=False``) served one decision, each
launch's grid its own, also through the repeat-call path; a prune returning a configuration
twice, or rewriting two into one, measuring each once (Kernel Tuner's strategies).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through ``autotune_launch`` and DSL macros run by
``tunedsl run``.

Not ported, for want of a counterpart or because another file has it: Triton's
``test_exceed_threads`` (``num_warps=128``: a GPU's resource limit; the interpreter runs
every ``num_warps``), its IR overrides (GPU binaries) and its in-process change of
``triton.knobs.language.fp32_default`` (Triton's own in-memory kernel cache keeps the binary
built before it, as a decided key does; a new process keys the variable:
test_ported_autotuners_more.py); Helion's ``autotune_rebenchmark_threshold`` (tunedsl races
its leaders by confidence intervals, not a threshold) and its precompile processes
(test_process_compile.py); Kernel Tuner's cache-file schema tests (a record of wrong types is
a miss: tests/reliability) and its budget in evaluations (``max_fevals``: tunedsl's budget is
in seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
from runtime_helpers import new_api_process

from tunedsl import autotune_launch, cdiv
from tunedsl.errors import CacheWarning, UsageError

pytestmark = pytest.mark.needs_triton


def _statuses(res: Any, field: str) -> dict[Any, str]:
    return {cfg[field]: r.status for cfg, r in res.timings.items()}


def _zero_y(args: dict) -> None:
    args["Y"].zero_()


def _matvec(
    a: torch.Tensor, x: torch.Tensor, y: torch.Tensor, zeroing: str | None, name: str
) -> Any:
    from ported_kernels_nineteenth import matvec

    (m, k), reference = a.shape, a @ x
    return autotune_launch(matvec, space={"BLOCK_K": [32], "SPLIT_K": [1, 2, 4]},
                           grid=lambda c: (m, c.SPLIT_K), args=(a, x, y, m, k),
                           kwargs=lambda c: {"BLOCK_K": c.BLOCK_K, "SPLIT_K": c.SPLIT_K},
                           reset_to_zero=["Y"] if zeroing == "reset" else None,
                           pre_hook=_zero_y if zeroing == "pre_hook" else None,
                           verify=lambda args: {"Y": reference}, name=name)  # fmt: skip


@pytest.mark.parametrize("zeroing", ["reset", "pre_hook"])
def test_a_rejection_made_without_the_output_zeroed_is_measured_again_once_it_is(
    zeroing: str,
) -> None:
    """Triton zeroes ``reset_to_zero`` buffers before each benchmark run (or a
    ``Config``'s ``pre_hook`` does: tunedsl's ``pre_hook=``) so that a kernel adding into
    its output is judged on its own sums. Without it, the split-K configurations add onto
    the caller's ``Y`` (1000 everywhere) and ``verify=`` rejects them; the configuration
    that stores passes and is chosen. A new process that adds ``reset_to_zero=["Y"]`` (or
    the zeroing ``pre_hook=``) measures the split-K configurations again (they pass now)
    instead of keeping them out on the old verdict; the same check again reads its record."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_reset_to_zero
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py (autotune cache keyed on the config)
    torch.manual_seed(0)
    a, x = torch.randn(8, 256), torch.randn(256)
    y, name = torch.full((8,), 1000.0), f"split-k-{zeroing}"
    unzeroed = _matvec(a, x, y, None, name)
    assert unzeroed.source == "tuned" and unzeroed.config.SPLIT_K == 1
    assert _statuses(unzeroed, "SPLIT_K") == {1: "ok", 2: "rejected", 4: "rejected"}
    new_api_process()
    assert _matvec(a, x, y, None, name).source == "disk"  # the same check: its record
    new_api_process()
    y.fill_(1000.0)
    zeroed = _matvec(a, x, y, zeroing, name)
    assert zeroed.source == "tuned", "rejections made with Y unzeroed decided a site zeroing Y"
    assert set(_statuses(zeroed, "SPLIT_K").values()) == {"ok"}
    assert torch.allclose(y, _after_the_call(a @ x, zeroing, zeroed), rtol=1e-4, atol=1e-4)
    new_api_process()
    y.fill_(1000.0)
    again = _matvec(a, x, y, zeroing, name)
    assert again.source == "disk" and set(_statuses(again, "SPLIT_K").values()) == {"ok"}
    assert torch.allclose(y, _after_the_call(a @ x, zeroing, again), rtol=1e-4, atol=1e-4)


def _after_the_call(product: torch.Tensor, zeroing: str, res: Any) -> torch.Tensor:
    """``y`` after the call: ``reset_to_zero=`` zeroes it before the real launch too, while
    ``pre_hook=`` runs only while tuning (docs/runtime.md), so a split-K choice adds its sums
    onto the caller's 1000 there (whichever configuration wins the race)."""
    if zeroing == "pre_hook" and res.config.SPLIT_K > 1:
        return product + 1000.0
    return product


@pytest.mark.filterwarnings("ignore:.*changes 'inp', 'out' in place")  # restore_value=None
@pytest.mark.parametrize("isolate", [False, True])
@pytest.mark.parametrize("restore", [None, ["inp"], ["out"]])
def test_an_in_place_leaky_relu_is_applied_once(isolate: bool, restore: Any) -> None:
    """FlagGems' ``leaky_relu_`` passes one tensor as input and output, and its tuning applied
    the slope once per trial until ``restore_value=["input_ptr"]`` was added. All-negative
    values at an uncommon size, slope 0.5: the tuning call and a decided call each leave
    exactly ``x * 0.5``, whichever name ``restore_value`` gives (or none: the in-place watch
    puts the input back), checked by ``verify=True`` in process and in a worker."""
    # ported from: flagos-ai/FlagGems tests/test_unary_pointwise_ops.py::test_accuracy_leaky_relu_ (restore_value on the in-place autotuner)
    from ported_kernels_nineteenth import leaky_relu

    n = 1001

    def leaky(x: torch.Tensor) -> Any:
        return autotune_launch(leaky_relu, space={"BLOCK": [64, 128, 256]},
                               grid=lambda c: (cdiv(n, c.BLOCK),), args=(x, x, n, 0.5),
                               kwargs=lambda c: {"BLOCK": c.BLOCK}, restore_value=restore,
                               verify=True, isolate=isolate,
                               name=f"leaky-relu-in-place-{isolate}-{restore}")  # fmt: skip

    for source in ("tuned", "memory"):
        x = -torch.arange(1, n + 1, dtype=torch.float32) / 7
        expected = x * 0.5
        res = leaky(x)
        assert res.source == source
        assert torch.equal(x, expected)
    assert set(_statuses(res, "BLOCK").values()) == {"ok"}


def test_rows_keyed_by_dtype_and_columns_rounded_to_a_power_of_two() -> None:
    """Liger-Kernel and FlagGems read a row in one block of ``next_power_of_2(n_cols)``
    columns and key their configurations on it and on the dtype. Widths 100 and 120 share
    the bucket 128 (and Triton's class of an int not divisible by 16): the second is served
    from memory. 112 is divisible by 16, another Triton kernel: tuned. A float16 input of
    width 100: tuned. A new process reads each from disk. Every sum is right."""
    # ported from: linkedin/Liger-Kernel test/transformers/test_rms_norm.py (BLOCK_SIZE = next_power_of_2(n_cols))
    # ported from: flagos-ai/FlagGems tests/test_reduction_ops.py::test_accuracy_sum_dim (configs keyed on dtype and N)
    from ported_kernels_nineteenth import row_sum

    def summed(n_cols: int, dtype: torch.dtype) -> Any:
        x = torch.randn(10, n_cols, generator=torch.Generator().manual_seed(n_cols)).to(dtype)
        out = torch.zeros(10, dtype=dtype)
        block = triton.next_power_of_2(n_cols)
        res = autotune_launch(row_sum, space={"ROWS": [1, 2, 4]},
                              grid=lambda c: (cdiv(10, c.ROWS),), args=(x, out, 10, n_cols),
                              kwargs=lambda c: {"BLOCK": block, "ROWS": c.ROWS},
                              key=(x.dtype, block), name="rows-by-power-of-two")  # fmt: skip
        tol = 1e-2 if dtype == torch.float16 else 1e-5
        assert torch.allclose(out.float(), x.float().sum(dim=1), rtol=tol, atol=tol)
        return res

    calls = [(100, torch.float32), (120, torch.float32), (112, torch.float32), (100, torch.float16)]
    assert [summed(*c).source for c in calls] == ["tuned", "memory", "tuned", "tuned"]
    assert summed(100, torch.float32).key["user_key"] == ["torch.float32", 128]
    new_api_process()
    assert [summed(*c).source for c in calls] == ["disk", "memory", "disk", "disk"]


def test_a_space_with_another_parameter_keeps_a_record_of_its_own() -> None:
    """Kernel Tuner refuses a cache file written for other tunable parameters. tunedsl
    keeps one record per space (docs/runtime.md, "One record per space"): the space with
    ``num_warps`` added is measured whole, never decided by the record of the space without
    it, and each space reads its own record back in a new process."""
    # ported from: KernelTuner/kernel_tuner test/test_cache_file.py (a cache file for other tune_params)
    from ported_kernels_nineteenth import copy

    n = 300
    x, y = torch.randn(n), torch.zeros(n)

    def copied(space: dict) -> Any:
        y.zero_()
        res = autotune_launch(copy, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                              args=(x, y, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                              name="other-tune-params")  # fmt: skip
        assert torch.equal(y, x)
        return res

    narrow = {"BLOCK": [64, 128]}
    wide = {"BLOCK": [64, 128], "num_warps": [2, 4]}
    assert copied(narrow).source == "tuned"
    new_api_process()
    with pytest.warns(CacheWarning, match="not in the current space of this site"):
        res = copied(wide)
    assert res.source == "tuned" and len(res.timings) == 4
    assert {tuple(sorted(c.as_dict())) for c in res.timings} == {("BLOCK", "num_warps")}
    for space in (narrow, wide):
        new_api_process()
        again = copied(space)
        assert again.source == "disk" and again.config in again.space


#: The configurations the perf model estimated, as (BLOCK, num_warps).
ESTIMATED: list[tuple[int, int]] = []


def _perf_model(**kwargs: Any) -> float:
    """Triton calls the perf model with every argument and every field of the configuration."""
    ESTIMATED.append((kwargs["BLOCK"], kwargs.get("num_warps", 4)))
    return kwargs["BLOCK"] / kwargs.get("num_warps", 4)


def ranked_top_share(top_k: float, early: int) -> Any:
    """``prune_configs_by={"early_config_prune": keep the first early, "perf_model": ...,
    "top_k": top_k}`` as one ``prune=``, made once by a factory (its values fixed)."""

    def pruned(configs: list, args: dict) -> list:
        kept = configs[:early]
        ranked = sorted(kept, key=lambda c: _perf_model(**args, **c.as_dict()))
        return ranked[: max(1, int(len(kept) * top_k))]

    return pruned


def test_a_perf_model_ranks_what_an_early_prune_kept_and_measures_its_top_share() -> None:
    """Triton runs the perf model over the configurations ``early_config_prune`` kept and
    benchmarks the best ``top_k`` of them, a fraction of those kept (``int(6 * 0.5)``), at
    least one. As one ``prune=`` (docs/triton-autotune.md): of ten configurations the early
    prune keeps six, the model estimates those six alone, and the three it ranks best are
    measured and recorded, one of them chosen. ``top_k=0.3`` of two keeps one, launched
    without a measurement."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_prune_configs_fractional_top_k_after_early_prune
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_prune_configs_fractional_top_k_keeps_one
    from ported_kernels_nineteenth import copy

    n = 500
    x, y = torch.randn(n), torch.zeros(n)
    ESTIMATED.clear()

    space = {"BLOCK": [16, 32, 64, 128, 256], "num_warps": [1, 2]}
    res = autotune_launch(copy, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                          args=(x, y, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                          prune=ranked_top_share(0.5, 6), name="perf-model-after-early-prune")  # fmt: skip
    first_six = [(b, w) for b in (16, 32, 64, 128, 256) for w in (1, 2)][:6]
    assert sorted(ESTIMATED) == sorted(first_six)
    assert res.source == "tuned"
    assert sorted((c.BLOCK, c.num_warps) for c in res.timings) == [(16, 1), (16, 2), (32, 2)]
    assert (res.config.BLOCK, res.config.num_warps) in {(16, 1), (16, 2), (32, 2)}
    assert torch.equal(y, x)
    y.zero_()
    one = autotune_launch(copy, space={"BLOCK": [32, 128]}, grid=lambda c: (cdiv(n, c.BLOCK),),
                          args=(x, y, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                          prune=ranked_top_share(0.3, 2), name="fractional-top-k-keeps-one")  # fmt: skip
    assert one.source == "default" and one.config.BLOCK == 32 and one.timings == {}
    assert torch.equal(y, x)


def at_most(limit: int) -> Any:
    """An ``early_config_prune`` made by a factory: the blocks no larger than ``limit``."""
    return lambda configs, args: [c for c in configs if c.BLOCK <= limit]


def _copy_at_most(x: torch.Tensor, y: torch.Tensor, limit: int, key: Any = None) -> Any:
    from ported_kernels_nineteenth import copy

    n = x.numel()
    return autotune_launch(copy, space={"BLOCK": [32, 64, 128]}, grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(x, y, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                           prune=at_most(limit), key=key, name=f"prune-factory-{key is None}")  # fmt: skip


def _copy_made_before(x: torch.Tensor, y: torch.Tensor, limit: int) -> Any:
    from ported_kernels_nineteenth import copy

    n = x.numel()
    made = at_most(limit)
    return autotune_launch(copy, space={"BLOCK": [32, 64, 128]}, grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(x, y, n), kwargs=lambda c: {"BLOCK": c.BLOCK}, prune=made,
                           name="prune-made-before")  # fmt: skip


def test_a_prune_made_per_call_from_a_local_is_named_not_launched_where_it_drops() -> None:
    """Triton's ``early_config_prune`` is fixed when the kernel is declared; ported as
    ``prune=at_most(limit)``, a factory called on every call with the caller's ``limit``,
    each call's prune holds another limit that no key held: the decision made under
    ``limit=128`` (BLOCK=128) was launched from memory for ``limit=32``, whose prune keeps
    only BLOCK=32. The first call now names the local and the fix, as for a lambda reading
    it; with ``key=limit`` each limit gets its own decision within its prune."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_prune_configs (early_config_prune)
    x, y = torch.randn(100), torch.zeros(100)
    with pytest.raises(UsageError, match=r"reads `limit` \(128\) from the function that calls the site"):  # fmt: skip
        _copy_at_most(x, y, 128)
    with pytest.raises(UsageError, match=r"reads `limit` \(128\) from the function that calls"):
        _copy_made_before(x, y, 128)  # made a line before the call
    for limit, source in ((128, "tuned"), (32, "default"), (64, "tuned")):  # 32: one kept
        y.zero_()
        res = _copy_at_most(x, y, limit, key=limit)
        assert res.source == source and res.config.BLOCK <= limit
        assert torch.equal(y, x)
    assert _copy_at_most(x, y, 64, key=64).source == "memory"


PRUNE_FACTORY_SCRIPT = """\
import functools

import torch
from tunedsl import autotune, cdiv
from ported_kernels_nineteenth import copy


def at_most(limit):
    return lambda configs, args: [c for c in configs if c.BLOCK <= limit]


def keep(configs, args, limit):
    return [c for c in configs if c.BLOCK <= limit]


def copied(x, y, limit):
    n = x.numel()
    made = at_most(limit)
    autotune(space=dict(BLOCK=[32, 64, 128]), blocks=cdiv(n, $BLOCK), prune=PRUNE,
             copy(x, y, n, BLOCK=$BLOCK))


x = torch.randn(100)
for limit in (128, 32):
    y = torch.zeros(100)
    copied(x, y, limit)
    assert torch.equal(y, x)
print("ok")
"""


@pytest.mark.parametrize(
    ("prune", "named"),
    [
        ("at_most(limit)", "reads `limit` (128) from the function that calls the site"),
        ("functools.partial(keep, limit=limit)", "reads `limit` (128) from the function"),
        ("made", "reads `limit` (128) from the function"),  # made a line before the call
        ("at_most(128)", None),  # a value fixed for the process: runs
    ],
)
def test_a_macros_prune_made_from_a_local_is_named(
    tmp_path: Path, prune: str, named: str | None
) -> None:
    """The same in a macro, run by ``tunedsl run``: the ``prune=`` expression (a factory's
    call, a ``functools.partial``) passes the caller's ``limit`` to what makes the prune,
    and the first call names it, also when the prune is made a line before the call; the
    factory given a constant runs, each call right."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_prune_configs (early_config_prune)
    script = tmp_path / "prune_factory.py"
    script.write_text(PRUNE_FACTORY_SCRIPT.replace("PRUNE", prune), encoding="utf-8")
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-m", "tunedsl", "run", str(script)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    if named is None:
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "UsageError: " in done.stderr and "prune_factory.py:19:5 (copy)" in done.stderr
        assert named in done.stderr and "ok" not in done.stdout


def test_sizes_of_one_bucket_share_a_decision_and_each_launch_covers_its_own_size() -> None:
    """Helion with ``static_shapes=False`` keys a size by its bucket (0, 1, 2 or more) and
    serves one configuration to every size in it. As ``key=min(n, 2)`` over one buffer
    whose first ``n`` elements are copied: the first size tunes, the rest (smaller, larger,
    the same twice, as the repeat-call path sees them) are served from memory, and each
    launch's grid is computed from its own ``n``: exactly ``n`` elements written each time.
    A ``key=`` of the shape (Helion's ``key=shape_key``) tunes each shape apart."""
    # ported from: pytorch/helion test/test_autotuner.py (static_shapes=False shape buckets)
    # ported from: pytorch/helion test/test_cache.py::test_key_affects_cache_specialization
    from ported_kernels_nineteenth import copy

    x, y = torch.randn(1000), torch.zeros(1000)

    def prefix(n: int, key: Any) -> Any:
        y.zero_()
        res = autotune_launch(copy, space={"BLOCK": [32, 64]}, grid=lambda c: (cdiv(n, c.BLOCK),),
                              args=(x, y, n), kwargs=lambda c: {"BLOCK": c.BLOCK}, key=key,
                              name=f"bucketed-{type(key).__name__}")  # fmt: skip
        assert torch.equal(y[:n], x[:n]) and not y[n:].any()
        return res

    sizes = (100, 50, 300, 300, 999, 17, 17, 1000, 100)
    sources = [prefix(n, min(n, 2)).source for n in sizes]
    assert sources == ["tuned"] + ["memory"] * (len(sizes) - 1)
    shaped = [prefix(n, (n,)).source for n in (16, 32, 16)]
    assert shaped == ["tuned", "tuned", "memory"]


def test_a_prune_returning_a_configuration_twice_measures_it_once() -> None:
    """Kernel Tuner's strategies never evaluate a configuration twice. A ``prune=`` that
    returns one configuration twice (an early prune that appends a favourite), or rewrites
    two into one (``num_warps`` set to 2 for all), measures and records each configuration
    once, in process and in a worker; a new process reads the decision from disk."""
    # ported from: KernelTuner/kernel_tuner test/strategies/test_strategies.py (no configuration evaluated twice)
    from ported_kernels_nineteenth import copy

    n = 300
    x, y = torch.randn(n), torch.zeros(n)
    prunes = {
        "twice": lambda configs, args: [configs[0], configs[0], configs[1]],
        "rewritten": lambda configs, args: [{"BLOCK": c.BLOCK, "num_warps": 2} for c in configs],
    }

    def copied(kind: str, isolate: bool) -> Any:
        y.zero_()
        res = autotune_launch(copy, space={"BLOCK": [32, 64, 128], "num_warps": [2, 4]},
                              grid=lambda c: (cdiv(n, c.BLOCK),), args=(x, y, n),
                              kwargs=lambda c: {"BLOCK": c.BLOCK}, prune=prunes[kind],
                              key=(n, kind),  # prunes[kind]: the key holds what picks it
                              isolate=isolate, name=f"duplicates-{kind}-{isolate}")  # fmt: skip
        assert torch.equal(y, x)
        return res

    for isolate in (False, True):
        twice = copied("twice", isolate)
        assert sorted((c.BLOCK, c.num_warps) for c in twice.timings) == [(32, 2), (32, 4)]
        rewritten = copied("rewritten", isolate)
        assert sorted((c.BLOCK, c.num_warps) for c in rewritten.timings) == [
            (32, 2), (64, 2), (128, 2),
        ]  # fmt: skip
        assert all(r.status == "ok" for r in [*twice.timings.values(), *rewritten.timings.values()])
    new_api_process()
    assert {copied(kind, False).source for kind in prunes} == {"disk"}


def test_a_search_its_budget_cut_short_is_finished_by_a_site_without_one() -> None:
    """Kernel Tuner's strategies stop at their time budget, and a run without one measures
    the whole space. A small space (five blocks, each launch held one second by its
    ``pre_hook``) searched with ``budget=4`` stops before measuring them all, and its record
    says so. A new process without a budget, at ``effort="quick"`` (whose preset budget, 4 s,
    applies to large spaces only: a small one is measured whole, docs/runtime.md), measures
    the rest instead of taking the partial record's choice."""
    # ported from: KernelTuner/kernel_tuner test/strategies/test_strategies.py (time_limit budget)
    # ported from: pytorch/helion test/test_autotuner.py (autotune_effort="quick")
    from ported_kernels_nineteenth import copy

    n = 300
    x, y = torch.randn(n), torch.zeros(n)

    def copied(**options: Any) -> Any:
        y.zero_()
        res = autotune_launch(copy, space={"BLOCK": [16, 32, 64, 128, 256]},
                              grid=lambda c: (cdiv(n, c.BLOCK),), args=(x, y, n),
                              kwargs=lambda c: {"BLOCK": c.BLOCK},
                              pre_hook=lambda args: time.sleep(1.0), name="budget-cut-short",
                              **options)  # fmt: skip
        assert torch.equal(y, x)
        return res

    with pytest.warns(UserWarning, match="before its budget of 4 s ran out"):
        partial = copied(budget=4)
    assert partial.source == "tuned" and len(partial.timings) < 5
    new_api_process()
    whole = copied(effort="quick")
    assert whole.source == "tuned", "a search its budget cut short decided a site without one"
    assert len(whole.timings) == 5 and whole.record.budget_s is None
    new_api_process()
    assert copied(effort="quick").source == "disk"
