"""A thirteenth batch of other autotuners' test suites, ported to tunedsl: attorch's layer
normalization (tests/test_layer_norm_layer.py: forward and backward kernels launched from a
``torch.autograd.Function``, the backward writing one row of partial weight and bias
gradients per program, a count that depends on the tuned block of rows) and Liger-Kernel's
RMS normalization (test/transformers/test_rms_norm.py: a backward over a tuned number of
programs, each summing its rows' weight gradient into a buffer row, and its
``in_place=True`` mode, which writes the input's gradient over the output's), the same
kernels as ``torch.library.custom_op`` operators with a registered autograd formula, checked
by ``torch.library.opcheck`` and compiled; and Triton's test_cache.py case of a Triton function
given as a ``tl.constexpr`` whose dependency is edited (test_keyword_only_default_dependency_change),
and attorch's heuristics defined apart from its kernels.

Found and fixed: a Triton function given as a ``tl.constexpr`` (an argument of each call, a
parameter's default ``OP: tl.constexpr = step``, or under the interpreter a global ``OP =
tl.constexpr(step)`` the kernel reads) was keyed by its own source alone, so a helper
it calls, edited, kept the record tuned for the old one: the next process served it from disk,
and a choice the edited helper no longer builds failed at launch (Triton's own key of the
function covers what it calls). The key now hashes the functions it calls and the
``tl.constexpr``/``tl.dtype`` globals they read, also those reached through a module
(test_a_function_edited_under_a_constexpr_function_value_is_tuned_again,
test_a_helper_reached_through_a_module_under_a_constexpr_function_is_part_of_it). A Python
helper that a ``@triton.heuristics`` function calls (attorch's heuristics are defined apart
from the kernels and call helpers) was not part of the kernel's identity: edited, the old
record was served and its choice failed at launch; its source is part of it now
(test_a_helper_a_heuristic_calls_edited_is_another_kernel, also through a module:
test_a_helper_a_heuristic_calls_through_a_module_edited_is_another_kernel); so too a helper a
``@triton.constexpr_function`` calls (test_a_helper_a_constexpr_function_calls_edited_is_another_kernel).

Looked at and found sound: ``reset_to_zero`` on a NaN-filled partial-gradient buffer whose
rows written depend on the configuration, on the tuning call and on a decided launch; an
in-place backward (``dx`` is ``dy``) with and without ``restore_value``, with ``verify=["dx"]``
and ``isolate=True``: the caller's ``dy`` ends as one launch's gradient each time; sites inside
custom operators declared to mutate nothing pass opcheck's schema check while tuning.
(``verify=True`` on such a backward rejects every configuration but the first: the partial
buffers differ by design; ``verify=["dx"]`` is the check to give.)

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through ``autotune_launch``.

Not ported, for want of a counterpart or because another test file has it: Liger's and
attorch's bfloat16 and large shapes (the interpreter computes in NumPy at small sizes; dtype
keys are tests/integration/test_ported_autotuners.py's), Liger's ``offset`` and casting modes
and its Gemma variants (arithmetic of the kernel, not of tuning), attorch's layers without
weight or bias (an optional tensor passed as None: test_ported_autotuners_ninth.py) and its
automatic mixed precision; Triton's test_cache.py closure tests (the interpreter does not run
a kernel reading a closure variable: test_ported_autotuners_third.py) and its hash-order
tests (Triton's own cache key; tunedsl's digests are sorted and tested in tests/unit).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from tunedsl import Config, autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton

#: What each site launch returned, in call order, by site.
SOURCES: dict[str, list[str]] = {}


def _note(site: str, res: Any) -> None:
    SOURCES.setdefault(site, []).append(res.source)


# --- attorch: layer normalization, forward and backward ------------------------------------


class LayerNorm(torch.autograd.Function):
    """attorch's ``LayerNormAutoGrad`` on tunedsl sites (rows of 2-D input, weight and bias)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, name: str) -> Any:
        from ported_kernels_thirteenth import layer_norm_fwd

        rows, cols = x.shape
        out = torch.empty_like(x)
        mean, inv_std = torch.empty(rows), torch.empty(rows)
        res = autotune_launch(layer_norm_fwd, space=dict(ROWS=[1, 2, 4], num_warps=[1, 2]),
                              grid=lambda c: (cdiv(rows, c.ROWS),),
                              args=(x, w, b, mean, inv_std, out, rows, cols, 1e-5),
                              kwargs=lambda c: {"ROWS": c.ROWS, "COLS": 32},
                              name=f"{name}-fwd")  # fmt: skip
        _note(f"{name}-fwd", res)
        ctx.save_for_backward(x, w, mean, inv_std)
        ctx.name = name
        return out

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> Any:
        from ported_kernels_thirteenth import layer_norm_bwd

        x, w, mean, inv_std = ctx.saved_tensors
        rows, cols = x.shape
        dx = torch.empty_like(x)
        # One row per program at most: a block of ROWS rows leaves the rest as they were,
        # here NaN (what torch.empty may hold), so only reset_to_zero makes the sum right.
        dw = torch.full((rows, cols), float("nan"))
        db = torch.full((rows, cols), float("nan"))
        res = autotune_launch(layer_norm_bwd, space=dict(ROWS=[1, 2, 4]),
                              grid=lambda c: (cdiv(rows, c.ROWS),),
                              args=(dy.contiguous(), x, mean, inv_std, w, dx, dw, db, rows, cols),
                              kwargs=lambda c: {"ROWS": c.ROWS, "COLS": 32},
                              reset_to_zero=["dw", "db"], name=f"{ctx.name}-bwd")  # fmt: skip
        _note(f"{ctx.name}-bwd", res)
        return dx, dw.sum(0), db.sum(0), None


