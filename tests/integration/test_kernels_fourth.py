"""Kernels from outside the gallery (kernels_fourth.py), tuned through DSL macros and
``autotune_launch`` under Triton's interpreter, each checked against torch, and each change
of layout, dtype, int class, alignment or None-ness checked to get a decision of its own
(or to reuse one only where Triton compiles the same kernel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tunedsl import autotune_launch, cdiv
from tunedsl.errors import TuningError
from tunedsl.frontend.compile import compile_source

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import torch
from tunedsl import autotune, cdiv
from kernels_fourth import (double_into, gather_every, grid3, int8_matmul, pipelined_sum,
                            quantize_int8, row_argmax, scale_residual, splitk_atomic,
                            strided_axpy, top_k)


def argmax(x, vals, idx):
    rows, cols = x.shape
    return autotune(space=dict(BLOCK=[16, 64]), blocks=rows, verify=True,
                    row_argmax(x, vals, idx, cols, *x.stride(), BLOCK=$BLOCK))


def topk(x, vals, idx, k):
    rows, cols = x.shape
    return autotune(space=dict(BLOCK=[128, 256]), blocks=rows, verify=True,
                    top_k(x, vals, idx, cols, x.stride(0), K=k, BLOCK=$BLOCK))


def residual(x, res, out, alpha, relu=False):
    n = x.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK),
                    scale_residual(x, res, out, n, alpha, HAS_RES=res is not None, RELU=relu,
                                   BLOCK=$BLOCK))


def quantize(x, q, scale):
    n = x.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK), verify=True,
                    quantize_int8(x, q, n, scale, BLOCK=$BLOCK))


def matmul_int8(a, b, c):
    (M, K), N = a.shape, b.shape[1]
    return autotune(space=dict(BM=[16, 32], BK=[16, 32]), verify=True,
                    blocks=(cdiv(M, $BM), cdiv(N, 16)),
                    int8_matmul(a, b, c, M, N, K, BM=$BM, BN=16, BK=$BK))


def splitk(a, b, c):
    (M, K), N = a.shape, b.shape[1]
    return autotune(space=dict(SPLIT=[1, 2, 3]), reset_to_zero=["c"], verify=True,
                    blocks=(cdiv(M, 16) * cdiv(N, 16), $SPLIT),
                    splitk_atomic(a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                  BM=16, BN=16, BK=16, SPLIT=$SPLIT))


def heads(x, out):
    B, H, N = x.shape
    return autotune(space=dict(BLOCK=[16, 32]), blocks=(B, H, cdiv(N, $BLOCK)),
                    grid3(x, out, N, x.stride(0), x.stride(1), BLOCK=$BLOCK))


def total(x, out):
    return autotune(space=dict(BLOCK=[16, 32], STAGES=[1, 3], UNROLL=[1, 2]), blocks=1,
                    reset_to_zero=["out"],
                    pipelined_sum(x, out, x.numel(), BLOCK=$BLOCK, STAGES=$STAGES,
                                  UNROLL=$UNROLL))


def axpy(y, x, a):
    n = y.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK), restore_value=["y"],
                    strided_axpy(y, x, n, a, x.stride(0), y.stride(0), BLOCK=$BLOCK))


def gather(x, y, n, s):
    return autotune(space=dict(BLOCK=[16, 32]), blocks=cdiv(n, $BLOCK),
                    gather_every(x, y, n, s, BLOCK=$BLOCK))


class Doubler:
    kernel = double_into

    def __call__(self, x, out):
        n = x.numel()
        return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK),
                        self.kernel(x, out, n, BLOCK=$BLOCK))
"""


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "fourth_sites.py"
    path.write_text(SCRIPT, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "fourth_sites", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def test_argmax_and_top_k_write_two_outputs_per_layout_and_dtype(dsl) -> None:
    torch.manual_seed(0)
    x = torch.randn(8, 100)
    x[3, 10] = x[3, 70] = 50.0  # a tie: the lowest column wins in every configuration
    vals, idx = torch.empty(8), torch.empty(8, dtype=torch.int64)
    for source, xs in (("tuned", x), ("memory", x + 1), ("tuned", x.t().contiguous().t()),
                       ("tuned", x.half())):  # fmt: skip
        res = dsl["argmax"](xs, vals, idx)
        assert res.source == source, (source, res.key)
        assert torch.equal(idx, xs.float().argmax(1)) and idx[3] == 10
        close(vals, xs.float().max(1).values)
    assert all(r.status == "ok" for r in res.timings.values())
    for k in (3, 4):  # K is a constexpr: each is another kernel
        vals, idx = torch.empty(6, k), torch.empty(6, k, dtype=torch.int32)
        rows = torch.randn(6, 100)  # no ties: torch's order among equals is unspecified
        assert dsl["topk"](rows, vals, idx, k).source == "tuned"
        expected = rows.topk(k)
        close(vals, expected.values)
        assert torch.equal(idx.long(), expected.indices)


def test_an_optional_residual_and_bool_constexprs_each_get_their_decision(dsl) -> None:
    torch.manual_seed(0)
    x, r, out = torch.randn(100), torch.randn(100), torch.empty(100)
    calls = [
        ("tuned", None, 2.0, False, 2 * x),
        ("tuned", r, 2.0, False, 2 * x + r),  # None -> a tensor
        ("memory", None, 3.0, False, 3 * x),  # another float: the same kernel
        ("tuned", r, 1.0, True, (x + r).relu()),  # RELU=True
        ("tuned", r, 1, False, x + r),  # an int alpha of 1: Triton specializes it
        ("tuned", r, 2, False, 2 * x + r),
        ("memory", r, 3, False, 3 * x + r),  # 2 and 3: one int class
    ]
    for i, (source, res, alpha, relu, expected) in enumerate(calls):
        got = dsl["residual"](x, res, out, alpha, relu)
        assert got.source == source, (i, got.key)
        close(out, expected)


def test_int8_quantization_and_split_k_into_a_strided_view(dsl) -> None:
    torch.manual_seed(0)
    x = torch.randn(100) * 30
    q = torch.empty(100, dtype=torch.int8)
    assert dsl["quantize"](x, q, 0.5).source == "tuned"
    expected = (x / 0.5).clamp(-127, 127)
    assert torch.equal(q, (expected.abs() + 0.5).floor().copysign(expected).to(torch.int8))
    qa = torch.randint(-128, 128, (40, 64), dtype=torch.int8)
    qb = torch.randint(-128, 128, (64, 24), dtype=torch.int8)
    acc = torch.empty(40, 24, dtype=torch.int32)
    res = dsl["matmul_int8"](qa, qb, acc)
    assert all(r.status == "ok" for r in res.timings.values()), res.timings
    assert torch.equal(acc, qa.int() @ qb.int())
    a, b = torch.randn(40, 64), torch.randn(64, 24)
    c = torch.full((40, 24), 7.0)
    res = dsl["splitk"](a, b, c)
    assert all(r.status == "ok" for r in res.timings.values()), res.timings
    close(c, a @ b)
    wide = torch.full((40, 48), 7.0)  # every other column: reset_to_zero zeroes only those
    res = dsl["splitk"](a, b, wide[:, ::2])
    assert res.source == "tuned" and res.key["args"]["c"]["stride"] == "ss"
    close(wide[:, ::2], a @ b)
    assert torch.equal(wide[:, 1::2], torch.full((40, 24), 7.0))


def test_a_3d_grid_a_pipelined_loop_and_a_method_kernel(dsl) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 50)
    out = torch.empty_like(x)
    assert dsl["heads"](x, out).source == "tuned"
    close(out, x * torch.arange(1, 4).view(1, 3, 1) + torch.arange(2).view(2, 1, 1))
    v, total = torch.randn(200), torch.zeros(1)
    res = dsl["total"](v, total)
    assert len(res.timings) == 8 and all(r.status == "ok" for r in res.timings.values())
    close(total, v.sum().view(1))
    doubler = dsl["Doubler"]()
    out = torch.empty(100)
    assert doubler(v[:100], out).source == "tuned"
    close(out, 2 * v[:100])
    half = torch.empty(100, dtype=torch.float16)
    assert doubler(v[:100], half).source == "tuned"  # another output dtype
    close(half.float(), (2 * v[:100]).half().float())


