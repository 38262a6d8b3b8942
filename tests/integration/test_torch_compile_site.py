"""A plain DSL site inside ``torch.compile(fullgraph=True)`` on the CPU: ``aot_eager`` runs
the traced graph, whose ``tunedsl::site_call`` operator runs the real kernel through the
interpreter. (Inductor and CUDA graphs: tests/gpu/test_torch_compile_gpu.py.)"""

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
import torch

from tunedsl.errors import UsageError
from tunedsl.frontend.compile import compile_source

pytestmark = [
    pytest.mark.needs_triton,
    pytest.mark.skipif(
        not hasattr(torch.compiler, "substitute_in_graph"), reason="needs PyTorch 2.6 or later"
    ),
]

SCRIPT = """\
from shared_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    autotune(space=dict(tile=[32, 64]), blocks=cdiv(n, $tile),
             vadd(a, b, c, n, TILE=$tile))


def not_a_kernel(a, n, TILE):
    pass


def broken(a, n):
    autotune(space=dict(tile=[32]), blocks=cdiv(n, $tile),
             not_a_kernel(a, n, TILE=$tile))


def add_keyed(a, b, c, n):
    autotune(space=dict(tile=[32, 64]), blocks=(cdiv(n, $tile), 1), key=(n // 512, "v"),
             vadd(a, b, c, n, TILE=$tile))


def add_counted(a, b, c, counts):
    autotune(space=dict(tile=[32, 64]), blocks=cdiv(int(counts.sum().item()), $tile),
             vadd(a, b, c, a.numel(), TILE=$tile))


def add_tile(a, b, c, n):
    result = autotune(space=dict(tile=[32, 64]), blocks=cdiv(n, $tile),
                      vadd(a, b, c, n, TILE=$tile))
    return result.config.tile


def add_limited(a, b, c, n, limit):
    autotune(space=dict(tile=[32, 64, 128]), blocks=cdiv(n, $tile),
             prune=lambda cs, args: [cfg for cfg in cs if cfg.tile <= limit],
             vadd(a, b, c, n, TILE=$tile))


SPACE = dict(tile=[32])


def add_global(a, b, c, n):
    autotune(space=SPACE, blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=$tile))


def add_into(a, b, n):
    autotune(space=dict(tile=[32, 64]), blocks=cdiv(n, $tile),
             vadd(a, b, a, n, TILE=$tile))
"""
ADD_LINE = 6  # the line the macro starts on
BROKEN_LINE = 15
ADD_INTO_LINE = SCRIPT.splitlines().index("def add_into(a, b, n):") + 2


def load(tmp_path: Path, name: str) -> types.ModuleType:
    """The DSL script as an imported module (Dynamo resolves a function's globals by module)."""
    path = tmp_path / f"{name}.py"
    path.write_text(SCRIPT, encoding="utf-8")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile_source(path.read_bytes(), str(path)), module.__dict__)
    return module


def site_of(module: types.ModuleType, n: int = 0) -> Any:
    return next(v for k, v in vars(module).items() if k.startswith(f"__tunedsl_site_{n}"))


class CountingBackend:
    """``aot_eager`` that counts the graphs it is given (one per compile or recompile)."""

    def __init__(self) -> None:
        self.graphs: list[Any] = []

    def __call__(self, gm: Any, example_inputs: Any) -> Callable[..., Any]:
        from torch._dynamo.backends.registry import lookup_backend

        self.graphs.append(gm)
        return lookup_backend("aot_eager")(gm, example_inputs)  # type: ignore[no-any-return]


def step(module: types.ModuleType) -> Callable[..., Any]:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        module.add(x, y, out, x.numel())
        return out * 2 + 1

    return f


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_site_compiles_with_fullgraph_as_one_operator(tmp_path: Path) -> None:
    module = load(tmp_path, "tc_fullgraph")
    backend = CountingBackend()
    compiled = torch.compile(step(module), fullgraph=True, backend=backend)  # a break raises
    a, b = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(compiled(a, b), (a + b) * 2 + 1)
    (graph,) = backend.graphs
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert any("tunedsl.site_call" in t for t in targets), targets
    # The operator ran the site's ordinary call: one decision, tuned once, then from memory.
    site = site_of(module)
    assert [r.source for r in site.table().values()] == ["memory"]
    torch.testing.assert_close(compiled(b, a), (a + b) * 2 + 1)
    assert len(site.table()) == 1 and len(backend.graphs) == 1


