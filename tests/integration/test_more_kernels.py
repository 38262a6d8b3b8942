"""Kernels from outside the gallery (more_kernels.py), tuned through DSL macros compiled by
``tunedsl.frontend`` and run under Triton's interpreter, each checked against torch."""

from __future__ import annotations

import gc
import warnings
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tunedsl.errors import TuningError, UsageError
from tunedsl.frontend.compile import compile_source
from tunedsl.runtime.site import MAX_OTHER_KERNELS

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import torch
from triton.tools.tensor_descriptor import TensorDescriptor
from tunedsl import autotune, cdiv
from more_kernels import add_one_tiles, batched_matmul, double_even, double_fixed_block, double_tiles, grouped_matmul, scale, sgd_step, splitk_matmul, sum_and_squares


def splitk(a, b, c):
    (M, K), N = a.shape, b.shape[1]
    return autotune(space=dict(BM=[16, 32], SPLIT=[1, 2, 4]), reset_to_zero=["c"],
                    blocks=(cdiv(M, $BM) * cdiv(N, 16), $SPLIT),
                    splitk_matmul(a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                  BM=$BM, BN=16, BK=16, SPLIT=$SPLIT))


def moments(x, total, squares):
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                    reset_to_zero=["total", "squares"],
                    sum_and_squares(x, total, squares, x.numel(), BLOCK=$BLOCK))


def grouped(As, Bs, Cs):
    ptrs = [torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64) for ts in (As, Bs, Cs)]
    dims = [(a.shape[0], b.shape[1], a.shape[1]) for a, b in zip(As, Bs, strict=True)]
    sizes = torch.tensor(dims, dtype=torch.int32)
    lds = torch.tensor([[a.stride(0), b.stride(0), c.stride(0)] for a, b, c in zip(As, Bs, Cs)],
                       dtype=torch.int32)
    return autotune(space=dict(BM=[16, 32], BN=[16, 32]), key=tuple(dims),
                    blocks=sum(cdiv(m, $BM) * cdiv(n, $BN) for m, n, _ in dims),
                    grouped_matmul(*ptrs, sizes, lds, len(dims), BM=$BM, BN=$BN, BK=16))


def bmm(a, b, c):
    B, M, K = a.shape
    N = b.shape[2]
    return autotune(space=dict(BM=[16, 32], BN=[16, 32]), blocks=(cdiv(M, $BM), cdiv(N, $BN), B),
                    batched_matmul(a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                   BM=$BM, BN=$BN, BK=16))


def sgd(param, grad, lr):
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(param.numel(), $BLOCK),
                    sgd_step(param, grad, param.numel(), lr, BLOCK=$BLOCK))


def sgd_restored(param, grad, lr):
    return autotune(space=dict(BLOCK=[16, 32, 64]), blocks=cdiv(param.numel(), $BLOCK),
                    restore_value=["param"], sgd_step(param, grad, param.numel(), lr, BLOCK=$BLOCK))


def double(x, out):
    return autotune(space=dict(BLOCK=[32, 128]), blocks=cdiv(x.numel(), $BLOCK),
                    double_fixed_block(x, out, x.numel(), BLOCK=$BLOCK))


def double_by_descriptors(x, y):
    M, N = x.shape
    src, dst = TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])
    return autotune(space=dict(TILES=[1, 2]), blocks=(cdiv(M, 16 * $TILES), cdiv(N, 16)),
                    double_tiles(src, dst, M, TILES=$TILES))


def double_by_tiled_descriptors(x, y):
    M, N = x.shape
    return autotune(space=dict(rows=[16, 32]), blocks=(cdiv(M, $rows), cdiv(N, 16)),
                    double_tiles(TensorDescriptor.from_tensor(x, [$rows, 16]),
                                 TensorDescriptor.from_tensor(y, [$rows, 16]), M, TILES=1))


def double_by_tiled_descriptors_keyed(x, y):
    M, N = x.shape
    return autotune(space=dict(rows=[16, 32]), blocks=(cdiv(M, $rows), cdiv(N, 16)),
                    key=(x.shape, str(x.dtype)),
                    double_tiles(TensorDescriptor.from_tensor(x, [$rows, 16]),
                                 TensorDescriptor.from_tensor(y, [$rows, 16]), M, TILES=1))