def test_layer_norm_forward_and_backward_match_torch_when_tuned_and_when_decided() -> None:
    """Forward and backward kernels tuned inside a ``torch.autograd.Function``: outputs and
    the input, weight and bias gradients equal PyTorch's, on the tuning call and on a
    second call that launches the decided configurations ("memory"), the backward's
    per-program partial gradients summed from a NaN-filled buffer each time
    (``reset_to_zero`` zeroes it before the decided launch too, not only while tuning).
    7 rows: no block of 2 or 4 divides them."""
    # ported from: BobMcDear/attorch tests/test_layer_norm_layer.py::test_layer_norm_layer
    torch.manual_seed(0)
    for _ in range(2):
        x = torch.randn(7, 24, requires_grad=True)
        w = torch.randn(24, requires_grad=True)
        b = torch.randn(24, requires_grad=True)
        g = torch.randn(7, 24)
        ours = LayerNorm.apply(x, w, b, "attorch-ln")
        ours.backward(g)
        grads = [t.grad.clone() for t in (x, w, b)]
        for t in (x, w, b):
            t.grad = None
        ref = torch.nn.functional.layer_norm(x, (24,), w, b, 1e-5)
        ref.backward(g)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)
        for got, t in zip(grads, (x, w, b), strict=True):
            torch.testing.assert_close(got, t.grad, rtol=1e-4, atol=1e-4)
    assert SOURCES["attorch-ln-fwd"] == ["tuned", "memory"]
    assert SOURCES["attorch-ln-bwd"] == ["tuned", "memory"]


# --- Liger-Kernel: RMS normalization, in place or not ---------------------------------------

#: The most programs of the backward's space (the rows of its partial-gradient buffer).
MOST = 5