def test_compiled_and_eager_calls_share_one_decision_and_record(tmp_path: Path) -> None:
    module = load(tmp_path, "tc_shared")
    a, b = torch.randn(300), torch.randn(300)
    c = torch.empty_like(a)
    module.add(a, b, c, a.numel())  # eager first: tunes and writes the record
    site = site_of(module)
    (eager,) = site.table().values()
    compiled = torch.compile(step(module), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(a, b), (a + b) * 2 + 1)
    assert list(site.table().values()) == [eager]  # the same entry, no second tuning
    from tunedsl.store import paths

    records = sorted(paths.records_dir().glob("*.json"))
    assert len(records) == 1


def test_dynamic_sizes_do_not_recompile(tmp_path: Path) -> None:
    module = load(tmp_path, "tc_dynamic")
    backend = CountingBackend()
    compiled = torch.compile(step(module), fullgraph=True, dynamic=True, backend=backend)
    site = site_of(module)
    launches = set()
    counters = torch._dynamo.utils.counters
    graphs_before = counters["stats"]["unique_graphs"]
    for n in (100, 257, 1000, 100, 257, 100):  # hits of other keys than the last one
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(compiled(a, b), (a + b) * 2 + 1)
        launches.add(id(site.launch))
    assert len(backend.graphs) == 1  # one graph for every size
    assert counters["stats"]["unique_graphs"] - graphs_before == 1  # Dynamo's own count
    assert len(site.table()) == 3  # each size was decided at run time, by the site
    assert len(launches) == 1  # the compiled code checks the site's call: it stays put


def test_a_tuple_key_and_grid_follow_the_size(tmp_path: Path) -> None:
    module = load(tmp_path, "tc_keyed")
    backend = CountingBackend()

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        module.add_keyed(x, y, out, x.numel())
        return out

    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend=backend)
    for n in (100, 300, 1000):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(compiled(a, b), a + b)
    assert len(backend.graphs) == 1
    # key= is evaluated per call with the real size: 100 and 300 share (0, "v"), 1000 is (1, "v")
    assert len(site_of(module, 2).table()) == 2


def test_a_mistake_is_reported_at_the_users_line(tmp_path: Path) -> None:
    module = load(tmp_path, "tc_mistake")
    a = torch.randn(64)
    with pytest.raises(UsageError) as eager:
        module.broken(a, a.numel())
    site_of(module, 1).clear()

    def f(x: torch.Tensor) -> torch.Tensor:
        module.broken(x, x.numel())
        return x + 1

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    with pytest.raises(UsageError) as inside:
        compiled(a)
    assert str(inside.value) == str(eager.value)
    assert "@triton.jit" in str(inside.value)
    lines = [
        fr.lineno
        for fr in traceback.extract_tb(inside.value.__traceback__)
        if fr.filename.endswith("tc_mistake.py")
    ]
    assert lines and lines[-1] == BROKEN_LINE, lines


def test_a_warning_of_a_compiled_site_is_shown_at_the_sites_line(tmp_path: Path) -> None:
    # Compiled code has no frame of the user's function at the site's line: the warning
    # pointed at the compiled function's first line, in whichever file that was.
    from tunedsl.warn import forget

    module = load(tmp_path, "tc_warned")
    forget("inplace:")

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        module.add_into(x, y, x.numel())
        return x * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    a, b = torch.zeros(64), torch.ones(64)
    with pytest.warns(UserWarning, match="in place") as seen:
        out = compiled(a, b)
    torch.testing.assert_close(out, torch.full((64,), 2.0))
    places = [(Path(w.filename).name, w.lineno) for w in seen if "in place" in str(w.message)]
    assert places == [("tc_warned.py", ADD_INTO_LINE)], places


class TracedOnly(Exception):
    """Raised by :func:`trace_only` in place of running the compiled graph."""