def double_even_blocks(x, out):
    return autotune(space=dict(BLOCK=[32, 128]), blocks=cdiv(x.numel(), $BLOCK),
                    double_even(x, out, x.numel(), BLOCK=$BLOCK))


def double_even_misspelled(x, out):
    return autotune(space=dict(BLOCK=[32, 128]), blocks=cdiv(x.numel(), $BLOCK),
                    double_even(x, out, x.numel(), BLCOK=$BLOCK))


def add_one_in_place(x):
    M, N = x.shape
    return autotune(space=dict(TILES=[1, 2]), blocks=cdiv(M, 16 * $TILES),
                    add_one_tiles(TensorDescriptor.from_tensor(x, [16, N]), M, TILES=$TILES))


def add_one_zeroed(x):
    M, N = x.shape
    return autotune(space=dict(TILES=[1, 2]), blocks=cdiv(M, 16 * $TILES), reset_to_zero=["desc"],
                    add_one_tiles(TensorDescriptor.from_tensor(x, [16, N]), M, TILES=$TILES))


def scaled_into_padded(x, factor):
    n = x.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK),
                    scale(x, torch.empty(cdiv(n, $BLOCK) * $BLOCK), n, factor, BLOCK=$BLOCK))


def scaled(x, out, factor):
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                    scale(x, out, x.numel(), factor, BLOCK=$BLOCK))


