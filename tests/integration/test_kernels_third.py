"""Kernels from outside the gallery (kernels_third.py), tuned through DSL macros compiled by
``tunedsl.frontend`` and run under Triton's interpreter, each checked against torch: the
decision each key gets, the data tuning leaves behind, and a stored decision that an edit
of a helper in a package must not serve."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tunedsl.errors import UsageError
from tunedsl.frontend.compile import compile_source

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
from tunedsl import autotune, cdiv
from kernels_third import (accumulate_pair, add_scaled, bias_act, double_pair, row_stats, scale_pair,
                           scale_rows, sums_pair)


def accumulate(total, x):
    n = x.numel()
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(n, $BLOCK),
                    accumulate_pair((total, x), n, BLOCK=$BLOCK))


def accumulate_restored(total, x):
    n = x.numel()
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(n, $BLOCK), restore_value=["pair"],
                    accumulate_pair((total, x), n, BLOCK=$BLOCK))


def doubled_in_place(x):
    n = x.numel()
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(n, $BLOCK), restore_value=["pair"],
                    scale_pair((x, n), BLOCK=$BLOCK))


def sums(x, total, squares):
    n = x.numel()
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(n, $BLOCK), reset_to_zero=["outs"],
                    sums_pair(x, (total, squares), n, BLOCK=$BLOCK))


def fits(configs, args):
    x, out = args["pair"]
    return [c for c in configs if c.BLOCK <= max(16, x.numel())]


def doubled_pruned(x, out):
    n = x.numel()
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(n, $BLOCK), prune=fits,
                    double_pair((x, out), n, BLOCK=$BLOCK))


def doubled_verified(x, out):
    n = x.numel()
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(n, $BLOCK), verify=["pair"],
                    double_pair((x, out), n, BLOCK=$BLOCK))


def stats(x, mean, rstd):
    rows, cols = x.shape
    return autotune(space=dict(BLOCK=[32, 64], num_warps=[1, 2]), blocks=rows, verify=True,
                    row_stats(x, mean, rstd, cols, x.stride(0), 1e-5, BLOCK=$BLOCK))


def epilogue(x, y, bias=None, **constexprs):
    rows, cols = x.shape
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                    bias_act(x, bias, y, x.numel(), cols, *x.stride(), y.stride(0),
                             BLOCK=$BLOCK, **constexprs))


def tripled(x, y):
    return autotune(space=dict(BLOCK=[32, 64], num_warps=[2, 8]), blocks=cdiv(x.numel(), $BLOCK),
                    scale_rows(x, y, x.numel(), BLOCK=$BLOCK))


def tripled_blocks(x, y):
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                    scale_rows(x, y, x.numel(), BLOCK=$BLOCK))


def axpy(y, x, a):
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(y.numel(), $BLOCK),
                    restore_value=["y", "x"], add_scaled(y, x, x.stride(0), a, y.numel(), BLOCK=$BLOCK))


def epilogue_keyed(x, y, key):
    rows, cols = x.shape
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK), key=key,
                    bias_act(x, None, y, x.numel(), cols, *x.stride(), y.stride(0), BLOCK=$BLOCK))
"""


def load(tmp_path: Path, name: str, text: str) -> dict[str, Any]:
    """The functions of a DSL script, as a fresh module (a new site, as in a new process)."""
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": name, "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    return load(tmp_path, "third_sites", SCRIPT)


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def test_tensors_written_in_place_inside_a_tuple_are_restored_while_tuning(dsl) -> None:
    # The in-place watch looked at tensor arguments only: every tuning launch added x once
    # more into the tensor passed inside the tuple, and the caller got a multiple of x (and
    # as many atomic sums) where the kernel adds x once.
    torch.manual_seed(0)
    x = torch.randn(100)
    total = torch.zeros(101)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = dsl["accumulate"](total, x)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    close(total[:100], x)
    close(total[100], x.sum())
    text = [str(w.message) for w in seen if "in place" in str(w.message)]
    assert text and "'pair[0]'" in text[0] and "restore_value=['pair']" in text[0], text
    # restore_value names the tuple: each tensor in it is restored, with no warning.
    total = torch.zeros(101)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dsl["accumulate_restored"](total, x).source == "tuned"
    close(total[:100], x)
    close(total[100], x.sum())


