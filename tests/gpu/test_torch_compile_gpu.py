"""A plain DSL site inside ``torch.compile`` on a CUDA GPU: Inductor with
``fullgraph=True``, ``mode="reduce-overhead"`` (CUDA graphs), ``dynamic=True`` without
recompiles, the C fused launch as the site's call, a second process reading the record, and
a mistake reported at the user's line. CPU twin: tests/integration/test_torch_compile_site.py.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")

from tunedsl.backends.torch_compile import (  # noqa: E402
    FUSED_CALL_MIN_TORCH,
    MIN_TORCH,
    supported,
)

if not supported(torch.__version__):
    pytest.skip(
        f"torch {torch.__version__}: a plain site traces as one operator from torch "
        f"{'.'.join(map(str, MIN_TORCH))} on; here it stays a graph break",
        allow_module_level=True,
    )
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from tunedsl.errors import UsageError  # noqa: E402
from tunedsl.frontend.compile import compile_source  # noqa: E402

SCRIPT = """\
from shared_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    autotune(space=dict(tile=[256, 1024], num_warps=[2, 4]), blocks=cdiv(n, $tile),
             vadd(a, b, c, n, TILE=$tile))


def not_a_kernel(a, n, TILE):
    pass


def broken(a, n):
    autotune(space=dict(tile=[256]), blocks=cdiv(n, $tile),
             not_a_kernel(a, n, TILE=$tile))


def add_counted(a, b, c, counts):
    autotune(space=dict(tile=[256, 1024]), blocks=cdiv(int(counts.sum().item()), $tile),
             vadd(a, b, c, a.numel(), TILE=$tile))
"""
BROKEN_LINE = 15


def load(tmp_path: Path, name: str) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(SCRIPT, encoding="utf-8")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile_source(path.read_bytes(), str(path)), module.__dict__)
    return module


def site_of(module: types.ModuleType, n: int = 0) -> Any:
    return next(v for k, v in vars(module).items() if k.startswith(f"__tunedsl_site_{n}"))


def step(module: types.ModuleType) -> Callable[..., Any]:
    def f(x: Any, y: Any) -> Any:
        out = torch.empty_like(x)
        module.add(x, y, out, x.numel())
        return (out * 2).relu()

    return f


def expected(a: Any, b: Any) -> Any:
    return ((a + b) * 2).relu()


class Counting:
    """Inductor, counting the graphs it compiles (one per compile or recompile)."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        from torch._inductor.compile_fx import compile_fx

        self.graphs += 1
        return compile_fx(gm, example_inputs)


@pytest.fixture
def tunes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from tunedsl.runtime import tuner

    calls: list[Any] = []
    real = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda req: calls.append(req) or real(req))
    return calls


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_fullgraph_inductor_launches_the_decided_configuration(
    tmp_path: Path, tunes: list[Any]
) -> None:
    module = load(tmp_path, "gpu_tc_inductor")
    a, b = torch.randn(10000, device="cuda"), torch.randn(10000, device="cuda")
    backend = Counting()
    compiled = torch.compile(step(module), fullgraph=True, backend=backend)  # a break raises
    torch.testing.assert_close(compiled(a, b), expected(a, b))
    site = site_of(module)
    (entry,) = site._table.values()
    assert len(tunes) == 1
    for _ in range(3):
        torch.testing.assert_close(compiled(b, a), expected(a, b))
    assert list(site._table.values()) == [entry] and len(tunes) == 1 and backend.graphs == 1


def test_the_c_fused_launch_traces_too(tmp_path: Path, tunes: list[Any]) -> None:
    from tunedsl.runtime import native

    module = load(tmp_path, "gpu_tc_fused")
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    for _ in range(3):  # eager calls: the site's call becomes its C fused launch
        module.add(a, b, c, a.numel())
    site = site_of(module)
    if native.fused_type() is None:
        pytest.skip(f"no C fused launch here: {native.status()}")
    if supported(torch.__version__, FUSED_CALL_MIN_TORCH):
        assert type(site.launch) is native.fused_type()
    else:  # Dynamo (loaded by the fixture) cannot trace a C type's call: the site's own call
        assert site.launch == site._call and type(site._fast) is native.fused_type()
    compiled = torch.compile(step(module), fullgraph=True)
    torch.testing.assert_close(compiled(a, b), expected(a, b))
    assert len(tunes) == 1 and len(site.table()) == 1


def test_reduce_overhead_replays_the_decided_launch(tmp_path: Path, tunes: list[Any]) -> None:
    module = load(tmp_path, "gpu_tc_graphs")
    a, b = torch.randn(8192, device="cuda"), torch.randn(8192, device="cuda")
    compiled = torch.compile(step(module), mode="reduce-overhead", fullgraph=True)
    for _ in range(5):  # warm-up runs tune eagerly; later runs replay the recorded graph
        out = compiled(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected(a, b))
    a2, b2 = torch.randn_like(a), torch.randn_like(b)  # replay reads the new inputs
    torch.testing.assert_close(compiled(a2, b2).clone(), expected(a2, b2))
    assert len(tunes) == 1 and len(site_of(module).table()) == 1