class RMSNorm(torch.autograd.Function):
    """Liger's ``LigerRMSNormFunction`` on tunedsl sites: the backward's grid (Liger's SM
    count) is tuned; with ``in_place`` the input's gradient is written over ``dy``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, in_place: bool, restore: bool,
                name: str) -> Any:  # fmt: skip
        from ported_kernels_thirteenth import rms_norm_fwd

        rows, cols = x.shape
        y, rstd = torch.empty_like(x), torch.empty(rows)
        res = autotune_launch(rms_norm_fwd, space=[Config(num_warps=1), Config(num_warps=2)],
                              grid=(rows,), args=(x, w, y, rstd, cols, 1e-6),
                              kwargs={"COLS": 32}, name=f"{name}-fwd")  # fmt: skip
        _note(f"{name}-fwd", res)
        ctx.save_for_backward(x, w, rstd)
        ctx.in_place, ctx.restore, ctx.name = in_place, restore, name
        return y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> Any:
        from ported_kernels_thirteenth import rms_norm_bwd

        x, w, rstd = ctx.saved_tensors
        rows, cols = x.shape
        dx = dy if ctx.in_place else torch.empty_like(dy)
        dw = torch.full((MOST, cols), float("nan"))
        res = autotune_launch(rms_norm_bwd, space=dict(PROGRAMS=[1, 2, 3, MOST]),
                              grid=lambda c: (c.PROGRAMS,),
                              args=lambda c: (dy, dx, x, w, rstd, dw, rows, cols,
                                              cdiv(rows, c.PROGRAMS)),
                              kwargs={"COLS": 32}, reset_to_zero=["dw"],
                              restore_value=["dy"] if ctx.restore else None,
                              name=f"{ctx.name}-bwd")  # fmt: skip
        _note(f"{ctx.name}-bwd", res)
        return dx, dw.sum(0), None, None, None


def _rms_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


@pytest.mark.parametrize(("in_place", "restore"), [(False, False), (True, True), (True, False)])
def test_rms_norm_backward_in_place_or_not_matches_torch(in_place: bool, restore: bool) -> None:
    """The backward's grid is tuned (1, 2, 3 or 5 programs over 9 rows, each summing its
    rows' weight gradient into one row of a NaN-filled buffer zeroed by ``reset_to_zero``).
    With ``in_place`` the kernel writes the input's gradient over the output's gradient it
    reads, so every launch of the tuning would start from the last one's result: the
    gradients still equal PyTorch's, and the caller's ``dy`` ends as one launch's ``dx``
    (Liger's documented in-place effect), not as the result of every timed launch.
    ``restore_value=["dy"]`` says so; without it the in-place rule finds ``dy`` itself and
    one warning names it. Not in place, ``dy`` is left as it was and nothing warns. A second
    call launches the decided configuration on fresh buffers with the same results."""
    # ported from: linkedin/Liger-Kernel test/transformers/test_rms_norm.py::test_correctness
    torch.manual_seed(1)
    name = f"liger-rms-{in_place}-{restore}"
    for _ in range(2):
        x = torch.randn(9, 20, requires_grad=True)
        w = torch.randn(20, requires_grad=True)
        dy = torch.randn(9, 20)
        keep = dy.clone()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = RMSNorm.apply(x, w, in_place, restore, name)
            (dx, dw) = torch.autograd.grad(out, (x, w), dy)
        ref_x, ref_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        ref = _rms_reference(ref_x, ref_w)
        ref.backward(keep)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(dx, ref_x.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(dw, ref_w.grad, rtol=1e-4, atol=1e-4)
        if in_place:
            torch.testing.assert_close(dy, ref_x.grad, rtol=1e-4, atol=1e-4)
        else:
            assert torch.equal(dy, keep)
        in_place_warnings = [str(m.message) for m in seen if "in place" in str(m.message)]
        tuned = SOURCES[f"{name}-bwd"][-1] == "tuned"
        if in_place and not restore and tuned:
            assert len(in_place_warnings) == 1 and "'dy'" in in_place_warnings[0]
        else:
            assert in_place_warnings == []
    assert SOURCES[f"{name}-bwd"] == ["tuned", "memory"]


# --- The same kernels as torch.library custom operators -------------------------------------


def _rms_fwd_impl(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from ported_kernels_thirteenth import rms_norm_fwd

    rows, cols = x.shape
    y, rstd = torch.empty_like(x), torch.empty(rows)
    res = autotune_launch(rms_norm_fwd, space=[Config(num_warps=1), Config(num_warps=2)],
                          grid=(rows,), args=(x, w, y, rstd, cols, 1e-6),
                          kwargs={"COLS": 32}, name="op-rms-fwd")  # fmt: skip
    _note("op-rms-fwd", res)
    return y, rstd


def _rms_bwd_impl(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                  rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    from ported_kernels_thirteenth import rms_norm_bwd

    rows, cols = x.shape
    dy = dy.contiguous()
    dx = torch.empty_like(dy)
    dw = torch.full((MOST, cols), float("nan"))
    res = autotune_launch(rms_norm_bwd, space=dict(PROGRAMS=[1, 2, 3, MOST]),
                          grid=lambda c: (c.PROGRAMS,),
                          args=lambda c: (dy, dx, x, w, rstd, dw, rows, cols,
                                          cdiv(rows, c.PROGRAMS)),
                          kwargs={"COLS": 32}, reset_to_zero=["dw"], name="op-rms-bwd")  # fmt: skip
    _note("op-rms-bwd", res)
    return dx, dw.sum(0)


def _register_rms_ops() -> Any:
    lib = "ported13"
    fwd = torch.library.custom_op(f"{lib}::rms_fwd", _rms_fwd_impl, mutates_args=())
    bwd = torch.library.custom_op(f"{lib}::rms_bwd", _rms_bwd_impl, mutates_args=())

    @fwd.register_fake
    def _(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.empty_like(x), x.new_empty(x.shape[0])

    @bwd.register_fake
    def _(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor) -> Any:
        return torch.empty_like(x), torch.empty_like(w)

    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        x, w = inputs
        ctx.save_for_backward(x, w, output[1])

    def backward(ctx: Any, dy: torch.Tensor, _drstd: Any) -> Any:
        x, w, rstd = ctx.saved_tensors
        return bwd(dy, x, w, rstd)

    fwd.register_autograd(backward, setup_context=setup_context)
    return fwd, bwd


def test_rms_norm_as_custom_operators_passes_opcheck_and_compiles(fresh_dynamo: None) -> None:
    """The forward and backward sites inside ``torch.library.custom_op`` operators (declared
    to mutate nothing) with a registered autograd formula: ``torch.library.opcheck`` runs
    each operator as PyTorch checks one (schema: no input changed by a call that tunes;
    fake tensors; autograd registration; AOT dispatch with dynamic shapes), and a model
    compiled with ``torch.compile`` (``aot_eager``) gives PyTorch's output and gradients,
    through the decided configurations."""
    # ported from: linkedin/Liger-Kernel test/transformers/test_rms_norm.py::test_correctness_functional
    fwd, bwd = _register_rms_ops()
    torch.manual_seed(2)
    x = torch.randn(9, 20, requires_grad=True)
    w = torch.randn(20, requires_grad=True)
    rstd = torch.rsqrt(x.detach().pow(2).mean(-1) + 1e-6)
    torch.library.opcheck(fwd, (x, w))
    torch.library.opcheck(bwd, (torch.randn(9, 20), x.detach(), w.detach(), rstd))
    assert SOURCES["op-rms-fwd"][0] == "tuned" and SOURCES["op-rms-bwd"][0] == "tuned"

    def model(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return fwd(x * 2, w)[0].sin()

    compiled = torch.compile(model, backend="aot_eager")
    dy = torch.randn(9, 20)
    out = compiled(x, w)
    dx, dw = torch.autograd.grad(out, (x, w), dy)
    ref_x, ref_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    ref = _rms_reference(ref_x * 2, ref_w).sin()
    ref.backward(dy)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dx, ref_x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dw, ref_w.grad, rtol=1e-4, atol=1e-4)


# --- Triton test_cache: a Triton function given as a constexpr, and what it calls ----------

HELPERS = """
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.jit
def deep(x, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK == 32)
    return x + 1.0


@triton.jit
def step(x, BLOCK: tl.constexpr):
    return deep(x, BLOCK)


@triton.jit
def apply(dst, src, n, BLOCK: tl.constexpr, *, OP: tl.constexpr = step):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, OP(tl.load(src + i, mask=i < n), BLOCK), mask=i < n)