def test_verify_names_a_tuple_for_its_tensors(dsl) -> None:
    # verify=["pair"] was "not a tensor parameter of the kernel": a tuple's tensors could
    # not be checked at all.
    x, out = torch.randn(100), torch.zeros(100)
    res = dsl["doubled_verified"](x, out)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    close(out, 2 * x)


@pytest.mark.parametrize("isolate", [False, True])
def test_verify_fn_gets_a_tuple_argument_whole_and_takes_its_reference_by_its_name(
    isolate: bool,
) -> None:
    # verify=fn's inputs held "pair[0]", "pair[1]" and no "pair" (a reference reading
    # inputs["pair"] stopped the tuning with a KeyError), and a reference keyed "pair" was
    # "not a tensor parameter", while reset_to_zero=, restore_value= and verify=[...] take
    # "pair" and refuse "pair[0]". Now fn gets the tuple of copies by its parameter name,
    # and a tuple (None: not compared) keyed by that name is the reference of its tensors.
    from kernels_third import double_pair

    from tunedsl import autotune_launch
    from tunedsl.errors import TuningError

    x, out = torch.randn(100), torch.zeros(100)
    seen: dict[str, Any] = {}

    def reference(factor: int) -> Any:
        def fn(inputs: dict[str, Any]) -> dict[str, Any]:
            x_copy, out_copy = inputs["pair"]
            seen["copies"] = x_copy is not x and out_copy is not out
            return {"pair": (None, factor * x_copy)}

        return fn

    def launch(factor: int, name: str) -> Any:
        return autotune_launch(
            double_pair, space={"BLOCK": [32, 64]}, grid=lambda c: (triton.cdiv(100, c.BLOCK),),
            args=((x, out), 100), kwargs=lambda c: {"BLOCK": c.BLOCK}, verify=reference(factor),
            isolate=isolate, name=name,
        )  # fmt: skip

    res = launch(2, f"pair_whole_{isolate}")
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert isolate or seen["copies"]
    close(out, 2 * x)
    with pytest.raises(TuningError, match=r"verify: output 'pair\[1\]' differs"):
        launch(3, f"pair_wrong_{isolate}")


def test_a_tuple_of_tensors_prune_reads_is_keyed_by_their_dtypes_and_shapes(
    dsl, tmp_path: Path
) -> None:
    # prune_value keyed a tuple by its elements as objects and the record by their printed
    # values: every call with new tensors tuned again and wrote a record holding the data.
    torch.manual_seed(0)
    for n, source in [(100, "tuned"), (100, "memory"), (40, "tuned"), (100, "memory")]:
        x, out = torch.randn(n), torch.zeros(n)
        res = dsl["doubled_pruned"](x, out)
        assert res.source == source, (n, res.source)
        close(out, 2 * x)
    assert "tensor(" not in str(res.key), res.key
    assert res.key["prune"]["pair"]["value"][1] == {"dtype": "float32", "shape": [100]}
    fresh = load(tmp_path, "third_sites", SCRIPT)  # a new site, as in a new process
    assert fresh["doubled_pruned"](torch.randn(100), torch.zeros(100)).source == "disk"


def test_a_numpy_scalar_key_is_the_number_it_holds(dsl, tmp_path: Path) -> None:
    # key=np.prod(x.shape) is a numpy.int64: it was refused as "an array (int64): the key
    # would be its values, so every new one would tune again", though it repeats as an int.
    x, y = torch.randn(4, 32), torch.empty(4, 32)
    res = dsl["epilogue_keyed"](x, y, np.prod(x.shape))
    assert res.source == "tuned" and res.key["user_key"] == 128
    close(y, x)
    # The same number as a Python int is the same key, in memory and on disk.
    assert dsl["epilogue_keyed"](x, y, 128).source == "memory"
    fresh = load(tmp_path, "third_sites", SCRIPT)  # a new site, as in a new process
    again = fresh["epilogue_keyed"](x, y, 128)
    assert again.source == "disk" and again.digest == res.digest
    assert dsl["epilogue_keyed"](x, y, np.float32(2.5)).source == "tuned"