def trace_only(graphs: list[Any]) -> Callable[..., Any]:
    """A backend that keeps the graph and runs nothing (a compiled kernel needs a GPU)."""

    def backend(gm: Any, example_inputs: Any) -> Callable[..., Any]:
        graphs.append(gm)

        def run(*args: Any) -> Any:
            raise TracedOnly

        return run

    return backend


def test_a_compiled_triton_kernel_traces_and_is_guarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU the site's kernel is a ``@triton.jit`` function, which Dynamo wraps in its own
    variable for user Triton kernels: the trace still files the real kernel with the plan,
    and another kernel object at the same site traces again. Dynamo wraps it so only where
    it finds a GPU Triton backend: here it is told there is one, and nothing is run."""
    import shared_kernels
    import torch.utils._triton
    from triton.runtime.jit import JITFunction

    from tunedsl.backends import torch_compile

    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: True)
    module = load(tmp_path, "tc_jit")
    graphs: list[Any] = []
    compiled = torch.compile(step(module), fullgraph=True, backend=trace_only(graphs))
    a, b = torch.randn(100), torch.randn(100)
    plans = []
    for _ in range(2):
        module.vadd = JITFunction(shared_kernels.vadd.fn)  # as @triton.jit makes on a GPU
        for _ in range(2):  # the second call reuses the graph
            with pytest.raises(TracedOnly):
                compiled(a, b)
        (node,) = [n for n in graphs[-1].graph.nodes if "tunedsl.site_call" in str(n.target)]
        plan = torch_compile._plans[node.args[0]]
        assert plan is not None and plan.site is site_of(module)
        plans.append(plan)
        assert plan.kernel is module.vadd
    assert len(graphs) == 2 and plans[0].kernel is not plans[1].kernel


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
module = types.ModuleType("tc_child"); module.__file__ = path; sys.modules["tc_child"] = module
exec(compile_source(open(path, "rb").read(), path), module.__dict__)
def f(x, y):
    out = torch.empty_like(x)
    module.add(x, y, out, x.numel())
    return out
a, b = torch.randn(500), torch.randn(500)
torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(a, b), a + b)
site = next(v for k, v in vars(module).items() if k.startswith("__tunedsl_site_0"))
print(json.dumps([len(tunes), len(site.table())]))
"""


def test_a_second_process_finds_the_record(tmp_path: Path) -> None:
    path = tmp_path / "tc_child.py"
    path.write_text(SCRIPT, encoding="utf-8")
    tests = str(Path(__file__).resolve().parents[1])
    script = CHILD.format(tests=tests, path=str(path))
    env = {**os.environ, "TRITON_INTERPRET": "1"}

    def child() -> list[int]:
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    from tunedsl.store import paths

    assert child() == [1, 1]  # the operator tuned the key once
    records = sorted(paths.records_dir().glob("*.json"))
    assert len(records) == 1
    assert child() == [0, 1]  # the second process reads the record: no tuning
    assert sorted(paths.records_dir().glob("*.json")) == records


CHILD_FUSED = """
import json, sys, types
import torch
sys.path[:0] = [{tests!r}]
from tunedsl.frontend.compile import compile_source
from tunedsl.backends import compat
from tunedsl.backends.triton_launch import DirectPlan
from tunedsl.model import repeat_check
from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE
from tunedsl.runtime import fused, native
from tunedsl.runtime.entry import Entry
fused_type = native.fused_type()
if compat.layout_check([torch.zeros(2)]) is None or fused_type is None:
    print(json.dumps("no C fused launch here: " + native.status())); sys.exit()
path = {path!r}
module = types.ModuleType("tc_fused"); module.__file__ = path; sys.modules["tc_fused"] = module
exec(compile_source(open(path, "rb").read(), path), module.__dict__)
site = next(v for k, v in vars(module).items() if k.startswith("__tunedsl_site_0"))
sample = (torch.zeros(4), torch.zeros(4), torch.zeros(4), 4)
code = repeat_check.repeat_check_code(sample, frozenset(), HOLE, True, compat.layout_check)
entry = Entry(Config({{"tile": 32}}), lambda *a: None, object(), (), ())
plan = DirectPlan(lambda *a: None, (), False, (), 0, lambda: 0, lambda d: 0, {{"TILE": 32}},
                  object(), fused.NATIVE_HOOKED_CODE, True)
def make():
    return fused.make_fused(fused_type, object(), entry, code, plan, site._call)
whole = make()
assert fused.takes_whole_call(whole) and whole.fallback == site._call
site.launch = whole  # what Site._remember does for a repeat on a GPU
assert "torch._dynamo" not in sys.modules
import torch._dynamo
def f(x, y):
    out = torch.empty_like(x)
    module.add(x, y, out, x.numel())
    return out
a, b = torch.randn(100), torch.randn(100)
torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(a, b), a + b)
print(json.dumps([site.launch is whole, site.launch == site._call, site.launch_held,
                  fused.takes_whole_call(make()), len(site.table())]))
"""