def test_strides_passed_as_ints_key_the_layout(dsl) -> None:
    torch.manual_seed(0)
    src = torch.randn(300)
    for source, x in (("tuned", src[:100]), ("tuned", src[::3]), ("memory", src[100:200:1])):
        y = torch.randn(100)
        expected = y + 0.5 * x
        res = dsl["axpy"](y, x, 0.5)
        assert res.source == source, res.key
        close(y, expected)
    # do_not_specialize: Triton compiles one kernel for every n and s, tunedsl keys the class.
    y = torch.empty(40)
    for source, s in (("tuned", 1), ("tuned", 2), ("memory", 3)):
        assert dsl["gather"](src, y, 40, s).source == source
        assert torch.equal(y, src[: 40 * s : s])


def test_an_unaligned_slice_shares_the_interpreters_one_kernel(dsl) -> None:
    # The interpreter compiles nothing per alignment (a GPU does: tests/gpu), so a slice one
    # float in reuses the decision of the aligned tensor of its shape, and computes right.
    src = torch.randn(400)
    for source, x in (("tuned", src[:100]), ("memory", src[1:101]), ("memory", src[4:104])):
        y = torch.randn(100)
        expected = y + 0.5 * x
        res = dsl["axpy"](y, x, 0.5)
        assert res.source == source, (source, res.key)
        assert "aligned" not in res.key["args"]["x"]
        close(y, expected)