def run(dst, src, passed):
    n = dst.numel()
    extra = {"OP": step} if passed else {}
    return autotune_launch(apply, space=dict(BLOCK=[32, 64]), grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(dst, src, n), kwargs=lambda c: {"BLOCK": c.BLOCK, **extra},
                           name="deep-op")
"""


def _load_helpers(path: Any, text: str) -> Any:
    import importlib.util

    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("ported13_helpers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GLOBAL_OP = HELPERS.replace(
    "@triton.jit\ndef apply(dst, src, n, BLOCK: tl.constexpr, *, OP: tl.constexpr = step):",
    "OP = tl.constexpr(step)\n\n\n@triton.jit\ndef apply(dst, src, n, BLOCK: tl.constexpr):",
)


@pytest.mark.parametrize("how", ["default", "argument", "global"])
def test_a_function_edited_under_a_constexpr_function_value_is_tuned_again(
    tmp_path: Any, how: str
) -> None:
    """A Triton function given as a ``tl.constexpr`` (a keyword-only parameter's default,
    an argument of each call, or a global ``OP = tl.constexpr(step)`` the kernel reads)
    calls a helper whose ``tl.static_assert`` lets only one block size build. The helper
    edited (only BLOCK=64 builds now) is another kernel, as Triton's cache key of the
    function covers what it calls: the new process tunes again and launches BLOCK=64. The
    key held the function's own source alone, so the stored BLOCK=32 was served from disk
    and failed at launch."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_keyword_only_default_dependency_change
    from runtime_helpers import new_process

    from tunedsl.runtime import api

    assert GLOBAL_OP != HELPERS
    text = GLOBAL_OP if how == "global" else HELPERS
    passed = how == "argument"
    path = tmp_path / "ported13_helpers.py"
    src = torch.randn(100)
    dst = torch.zeros(100)
    first = _load_helpers(path, text).run(dst, src, passed)
    assert first.source == "tuned" and first.config == Config(BLOCK=32)
    assert torch.equal(dst, src + 1.0)
    new_process(*api._sites.values())
    dst = torch.zeros(100)
    assert _load_helpers(path, text).run(dst, src, passed).source == "disk"
    new_process(*api._sites.values())
    dst = torch.zeros(100)
    edited = text.replace("BLOCK == 32", "BLOCK == 64")
    changed = _load_helpers(path, edited).run(dst, src, passed)
    assert changed.source == "tuned" and changed.config == Config(BLOCK=64)
    assert torch.equal(dst, src + 1.0)