def test_the_c_fused_launch_as_the_sites_call_traces_too(tmp_path: Path) -> None:
    """On a GPU a site's ``launch`` becomes its C fused launch after a few eager calls, and
    Dynamo then meets that object. Here one is built with stand-in launch parts (no GPU) and
    the site's call as its fallback, which takes every real call (another kernel), before
    Dynamo is loaded. A PyTorch whose Dynamo cannot trace a C type's call gets the site's
    own call back, and no later C launch takes the whole call."""
    from tunedsl.backends.torch_compile import FUSED_CALL_MIN_TORCH, supported

    path = tmp_path / "tc_fused.py"
    path.write_text(SCRIPT, encoding="utf-8")
    script = CHILD_FUSED.format(tests=str(Path(__file__).resolve().parents[1]), path=str(path))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if isinstance(got, str):
        pytest.skip(got)
    if supported(torch.__version__, FUSED_CALL_MIN_TORCH):
        assert got == [True, False, True, True, 1]  # Dynamo traced the C launch's call
    else:
        assert got == [False, True, True, False, 1]  # the site's own call, traced


def test_a_view_of_an_input_written_in_place_is_seen_by_the_caller(tmp_path: Path) -> None:
    module = load(tmp_path, "tc_views")

    def f(x: torch.Tensor) -> torch.Tensor:
        c = torch.empty_like(x)
        module.add(x, x, c, x.numel())  # the same tensor twice
        v = x[10:]
        module.add(v, v, v, v.numel())  # a view of the input, written in place
        return c * 2

    x = torch.randn(100)
    f(x.clone())  # tunes both keys first (tuning reruns the in-place write: restore_value=)
    eager_x, compiled_x = x.clone(), x.clone()
    expected = f(eager_x)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(compiled_x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(compiled_x, eager_x)
    assert not torch.equal(compiled_x, x)  # the write happened


def test_compiled_code_from_another_process_is_a_clear_error(tmp_path: Path) -> None:
    """A saved compiled artifact names plans that only the tracing process has."""
    from tunedsl.backends import torch_compile

    load(tmp_path, "tc_foreign")  # the operator exists once a site module is loaded and traced
    torch_compile.op()
    with pytest.raises(UsageError, match="traced by another process"):
        torch.ops.tunedsl.site_call(10**6, [torch.zeros(1)], [1], [])


def test_older_pytorch_keeps_the_graph_break() -> None:
    from tunedsl.backends.torch_compile import FUSED_CALL_MIN_TORCH, supported

    assert supported("2.11.0+cu130") and supported("2.14.0.dev20261101") and supported("3.0")
    assert not supported("2.10.1") and not supported("1.13.0")
    assert supported("2.13.0+cpu", FUSED_CALL_MIN_TORCH)
    assert not supported("2.12.1", FUSED_CALL_MIN_TORCH)


def test_a_graph_break_at_a_site_runs_the_site_eagerly(tmp_path: Path) -> None:
    """Where Dynamo cannot trace a site's call (``blocks=`` reads a tensor's value; the
    macro's value is read), the call runs eagerly: Dynamo compiles none of the site's own
    frames (the table, tuning, the launch), and the result is eager's."""
    module = load(tmp_path, "tc_break")

    def counted(x: torch.Tensor, y: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        module.add_counted(x, y, out, counts)
        return out + 1

    def tile(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
        out = torch.empty_like(x)
        return out, module.add_tile(x, y, out, x.numel())

    a, b = torch.randn(100), torch.randn(100)
    counts = torch.tensor([60, 40])
    expected = counted(a, b, counts)
    got = torch.compile(counted, backend="aot_eager")(a, b, counts)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, a + b + 1)
    out, chosen = torch.compile(tile, backend="aot_eager")(a, b)
    torch.testing.assert_close(out, a + b)
    assert chosen == next(iter(site_of(module, 4).table().values())).config.tile


def test_non_strict_export_puts_the_operator_in_the_program(tmp_path: Path) -> None:
    """``torch.export.export`` (non-strict: no Dynamo) runs the site's Python with fake
    tensors: the site puts its operator in the exported program instead of launching (or
    tuning) on them, and the program's module launches with the site's decision."""
    module = load(tmp_path, "tc_export")

    class Block(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return step(module)(x, y)

    site = site_of(module)
    a, b = torch.randn(100), torch.randn(100)
    x, y = torch.randn(300), torch.randn(300)
    n = torch.export.Dim("n")
    program = torch.export.export(Block(), (x, y), dynamic_shapes=({0: n}, {0: n}), strict=False)
    assert "tunedsl.site_call" in program.graph_module.code
    assert len(site.table()) == 0  # nothing ran (nor tuned) on the fake tensors
    torch.testing.assert_close(program.module()(x, y), (x + y) * 2 + 1)
    torch.testing.assert_close(program.module()(a, b), (a + b) * 2 + 1)
    assert len(site.table()) == 2  # each size decided at run time
    program = torch.export.export(Block(), (a, b), strict=False)  # a decided key
    torch.testing.assert_close(program.module()(b, a), (a + b) * 2 + 1)
    assert len(site.table()) == 2


def test_the_docs_code_blocks_run(tmp_path: Path) -> None:
    """Every code block of docs/pytorch.md runs as written (`tunedsl run`, interpreter)."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "pytorch.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 2
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    for i, block in enumerate(blocks):
        path = tmp_path / f"block{i}.py"
        path.write_text(block, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "run", str(path)],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"block {i}:\n{block}\n{done.stderr[-3000:]}"


def test_options_that_read_a_symbolic_value_break_the_graph(tmp_path: Path) -> None:
    """A ``prune=`` closing over an int that is symbolic in the trace (``dynamic=True``)
    cannot be handed to the compiled code as a constant: the call runs eagerly (a graph
    break) with the real value; with ``fullgraph=True`` the error names the site and fix."""
    module = load(tmp_path, "tc_symbolic")
    site = site_of(module, 5)

    def f(x: torch.Tensor, y: torch.Tensor, limit: int) -> torch.Tensor:
        out = torch.empty_like(x)
        module.add_limited(x, y, out, x.numel(), limit)
        return out

    compiled = torch.compile(f, dynamic=True, backend="aot_eager")
    for limit in (32, 64):
        a, b = torch.randn(100 + limit), torch.randn(100 + limit)
        torch.testing.assert_close(compiled(a, b, limit), a + b)
    assert {r.config.tile for r in site.table().values()} <= {32, 64}
    torch._dynamo.reset()
    strict = torch.compile(f, dynamic=True, fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match=r"tc_symbolic\.py:\d+:\d+ \(vadd\).*dynamic=False"):
        strict(a, b, 32)


def test_a_key_decided_under_another_space_launches_in_compiled_code(tmp_path: Path) -> None:
    """A site keeps a key's decision when its ``space=`` changes, in eager and compiled
    code alike: the trace after the change covers the decided configuration too."""
    module = load(tmp_path, "tc_respace")
    site = site_of(module, 6)

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        module.add_global(x, y, out, x.numel())
        return out

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    a, b = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(compiled(a, b), a + b)
    module.SPACE = dict(tile=[64])  # a new space: the decided key keeps tile=32
    torch.testing.assert_close(f(a, b), a + b)
    torch.testing.assert_close(compiled(a, b), a + b)  # traced again, with tile=32 covered
    assert [r.config.tile for r in site.table().values()] == [32]