def test_ints_a_kwargs_function_returns_are_keyed_by_their_class() -> None:
    # With key=, the ints (sizes, strides) a kwargs= function gave alike for every
    # configuration were in the call key but not in the record's: n=130 and a stride of 2
    # reused the decision for n=128 and stride 1, while the same ints passed in args= (or
    # in a static kwargs=) each got their own, as Triton compiles each class apart.
    from kernels_fourth import strided_axpy

    def run(y: torch.Tensor, x: torch.Tensor, n: int, sx: int) -> Any:
        return autotune_launch(
            strided_axpy,
            space={"BLOCK": [32, 64]},
            grid=lambda c: (cdiv(n, c.BLOCK),),
            args=(y, x),
            kwargs=lambda c: {"n": n, "a": 0.5, "sx": sx, "sy": 1, "BLOCK": c.BLOCK},
            key=n // 64,
            restore_value=["y"],
        )

    src = torch.randn(400)
    for source, n, sx in (("tuned", 128, 1), ("tuned", 128, 2), ("tuned", 130, 2),
                          ("memory", 129, 2), ("memory", 144, 1)):  # fmt: skip
        y = torch.randn(n)
        expected = y + 0.5 * src[: n * sx : sx]
        res = run(y, src, n, sx)
        assert res.source == source, (source, n, sx, res.key)
        close(y, expected)
    assert res.key["args"]["n"] == "i16" and res.key["args"]["sx"] == "i1"


def test_an_output_one_configuration_stores_and_another_adds_into_ends_as_one_launch() -> None:
    # The in-place watch judges a tensor by the first launches of the tuning: written alike
    # by the storing configuration, `out` was taken for an output and left alone, then the
    # adding configurations accumulated into it while they were timed, and the launch after
    # tuning (an adding one: 4 programs, not 256) added x once more: out was 3 * x, with no
    # warning. Every argument the tuning wrote is put back before the launch that counts.
    from kernels_fourth import store_or_add

    torch.manual_seed(0)
    n = 4096
    x, out = torch.randn(n), torch.zeros(n)
    res = autotune_launch(
        store_or_add,
        space=[{"ADD": False, "BLOCK": 16}, {"ADD": True, "BLOCK": 1024}],
        grid=lambda c: (cdiv(n, c.BLOCK),),
        args=(x, out, n),
        kwargs=lambda c: {"ADD": c.ADD, "BLOCK": c.BLOCK},
    )
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    close(out, x)  # one launch from the caller's zeros, whichever configuration won


def test_a_kernel_in_tritons_autotuner_under_the_interpreter_is_named_with_the_fix() -> None:
    # Triton's autotuner benchmarks its configurations with a GPU driver even under the
    # interpreter, so every configuration failed with "0 active drivers", and the error
    # said to turn the interpreter on, which was on.
    from kernels_fourth import double_autotuned

    x, out = torch.randn(100), torch.empty(100)
    with pytest.raises(TuningError) as caught:
        autotune_launch(
            double_autotuned,
            space={"BLOCK": [32, 64]},
            grid=lambda c: (cdiv(100, c.BLOCK),),
            args=(x, out, 100),
            kwargs=lambda c: {"BLOCK": c.BLOCK},
        )
    text = str(caught.value)
    assert "@triton.autotune" in text and "space=" in text, text
    assert "turn Triton's interpreter on" not in text, text