OPS = """
import triton
import triton.language as tl


@triton.jit
def deep(x, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK == 32)
    return x + 1.0
"""


def test_a_helper_reached_through_a_module_under_a_constexpr_function_is_part_of_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, with the helper in a module the function reaches by attribute
    (``ops.deep(x, BLOCK)``): the module's helper edited is tuned again."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_keyword_only_default_dependency_change
    import sys

    from runtime_helpers import new_process

    from tunedsl.runtime import api

    monkeypatch.syspath_prepend(str(tmp_path))
    text = HELPERS.replace("import triton\n", "import ported13_ops as ops\nimport triton\n", 1)
    text = text.replace("    return deep(x, BLOCK)", "    return ops.deep(x, BLOCK)")
    path, ops = tmp_path / "ported13_helpers.py", tmp_path / "ported13_ops.py"
    src = torch.randn(100)
    for version, block in enumerate((32, 64)):
        monkeypatch.delitem(sys.modules, "ported13_ops", raising=False)
        ops.write_text(OPS.replace("BLOCK == 32", f"BLOCK == {block}"), encoding="utf-8")
        new_process(*api._sites.values())
        dst = torch.zeros(100)
        res = _load_helpers(path, text).run(dst, src, False)
        assert res.source == "tuned" and res.config == Config(BLOCK=block), version
        assert torch.equal(dst, src + 1.0)
    monkeypatch.delitem(sys.modules, "ported13_ops", raising=False)


HEURISTIC = """
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


def rows_per_program(n):
    return 32


def block_heuristic(args):
    return rows_per_program(args["n"])


@triton.heuristics({"CAP": block_heuristic})
@triton.jit
def capped(dst, src, n, BLOCK: tl.constexpr, CAP: tl.constexpr):
    tl.static_assert(BLOCK == CAP)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n) + 1.0, mask=i < n)


def run(dst, src, passed):
    n = dst.numel()
    return autotune_launch(capped, space=dict(BLOCK=[32, 64]), grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(dst, src, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                           name="heuristic-helper")
"""