def with_kernel(kernel, x, out):
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                    kernel(x, out, x.numel(), BLOCK=$BLOCK))
"""


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    """The functions of ``SCRIPT``, as a module."""
    path = tmp_path / "more_sites.py"
    path.write_text(SCRIPT, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "more_sites", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def test_split_k_matmul_adds_into_an_output_zeroed_before_every_launch(dsl) -> None:
    torch.manual_seed(0)
    a, b = torch.randn(40, 64), torch.randn(64, 24)
    c = torch.full((40, 24), 5.0)  # what the caller had is no part of the product
    res = dsl["splitk"](a, b, c)
    assert res.source == "tuned" and len(res.timings) == 6
    close(c, a @ b)
    c.fill_(5.0)
    assert dsl["splitk"](a, b, c).source == "memory"
    close(c, a @ b)


def test_two_accumulators_are_both_reset(dsl) -> None:
    x = torch.randn(1000)
    total, squares = torch.full((1,), 7.0), torch.full((1,), 7.0)
    assert dsl["moments"](x, total, squares).source == "tuned"
    close(total, x.sum().reshape(1))
    close(squares, (x * x).sum().reshape(1))


def test_grouped_gemm_over_pointer_arrays_keyed_by_its_problem_sizes(dsl) -> None:
    torch.manual_seed(0)

    def problems(shapes: list[tuple[int, int, int]]) -> tuple[list, list, list]:
        As = [torch.randn(m, k) for m, k, _ in shapes]
        Bs = [torch.randn(k, n) for _, k, n in shapes]
        return As, Bs, [torch.empty(a.shape[0], b.shape[1]) for a, b in zip(As, Bs, strict=True)]

    As, Bs, Cs = problems([(20, 32, 24), (40, 16, 8), (8, 48, 40)])
    assert dsl["grouped"](As, Bs, Cs).source == "tuned"
    for a, b, c in zip(As, Bs, Cs, strict=True):
        close(c, a @ b)
    # The pointer tensors have the same shape: only key= tells these problems apart.
    As, Bs, Cs = problems([(64, 32, 24), (40, 16, 8), (8, 48, 40)])
    assert dsl["grouped"](As, Bs, Cs).source == "tuned"
    for a, b, c in zip(As, Bs, Cs, strict=True):
        close(c, a @ b)


def test_batched_matmul_on_a_3d_grid_keys_a_transposed_operand_apart(dsl) -> None:
    torch.manual_seed(0)
    a, c = torch.randn(3, 20, 32), torch.empty(3, 20, 24)
    b = torch.randn(3, 32, 24)
    assert dsl["bmm"](a, b, c).source == "tuned"
    close(c, a @ b)
    bt = torch.randn(3, 24, 32).transpose(1, 2)  # same shape, other stride pattern
    assert dsl["bmm"](a, bt, c).source == "tuned"
    close(c, a @ bt)


def test_a_heuristic_that_computes_a_field_the_launch_passes_is_an_error(dsl) -> None:
    # Triton's @triton.heuristics replaces the launch's BLOCK with its own, so every
    # configuration ran BLOCK=32 while blocks= used the configuration's: BLOCK=128 covered
    # a quarter of the output and was chosen as the fastest, leaving the rest unwritten.
    x, out = torch.randn(256), torch.zeros(256)
    with pytest.raises(UsageError) as err:
        dsl["double"](x, out)
    text = str(err.value)
    assert "@triton.heuristics" in text and "`BLOCK`" in text and "more_sites.py" in text, text
    assert not out.any()  # nothing was launched


def test_a_misspelled_parameter_of_a_heuristics_kernel_is_named(dsl) -> None:
    # The launch was not checked against a wrapped kernel's parameters: every configuration
    # failed with the heuristic's own "KeyError: 'BLOCK'".
    x, out = torch.randn(256), torch.zeros(256)
    with pytest.raises(UsageError, match="has no parameter `BLCOK`; did you mean `BLOCK`"):
        dsl["double_even_misspelled"](x, out)
    for n in (256, 200):  # EVEN, computed by the heuristic, counts as passed
        x, out = torch.randn(n), torch.zeros(n)
        assert dsl["double_even_blocks"](x, out).source == "tuned"
        close(out, 2 * x)


def test_parameters_that_require_grad_are_updated_once_in_place(dsl) -> None:
    # An optimizer step on nn.Parameters outside torch.no_grad(): the in-place watch's
    # restore raised "a leaf Variable that requires grad is being used in an in-place
    # operation" after two launches had already changed the parameters.
    param = torch.nn.Parameter(torch.randn(100))
    grad, before = torch.randn(100), param.detach().clone()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = dsl["sgd"](param, grad, 0.5)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert any("restore_value=['param']" in str(w.message) for w in seen)
    close(param.detach(), before - 0.5 * grad)
    assert param.requires_grad and param.grad_fn is None


def test_restore_value_and_reset_to_zero_take_tensors_that_require_grad(dsl) -> None:
    # Each configuration failed with the same autograd error, so the tuning failed.
    param = torch.nn.Parameter(torch.randn(100))
    grad, before = torch.randn(100), param.detach().clone()
    assert dsl["sgd_restored"](param, grad, 0.5).source == "tuned"
    close(param.detach(), before - 0.5 * grad)
    x = torch.randn(1000)
    total = torch.full((1,), 7.0, requires_grad=True)
    squares = torch.full((1,), 7.0, requires_grad=True)
    assert dsl["moments"](x, total, squares).source == "tuned"
    close(total.detach(), x.sum().reshape(1))
    total.detach().fill_(7.0)
    assert dsl["moments"](x, total, squares).source == "memory"  # zeroed on a hit too
    close(total.detach(), x.sum().reshape(1))
    close(squares.detach(), (x * x).sum().reshape(1))


def test_a_tensor_descriptor_is_keyed_by_its_tensor_and_block(dsl) -> None:
    # A host-side TensorDescriptor was keyed by its class alone: a 128-row problem reused
    # the decision of a 64-row one, and a float16 one would have too.
    for rows, source in [(64, "tuned"), (128, "tuned"), (64, "memory")]:
        x, y = torch.randn(rows, 32), torch.empty(rows, 32)
        res = dsl["double_by_descriptors"](x, y)
        assert res.source == source, (rows, res.source)
        close(y, 2 * x)
    desc = res.key["args"]["src_desc"]["descriptor"]
    assert desc["dtype"] == "float32" and desc["shape"] == [64, 32] and desc["block"] == [16, 16]
    x, y = torch.randn(64, 32, dtype=torch.float16), torch.empty(64, 32, dtype=torch.float16)
    assert dsl["double_by_descriptors"](x, y).source == "tuned"


def test_a_tensor_only_a_configuration_dependent_argument_passes_needs_a_key(dsl) -> None:
    # Descriptors built with $rows are holes of the call key: nothing of x reached it, so
    # a 128-row problem reused the 64-row decision.
    x, y = torch.randn(64, 32), torch.zeros(64, 32)
    with pytest.raises(UsageError) as err:
        dsl["double_by_tiled_descriptors"](x, y)
    text = str(err.value)
    assert "`src_desc` depends on the configuration" in text, text
    assert "shape [64, 32]" in text and "key=" in text and "more_sites.py" in text, text
    assert not y.any()
    # A scratch tensor made per configuration is sized from it and the keyed arguments.
    assert dsl["scaled_into_padded"](x, 2.0).source == "tuned"
    for rows, source in [(64, "tuned"), (128, "tuned"), (64, "memory")]:
        x, y = torch.randn(rows, 32), torch.empty(rows, 32)
        assert dsl["double_by_tiled_descriptors_keyed"](x, y).source == source
        close(y, 2 * x)


@pytest.mark.parametrize("factor", [np.float32(2.0), np.int64(3)], ids=["float32", "int64"])
def test_a_numpy_scalar_is_named_with_the_python_number_to_pass(dsl, factor) -> None:
    # n = np.prod(x.shape) is a numpy.int64: Triton's interpreter failed every
    # configuration with "cannot convert 3 of type <class 'numpy.int64'> to tensor",
    # naming no parameter.
    x, out = torch.randn(100), torch.zeros(100)
    with pytest.raises(UsageError) as err:
        dsl["scaled"](x, out, factor)
    text = str(err.value)
    kind = type(factor.item()).__name__
    assert f"`factor` of scale is a numpy.{type(factor).__name__}" in text, text
    assert f"pass {kind}(factor)" in text and "more_sites.py" in text, text
    res = dsl["scaled"](x, out, factor.item())
    assert res.source == "tuned"
    close(out, x * float(factor))


def test_pointer_arrays_measured_in_a_worker_say_why_every_configuration_crashed(
    tmp_path: Path,
) -> None:
    # With isolate=True the grouped GEMM reads the caller's addresses in another process:
    # every configuration was "crashed: worker killed by SIGSEGV" and nothing said why.
    old = "space=dict(BM=[16, 32], BN=[16, 32]), key=tuple(dims),"
    text = SCRIPT.replace(old, "space=dict(BM=[16], BN=[16, 32]), key=tuple(dims), isolate=True,")
    assert text != SCRIPT
    path = tmp_path / "isolated_sites.py"
    path.write_text(text, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "isolated_sites", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    As, Bs = [torch.randn(1024, 32)], [torch.randn(32, 16)]
    with pytest.raises(TuningError) as err:
        namespace["grouped"](As, Bs, [torch.empty(1024, 16)])
    text = str(err.value)
    assert text.count("crashed: worker killed") == 2, text
    assert "pointer arrays" in text and "isolate=False" in text, text


def test_a_tensor_written_in_place_through_a_descriptor_is_restored_while_tuning(dsl) -> None:
    # The in-place watch copied tensor arguments only: every tuning launch added one more
    # through the descriptor, and the caller got 15 where the kernel adds 1.
    x = torch.zeros(64, 16)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert dsl["add_one_in_place"](x).source == "tuned"
    assert torch.equal(x, torch.ones(64, 16)), x.unique()
    assert any("restore_value=['desc']" in str(w.message) for w in seen)


def test_reset_to_zero_names_a_descriptor_for_its_tensor_on_every_hit(dsl) -> None:
    # Tuning zeroed the descriptor's tensor, but the launch after it and every cache hit
    # called zero_() on the descriptor itself: AttributeError.
    x = torch.full((64, 16), 7.0)
    for source in ("tuned", "memory"):
        assert dsl["add_one_zeroed"](x).source == source
        assert torch.equal(x, torch.ones(64, 16)), x.unique()


def make_doubler() -> Any:
    """A new kernel object on every call, as a kernel defined inside a function is."""

    @triton.jit
    def doubler(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)

    return doubler


def test_kernels_made_per_call_are_not_kept_by_the_site(dsl) -> None:
    """A kernel defined inside a function is a new kernel on every call: the site keeps a
    bounded number of them (with their decisions and launchers), not every one it met."""
    x, out = torch.randn(100), torch.empty(100)
    dsl["with_kernel"](make_doubler(), x, out)  # the site's first kernel (kept)
    early = make_doubler()
    dsl["with_kernel"](early, x, out)
    gone = weakref.ref(early)
    del early
    for i in range(300):  # more than every bounded table that holds kernels
        out.zero_()
        dsl["with_kernel"](make_doubler(), x, out)
        if i % 50 == 0:
            close(out, x * 2)
    gc.collect()
    assert gone() is None, "a kernel met 300 kernels ago is still held"
    site = next(v for k, v in dsl.items() if k.startswith("__tunedsl_site_"))
    assert len(site.table()) <= MAX_OTHER_KERNELS + 1
