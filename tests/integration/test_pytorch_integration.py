"""tunedsl inside PyTorch on the CPU (interpreter): ``tunedsl.torch_op`` under
``torch.compile(fullgraph=True)``, and the CUDA-graph-capture rule of a site's miss path
(driven through ``decide_on_miss``'s capture test; the real capture is in tests/gpu)."""

from __future__ import annotations

import pytest
import torch
from runtime_helpers import call, site
from runtime_kernels import vadd

import tunedsl
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import capture
from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton


def tuned_vadd(a: torch.Tensor, b: torch.Tensor, name: str) -> torch.Tensor:
    """``a + b`` through an ``autotune_launch`` site named ``name``."""
    c = torch.empty_like(a)
    n = a.numel()
    autotune_launch(
        vadd,
        space={"tile": [32, 64]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name=name,
    )
    return c


@tunedsl.torch_op("tunedsl_test::vadd", fake=lambda a, b: torch.empty_like(a))
def vadd_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return tuned_vadd(a, b, "torch-op-vadd")


def plain_vadd(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return tuned_vadd(a, b, "plain-vadd-in-compile") * 2


def test_autotune_launch_in_a_compiled_function_runs_eagerly_and_fullgraph_names_the_fix() -> None:
    a, b = torch.arange(100, dtype=torch.float32), torch.ones(100)
    torch._dynamo.reset()
    graph_broken = torch.compile(plain_vadd, backend="aot_eager")
    assert torch.equal(graph_broken(a, b), (a + b) * 2)
    torch._dynamo.reset()
    whole = torch.compile(plain_vadd, backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match=r"DSL site .*tunedsl\.torch_op") as err:
        whole(a, b)
    assert "autotune_launch" in str(err.value) and "_getframe" not in str(err.value)


def test_after_its_graph_break_autotune_launch_runs_eagerly_dynamo_compiles_none_of_it() -> None:
    # The break hands the call back to Python: Dynamo must not go on compiling the rest of
    # autotune_launch and what it calls (it stopped again at sys._getframe, with PyTorch's
    # warning to file an issue, then at tunedsl's locks and generators).
    from torch._dynamo.utils import counters

    a, b = torch.arange(100, dtype=torch.float32), torch.ones(100)
    torch._dynamo.reset()
    counters.clear()
    assert torch.equal(torch.compile(plain_vadd, backend="aot_eager")(a, b), (a + b) * 2)
    breaks = list(counters["graph_break"])
    assert breaks and all("tunedsl.autotune_launch runs eagerly" in why for why in breaks), breaks
    resumed = [name for name in counters["resumes"] if "autotune_launch" in name]
    assert resumed == []


def test_torch_op_compiles_with_fullgraph_and_uses_the_tuned_site() -> None:
    a, b = torch.randn(100), torch.randn(100)

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return vadd_op(x, y) * 2 + 1

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")  # a break would raise
    torch.testing.assert_close(compiled(a, b), (a + b) * 2 + 1)
    explanation = torch._dynamo.explain(f)(a, b)
    assert explanation.graph_break_count == 0
    ops = [n.target for g in explanation.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert any("tunedsl_test.vadd" in str(t) or "vadd" in str(t) for t in ops)
    # The op's body ran the site: it tuned once, then reads the decision from memory.
    from tunedsl.runtime.api import _sites

    (s,) = [s for s in _sites.values() if s.site_id == "torch-op-vadd"]
    assert [r.source for r in s.table().values()] == ["memory"]


def test_torch_op_in_a_module_with_fullgraph() -> None:
    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return vadd_op(x, torch.ones_like(x))

    torch._dynamo.reset()
    model = torch.compile(AddOne(), fullgraph=True, backend="aot_eager")
    x = torch.randn(77)
    torch.testing.assert_close(model(x), x + 1)


def test_torch_op_needs_a_fake_for_tensor_outputs() -> None:
    with pytest.raises(UsageError, match="pass fake="):

        @tunedsl.torch_op("tunedsl_test::nofake")
        def nofake(a: torch.Tensor) -> torch.Tensor:
            return a

    with pytest.raises(UsageError, match="namespace::op_name"):
        tunedsl.torch_op("no_namespace")


def test_a_miss_during_capture_never_tunes(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = torch.randn(100), torch.randn(100)
    c = torch.empty_like(a)
    s = site()
    # The capture test is the only thing replaced (no CUDA here): the site, the records and
    # decide are real.
    monkeypatch.setattr(capture, "capturing", lambda: True)
    with pytest.raises(UsageError, match="CUDA-graph capture") as info:
        call(s, vadd, (a, b, c, 100), 100)
    assert "precompile --tune" in str(info.value) and "warm-up" in str(info.value)
    assert s.table() == {}  # nothing was decided (nor tuned)

    # capture="default": the site's default configuration, no tuning.
    s2 = site(options={"capture": "default"}, line=20)
    result = call(s2, vadd, (a, b, c, 100), 100)
    assert result.source == "default" and result.record is None
    torch.testing.assert_close(c, a + b)

    # A key decided before the capture (a stored record) launches as usual under capture.
    monkeypatch.setattr(capture, "capturing", lambda: False)
    s3 = site(line=30)
    tuned = call(s3, vadd, (a, b, c, 100), 100)
    assert tuned.source == "tuned"
    monkeypatch.setattr(capture, "capturing", lambda: True)
    s3.clear()  # forget memory: the decision must come from the record on disk
    again = call(s3, vadd, (a, b, c, 100), 100)
    assert again.source == "disk" and again.config == tuned.config


def test_capturing_is_false_without_cuda() -> None:
    assert capture.capturing() is False