def test_a_helper_a_heuristic_calls_edited_is_another_kernel(tmp_path: Any) -> None:
    """attorch computes a kernel's block of rows with a heuristic function defined apart
    from the kernel, which calls helpers of its own. The heuristic here calls
    ``rows_per_program``, whose value only BLOCK equal to it builds (``tl.static_assert``):
    the helper edited (32 to 64) computes another parameter, so another kernel, and the new
    process tunes again and launches BLOCK=64. The helper was not part of the kernel's
    identity: the stored BLOCK=32 was served from disk and failed at launch."""
    # ported from: BobMcDear/attorch tests/test_layer_norm_layer.py::test_layer_norm_layer (its heuristic, BLOCK_SIZE_BATCH_heuristic, defined apart and calling helpers)
    from runtime_helpers import new_process

    from tunedsl.runtime import api

    path = tmp_path / "ported13_heuristic.py"
    src = torch.randn(100)
    for block in (32, 64):
        new_process(*api._sites.values())
        dst = torch.zeros(100)
        text = HEURISTIC.replace("    return 32\n", f"    return {block}\n")
        res = _load_helpers(path, text).run(dst, src, False)
        assert res.source == "tuned" and res.config == Config(BLOCK=block)
        assert torch.equal(dst, src + 1.0)
    new_process(*api._sites.values())
    assert _load_helpers(path, text).run(torch.zeros(100), src, False).source == "disk"


CONSTEXPR_FN = HEURISTIC.replace(
    """def block_heuristic(args):
    return rows_per_program(args["n"])


@triton.heuristics({"CAP": block_heuristic})
@triton.jit
def capped(dst, src, n, BLOCK: tl.constexpr, CAP: tl.constexpr):
    tl.static_assert(BLOCK == CAP)""",
    """@triton.constexpr_function
def cap():
    return rows_per_program(0)


@triton.jit
def capped(dst, src, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK == cap())""",
)


def test_a_helper_a_constexpr_function_calls_edited_is_another_kernel(tmp_path: Any) -> None:
    """Triton test_constexpr_fn_change, one call further: the kernel's
    ``@triton.constexpr_function`` calls a plain Python helper, whose value only BLOCK equal
    to it builds. The helper edited is another kernel, tuned again (it was not part of the
    kernel's identity: the stored choice was served and failed at launch)."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_constexpr_fn_change
    from runtime_helpers import new_process

    from tunedsl.runtime import api

    assert CONSTEXPR_FN != HEURISTIC
    path = tmp_path / "ported13_constexpr_fn.py"
    src = torch.randn(100)
    for block in (32, 64):
        new_process(*api._sites.values())
        dst = torch.zeros(100)
        text = CONSTEXPR_FN.replace("    return 32\n", f"    return {block}\n")
        res = _load_helpers(path, text).run(dst, src, False)
        assert res.source == "tuned" and res.config == Config(BLOCK=block)
        assert torch.equal(dst, src + 1.0)


def test_a_helper_a_heuristic_calls_through_a_module_edited_is_another_kernel(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, with the helper in a module the heuristic reaches by attribute
    (``sizes.rows_per_program(n)``, as attorch's heuristics import their helpers)."""
    # ported from: BobMcDear/attorch tests/test_layer_norm_layer.py::test_layer_norm_layer (its heuristic, BLOCK_SIZE_BATCH_heuristic, defined apart and calling helpers)
    import sys

    from runtime_helpers import new_process

    from tunedsl.runtime import api

    monkeypatch.syspath_prepend(str(tmp_path))
    text = HEURISTIC.replace(
        "def rows_per_program(n):\n    return 32\n", "import ported13_sizes as sizes\n"
    ).replace("return rows_per_program(", "return sizes.rows_per_program(")
    assert "sizes.rows_per_program(" in text and "return 32" not in text
    for block in (32, 64):
        monkeypatch.delitem(sys.modules, "ported13_sizes", raising=False)
        sizes = f"def rows_per_program(n):\n    return {block}\n"
        (tmp_path / "ported13_sizes.py").write_text(sizes, encoding="utf-8")
        new_process(*api._sites.values())
        src, dst = torch.randn(100), torch.zeros(100)
        res = _load_helpers(tmp_path / "ported13_heuristic.py", text).run(dst, src, False)
        assert res.source == "tuned" and res.config == Config(BLOCK=block)
        assert torch.equal(dst, src + 1.0)
    monkeypatch.delitem(sys.modules, "ported13_sizes", raising=False)