def test_two_outputs_are_verified_and_keyed_by_shape(dsl) -> None:
    torch.manual_seed(0)
    for rows, cols, source in [(6, 100, "tuned"), (6, 200, "tuned"), (6, 100, "memory")]:
        x = torch.randn(rows, cols)
        mean, rstd = torch.empty(rows), torch.empty(rows)
        res = dsl["stats"](x, mean, rstd)
        assert res.source == source, (rows, cols, res.source)
        close(mean, x.mean(1))
        close(rstd, torch.rsqrt(x.var(1, unbiased=False) + 1e-5))
    assert all(r.status == "ok" for r in res.timings.values())


def test_views_dtypes_and_constexpr_defaults_each_get_the_right_decision(dsl) -> None:
    """Strided, offset, broadcast and empty views, dtype mixes, and bool/str/dtype
    constexprs left at their defaults or passed: one decision per key that Triton compiles
    or lays out differently, none where only the values or the storage offset differ."""
    torch.manual_seed(0)
    base = torch.randn(64, 48)
    bias = torch.randn(32)
    calls: list[tuple[str, Any, Any, dict[str, Any], torch.Tensor]] = [
        ("tuned", base[:, :32], torch.empty(64, 32), {}, base[:, :32]),
        ("memory", base[:, 16:], torch.empty(64, 32), {}, base[:, 16:]),  # storage offset
        ("tuned", torch.randn(32, 64).t(), torch.empty(64, 32), {}, None),  # transposed
        ("tuned", bias.expand(64, 32), torch.empty(64, 32), {}, bias.expand(64, 32)),
        ("empty", torch.empty(0, 32), torch.empty(0, 32), {}, torch.empty(0, 32)),
        ("tuned", base[:, :32], torch.empty(64, 32), {"ACT": "relu"}, base[:, :32].relu()),
        ("tuned", base[:, :32], torch.empty(64, 32), {"HAS_BIAS": True}, base[:, :32] + bias),
        ("tuned", base[:, :32], torch.empty(64, 32, dtype=torch.float16),
         {"OUT": tl.float16}, base[:, :32].half()),
        ("tuned", base[:, :32].to(torch.bfloat16), torch.empty(64, 32), {},
         base[:, :32].to(torch.bfloat16).float()),
        ("tuned", (base[:, :32] * 10).to(torch.int8), torch.empty(64, 32), {"ACT": "relu"},
         (base[:, :32] * 10).to(torch.int8).float().relu()),
        ("tuned", base[:, :32].double(), torch.empty(64, 32, dtype=torch.float64),
         {"OUT": tl.float64}, base[:, :32].double()),
    ]  # fmt: skip
    for i, (source, x, y, constexprs, expected) in enumerate(calls):
        if constexprs.get("HAS_BIAS"):
            res = dsl["epilogue"](x, y, bias, **constexprs)
        else:
            res = dsl["epilogue"](x, y, **constexprs)
        assert res.source == source, (i, res.source, res.key)
        close(y, x.float() if expected is None else expected)


HELPER = """\
import triton
import triton.language as tl


SHIFT = tl.constexpr(0)


@triton.jit
def act(x):
    return x * 2
"""

KERNEL = """\
import triton
import triton.language as tl

import third_pkg.ops.acts


@triton.jit
def apply(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = third_pkg.ops.acts.act(tl.load(x + offs, mask=offs < n)) + third_pkg.ops.acts.SHIFT
    tl.store(y + offs, v, mask=offs < n)
"""

