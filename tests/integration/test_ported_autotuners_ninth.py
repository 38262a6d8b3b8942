"""A ninth batch of other autotuners' test suites, ported to tunedsl: PyTorch Inductor's
user-defined Triton kernels under ``torch.compile`` (test/inductor/test_triton_kernels.py: an
autotuned kernel that increments its input with ``restore_value``, a kernel given a view and
returning one, one kernel called twice in one graph on float and int tensors while writing
its inputs, ``@triton.heuristics`` stacked on the tuned kernel).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through DSL macros compiled by ``tunedsl.frontend``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from tunedsl.frontend.compile import compile_source
from tunedsl.warn import forget

pytestmark = [
    pytest.mark.needs_triton,
    pytest.mark.skipif(
        not hasattr(torch.compiler, "substitute_in_graph"), reason="needs PyTorch 2.6 or later"
    ),
]

SCRIPT = """\
import torch
from ported_kernels_ninth import add_even, increment, mul2, mul2_add_act
from tunedsl import autotune, cdiv


def incremented(x):
    autotune(space=dict(block=[16, 32]), blocks=cdiv(x.numel(), $block), restore_value=["x"],
             increment(x, x.numel(), BLOCK=$block))
    return x


def incremented_watched(x):
    autotune(space=dict(block=[16, 32]), blocks=cdiv(x.numel(), $block),
             increment(x, x.numel(), BLOCK=$block))
    return x


def take_view(x):
    out = torch.zeros_like(x)
    autotune(space=dict(block=[8, 16]), blocks=cdiv(out.numel(), $block),
             mul2(x, out, out.numel(), BLOCK=$block))
    return out


def return_view(x):
    out = torch.zeros_like(x)
    autotune(space=dict(block=[8, 16]), blocks=cdiv(out.numel(), $block),
             mul2(x, out, out.numel(), BLOCK=$block))
    return out.view(4, 4)


def twice(x, y, xi, yi, o, oi):
    n = o.numel()
    for a, b, out, act in ((x, y, o, "zero_negs"), (xi, yi, oi, None)):
        autotune(space=dict(block=[4, 8]), blocks=cdiv(n, $block),
                 mul2_add_act(a, b, out, n, BLOCK=$block, ACT=act))
    return o, oi


def added_even(a, b):
    out = torch.empty_like(a)
    autotune(space=dict(block=[16, 32]), blocks=cdiv(a.numel(), $block),
             add_even(a, b, out, a.numel(), BLOCK=$block))
    return out