def test_dynamic_sizes_do_not_recompile(tmp_path: Path) -> None:
    module = load(tmp_path, "gpu_tc_dynamic")
    backend = Counting()
    compiled = torch.compile(step(module), fullgraph=True, dynamic=True, backend=backend)
    counters = torch._dynamo.utils.counters
    graphs_before = counters["stats"]["unique_graphs"]
    for n in (1000, 5000, 123457, 1 << 20, 5000):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        torch.testing.assert_close(compiled(a, b), expected(a, b))
    assert backend.graphs == 1
    assert counters["stats"]["unique_graphs"] - graphs_before == 1  # Dynamo's own count
    assert len(site_of(module).table()) == 4  # each size decided at run time, by the site


def test_a_mistake_is_reported_at_the_users_line(tmp_path: Path) -> None:
    module = load(tmp_path, "gpu_tc_mistake")
    a = torch.randn(1024, device="cuda")
    with pytest.raises(UsageError) as eager:
        module.broken(a, a.numel())
    site_of(module, 1).clear()

    def f(x: Any) -> Any:
        module.broken(x, x.numel())
        return x + 1

    with pytest.raises(UsageError) as inside:
        torch.compile(f, fullgraph=True)(a)
    assert str(inside.value) == str(eager.value)
    lines = [
        fr.lineno
        for fr in traceback.extract_tb(inside.value.__traceback__)
        if fr.filename.endswith("gpu_tc_mistake.py")
    ]
    assert lines and lines[-1] == BROKEN_LINE, lines


CHILD = """
import json, sys, types
import torch
sys.path[:0] = [{tests!r}]
from tunedsl.frontend.compile import compile_source
from tunedsl.runtime import tuner
tunes = []
real_tune = tuner.tune
tuner.tune = lambda req: tunes.append(req) or real_tune(req)
path = {path!r}
module = types.ModuleType("gpu_tc_child"); module.__file__ = path
sys.modules["gpu_tc_child"] = module
exec(compile_source(open(path, "rb").read(), path), module.__dict__)
def f(x, y):
    out = torch.empty_like(x)
    module.add(x, y, out, x.numel())
    return out
a, b = torch.randn(50000, device="cuda"), torch.randn(50000, device="cuda")
torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, b), a + b)
site = next(v for k, v in vars(module).items() if k.startswith("__tunedsl_site_0"))
(result,) = site.table().values()
print(json.dumps([len(tunes), len(site.table()), dict(result.config.items())]))
"""


def test_a_second_process_finds_the_record(tmp_path: Path) -> None:
    from tunedsl.store import paths

    path = tmp_path / "gpu_tc_child.py"
    path.write_text(SCRIPT, encoding="utf-8")
    script = CHILD.format(tests=str(Path(__file__).resolve().parents[1]), path=str(path))

    def child() -> list[Any]:
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    tuned, entries, config = child()
    assert (tuned, entries) == (1, 1)
    records = sorted(paths.records_dir().glob("*.json"))
    assert len(records) == 1
    assert child() == [0, 1, config]  # the record: no tuning, the same configuration


def test_a_graph_break_at_a_site_runs_it_eagerly(tmp_path: Path) -> None:
    """``blocks=`` reads a tensor's value: Dynamo breaks the graph at the site, whose call
    then runs eagerly (Dynamo compiles none of the site's frames)."""
    module = load(tmp_path, "gpu_break")

    def f(x: Any, y: Any, counts: Any) -> Any:
        out = torch.zeros_like(x)
        module.add_counted(x, y, out, counts)
        return out + 1

    a, b = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    counts = torch.tensor([3000, 2000], device="cuda")
    compiled = torch.compile(f)
    for _ in range(3):  # the repeats make the C fused launch the site's call
        torch.testing.assert_close(compiled(a, b, counts), a + b + 1)


def test_non_strict_export_after_eager_calls(tmp_path: Path) -> None:
    """After eager calls (the C fused launch is the site's call), non-strict export puts the
    operator in the program instead of launching on fake tensors."""
    module = load(tmp_path, "gpu_export")

    class Block(torch.nn.Module):
        def forward(self, x: Any, y: Any) -> Any:
            return step(module)(x, y)

    a, b = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    for _ in range(3):
        Block()(a, b)
    program = torch.export.export(Block(), (a, b), strict=False)
    assert "tunedsl.site_call" in program.graph_module.code
    torch.testing.assert_close(program.module()(a, b), ((a + b) * 2).relu())