APPLY_SITE = """\
from tunedsl import autotune, cdiv
from third_kernel import apply


def run(x, y):
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                    apply(x, y, x.numel(), BLOCK=$BLOCK))
"""


@pytest.mark.parametrize(
    "edit",
    [("return x * 2", "return x * 2 + 1"), ("tl.constexpr(0)", "tl.constexpr(1)")],
    ids=["helper", "constexpr"],
)
def test_a_helper_edited_in_a_package_the_kernel_reaches_by_path_is_tuned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: tuple[str, str]
) -> None:
    """A kernel calling ``pkg.ops.acts.act(x)`` and reading ``pkg.ops.acts.SHIFT``: the
    interpreter's kernel hash followed one module attribute (``lib.act``), not two, and
    never a constexpr read through a module, so an edited ``act`` or ``SHIFT`` kept its
    stored decision (the chosen configuration may not suit the new kernel)."""
    from tunedsl.runtime import verified

    package = tmp_path / "third_pkg" / "ops"
    package.mkdir(parents=True)
    (tmp_path / "third_pkg" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (tmp_path / "third_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    def run(helper: str) -> tuple[str, torch.Tensor, torch.Tensor]:
        (package / "acts.py").write_text(helper)
        for name in [m for m in sys.modules if m.startswith(("third_pkg", "third_kernel"))]:
            del sys.modules[name]
        importlib.invalidate_caches()
        verified.clear()  # what a new process starts without
        x, y = torch.randn(100), torch.zeros(100)
        return load(tmp_path, "apply_sites", APPLY_SITE)["run"](x, y).source, x, y

    source, x, y = run(HELPER)
    assert source == "tuned"
    close(y, x * 2)
    assert run(HELPER)[0] == "disk"  # the same helper: the stored decision serves
    edited = HELPER.replace(*edit)
    assert edited != HELPER
    source, x, y = run(edited)
    assert source == "tuned"
    close(y, x * 2 + 1)


def test_a_launch_hint_a_heuristic_computes_is_not_tuned_in_silence(dsl) -> None:
    # @triton.heuristics({"num_warps": ...}) sets num_warps after the launch's own: every
    # num_warps of space= ran the heuristic's, and the record named a choice never measured.
    x, y = torch.randn(100), torch.zeros(100)
    with pytest.raises(UsageError) as err:
        dsl["tripled"](x, y)
    text = str(err.value)
    assert "@triton.heuristics" in text and "`num_warps`" in text and "space=" in text, text
    assert "third_sites.py" in text and not y.any(), text
    assert dsl["tripled_blocks"](x, y).source == "tuned"  # fields it does not compute tune
    close(y, x * 3)


def test_restore_value_may_name_a_broadcast_input(dsl) -> None:
    # Restoring bias.expand(n) (stride 0) raised torch's "more than one element of the
    # written-to tensor refers to a single memory location" before every launch, so every
    # configuration failed; each element is now written once.
    torch.manual_seed(0)
    y, x = torch.randn(100), torch.randn(1).expand(100)
    before = y.clone()
    res = dsl["axpy"](y, x, 2.0)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    close(y, before + 2 * x)


def test_a_tensor_descriptor_prune_reads_is_keyed_by_its_tensor_not_its_values() -> None:
    # A descriptor is unhashable: it was keyed by its printed form, its tensor's values.
    from triton.tools.tensor_descriptor import TensorDescriptor

    from tunedsl.model.prune_keys import make_prune_part, readable_prune

    part = make_prune_part(("desc", "n"), frozenset({"desc"}))
    one, two = (TensorDescriptor.from_tensor(torch.randn(32, 16), [16, 16]) for _ in range(2))
    assert part((one, 5), {}) == part((two, 5), {})
    wide = TensorDescriptor.from_tensor(torch.randn(32, 32), [16, 16])
    assert part((one, 5), {}) != part((wide, 5), {})
    text = readable_prune(("desc", "n"), (one, 5), {}, frozenset({"desc"}))
    assert text == readable_prune(("desc", "n"), (two, 5), {}, frozenset({"desc"}))
    assert "tensor(" not in str(text), text


def test_restore_value_names_a_tuple_of_a_tensor_and_an_int(dsl) -> None:
    # The site's name check accepted the tuple (it holds a tensor) and the tuning's own,
    # older check then refused it: "argument 'pair[1]' is not a tensor" (the int n).
    x = torch.arange(100, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # restored as named: no in-place warning
        res = dsl["doubled_in_place"](x)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    close(x, torch.arange(100, dtype=torch.float32) * 2)  # doubled once


def test_reset_to_zero_names_a_tuple_of_tensors(dsl) -> None:
    # reset_to_zero=["outs"] with outs a tuple was "'outs' is not a tensor": the atomic sums
    # then had to be zeroed by a pre_hook. Each tensor of the tuple is zeroed before every
    # tuning launch, before the real one, and on every cache hit.
    torch.manual_seed(0)
    x = torch.randn(100)
    total, squares = torch.full((1,), 7.0), torch.full((1,), 7.0)
    for source in ("tuned", "memory"):
        res = dsl["sums"](x, total, squares)
        assert res.source == source
        close(total, x.sum().reshape(1))
        close(squares, (x * x).sum().reshape(1))


def test_a_tuning_without_a_site_checks_the_names_as_a_site_does() -> None:
    # tuner.tune without a site had its own check: another message (no "did you mean"),
    # and a tuple holding an int refused where a site accepted it.
    from kernels_third import scale_pair

    from tunedsl.model.config import Config
    from tunedsl.model.settings import Settings
    from tunedsl.model.variant import Variant
    from tunedsl.runtime.tuner import TuneRequest, tune

    x = torch.arange(100, dtype=torch.float32)

    def request(**names: Any) -> TuneRequest:
        variants = [
            Variant(Config(BLOCK=b), ((x, 100),), {"BLOCK": b}, ((100 + b - 1) // b,), {})
            for b in (32, 64)
        ]
        return TuneRequest(kernel=scale_pair, variants=variants, settings=Settings(**names))

    typo = r"restore_value=: 'pairr' is not a parameter of scale_pair\(pair, BLOCK\); did you mean"
    with pytest.raises(UsageError, match=typo):
        tune(request(restore_value=("pairr",)))
    with pytest.raises(UsageError, match=r"reset_to_zero=: 'BLOCK' is not a tensor"):
        tune(request(reset_to_zero=("BLOCK",)))
    assert torch.equal(x, torch.arange(100, dtype=torch.float32))
    out = tune(request(restore_value=("pair",)))
    assert {r.status for r in out.results} == {"ok"}
    assert torch.equal(x, torch.arange(100, dtype=torch.float32))  # restored after tuning


def test_a_constexpr_passed_at_its_default_shares_the_key_of_one_left_out(
    dsl, tmp_path: Path
) -> None:
    # bias_act(..., ACT="none") and bias_act(...) bind the same value and compile the same
    # kernel, but the record key held ACT only when passed: a second tune, a second record.
    x, y = torch.randn(64, 48)[:, :32], torch.empty(64, 32)
    first = dsl["epilogue"](x, y)
    assert first.source == "tuned"
    explicit: list[dict[str, Any]] = [
        {"ACT": "none"}, {"HAS_BIAS": False}, {"OUT": tl.float32},
        {"ACT": "none", "HAS_BIAS": False, "OUT": tl.float32},
    ]  # fmt: skip
    for constexprs in explicit:
        res = dsl["epilogue"](x, y, **constexprs)
        assert res.source == "memory" and res.key == first.key, (constexprs, res.key)
        close(y, x)
    fresh = load(tmp_path, "third_sites", SCRIPT)  # a new site, as in a new process
    assert fresh["epilogue"](x, y, ACT="none").source == "disk"
    # Another value, or the default's value as another type, is another kernel.
    assert dsl["epilogue"](x, y, ACT="relu").source == "tuned"
    assert dsl["epilogue"](x, y, HAS_BIAS=0).source == "tuned"