"""

TWICE_LINE = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "mul2_add_act(a, b" in s) - 1


def load(path: Path) -> dict[str, Any]:
    """``SCRIPT`` written to ``path``, expanded by the front end and run in a namespace of
    its own, as a notebook cell's code is: no module in ``sys.modules`` has its file."""
    path.write_text(SCRIPT, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_ninth", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path, fresh_dynamo: None) -> dict[str, Any]:
    return load(tmp_path / "ported_ninth.py")


# --- Inductor test_triton_kernels: user kernels under torch.compile ---------------------------


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_restore_value
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", ["incremented", "incremented_watched"])
def test_an_in_place_increment_inside_torch_compile_adds_one_once(
    dsl: dict[str, Any], backend: str, name: str
) -> None:
    """A kernel that increments its input in place, tuned over two tiles inside
    ``torch.compile(fullgraph=True)``: the caller's tensor is one more than before, on the
    call that tunes (every timed launch restored, by ``restore_value=["x"]`` or by the
    in-place watch) and on the call that finds the decision, and the function returns the
    very tensor it was given."""
    forget("inplace:")
    compiled = torch.compile(dsl[name], fullgraph=True, backend=backend)
    for _ in range(2):
        x = torch.arange(40, dtype=torch.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = compiled(x)
        assert torch.equal(x, torch.arange(40, dtype=torch.float32) + 1)
        assert result is x or torch.equal(result, x)


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_with_views
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_view_in_and_a_view_out_inside_torch_compile(
    dsl: dict[str, Any], backend: str, dynamic: bool
) -> None:
    """A site given a flat view of a 4x4 tensor, and one whose function returns a view of
    its output, compiled with and without dynamic shapes: each gives the eager result, of
    the right shape."""
    t = torch.rand(4, 4)
    flat = t.view(16)
    take = torch.compile(dsl["take_view"], fullgraph=True, backend=backend, dynamic=dynamic)
    give = torch.compile(dsl["return_view"], fullgraph=True, backend=backend, dynamic=dynamic)
    assert torch.equal(take(flat), flat * 2)
    shaped = give(flat)
    assert shaped.shape == (4, 4)
    assert torch.equal(shaped, t * 2)
    assert torch.equal(t.view(16), flat)  # the input is read, never written


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_multi_kernel
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_one_site_twice_in_a_graph_writing_its_inputs(dsl: dict[str, Any], backend: str) -> None:
    """One site reached twice in one compiled graph, on float tensors with
    ``ACT="zero_negs"`` and on int tensors with ``ACT=None`` (two keys, each tuned), its
    kernel doubling both inputs in place before adding them: each output is one launch's
    result, each input doubled once, and the in-place warning is shown at the site's line
    (the script runs in a namespace of its own, as a notebook cell's code does: the warning
    was dropped without a word where no imported module had the site's file)."""
    forget("inplace:")
    t1 = torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0])
    t2 = t1.clone()
    t1i = torch.tensor([-2, 1, 0, 1, -1])
    t2i = torch.tensor([1, -2, 1, 0, -1])
    expected_float = (2 * t1 + 2 * t2).clamp(min=0)
    expected_int = 2 * t1i + 2 * t2i
    inputs = [t.clone() for t in (t1, t2, t1i, t2i)]
    o, oi = torch.zeros_like(t1), torch.zeros_like(t1i)
    compiled = torch.compile(dsl["twice"], backend=backend)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result, result_int = compiled(*inputs, o, oi)
    assert torch.equal(result, expected_float)
    assert torch.equal(result_int, expected_int)
    for after, before in zip(inputs, (t1, t2, t1i, t2i), strict=True):
        assert torch.equal(after, 2 * before)
    places = [(Path(w.filename).name, w.lineno) for w in seen if "in place" in str(w.message)]
    assert places == [("ported_ninth.py", TWICE_LINE)], places


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_2d_autotune
@pytest.mark.parametrize("dynamic", [False, True])
def test_heuristics_stacked_on_the_tuned_kernel_inside_torch_compile(
    dsl: dict[str, Any], dynamic: bool
) -> None:
    """``@triton.heuristics`` over the tuned kernel (its ``EVEN`` computed from ``n`` and the
    configuration's ``BLOCK``, and an unmasked load taken where it is true), compiled: the
    heuristic sees each configuration's ``BLOCK``, so a size that is a multiple of one tile
    and not of the other gives the sum under either, in compiled code as in eager."""
    compiled = torch.compile(
        dsl["added_even"], fullgraph=True, backend="aot_eager", dynamic=dynamic
    )
    for n in (48, 64, 50):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(compiled(a, b), a + b)
        torch.testing.assert_close(dsl["added_even"](a, b), a + b)


# ported from: pytorch/pytorch test/inductor/test_triton_kernels.py::test_triton_kernel_mutation_not_mark_dirty
@pytest.mark.parametrize("name", ["incremented", "incremented_watched"])
def test_tuning_an_in_place_kernel_leaves_autograds_version_alone(
    dsl: dict[str, Any], name: str
) -> None:
    """A kernel that writes a tensor autograd saved for a backward pass (``x.clone()``,
    whose ``sin`` saves it) marks nothing dirty: a plain launch leaves its version counter
    alone, so ``backward`` runs. The call that tunes does the same: its restores of the
    caller's values (``restore_value=["x"]``, or the in-place watch's) are bookkeeping, not
    writes autograd must see; they raised "modified by an inplace operation" at
    ``backward`` on the tuning call only, while every later call and a plain launch ran."""
    from ported_kernels_ninth import increment

    def step(launch: Any) -> torch.Tensor:
        x = torch.linspace(-1.0, 1.0, 40, requires_grad=True)
        xc = x.clone()
        out = xc.sin()
        version = xc._version
        launch(xc)
        assert xc._version == version
        out.sum().backward()
        torch.testing.assert_close(xc.detach(), x.detach() + 1)
        assert x.grad is not None
        return x.grad

    plain = step(lambda t: increment[(3,)](t, t.numel(), BLOCK=16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuned = step(dsl[name])  # the first call: tunes
        again = step(dsl[name])  # the decision found
    torch.testing.assert_close(tuned, plain)
    torch.testing.assert_close(again, plain)
