"""Rules on a CUDA GPU: a key never swept is decided by a shipped rule inside a
``torch.cuda.graph`` capture and inside ``torch.compile``, with no tuning. CPU twin:
tests/integration/test_rules_cli.py.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from typing import Any

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from tunedsl.frontend.compile import compile_source  # noqa: E402
from tunedsl.store import rules as rule_store  # noqa: E402

SWEPT = (1024, 4096, 16384, 65536, 262144)
SCRIPT = """\
from shared_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    return autotune(space=dict(tile=[128, 256, 512, 1024], num_warps=[2, 4]),
                    blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=$tile))
"""


def operands(n: int):  # type: ignore[no-untyped-def]
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    return a, b, torch.empty_like(a)


def captured(add: Any, n: int) -> Any:
    """``add`` called for ``n`` elements inside a CUDA-graph capture, the graph replayed and
    its output checked; the call's result."""
    a, b, c = operands(n)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = add(a, b, c, n)
    c.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    return result


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Sweep, build with the real command, then a fresh cache whose records path holds only
    the rule (as a user who installed it)."""
    base = tmp_path_factory.mktemp("rules")
    path = base / "ruled_site.py"
    path.write_text(SCRIPT)
    module = types.ModuleType("ruled_site")  # a real module: Dynamo imports it by name
    module.__file__ = str(path)
    sys.modules["ruled_site"] = module
    exec(compile_source(path.read_bytes(), str(path)), module.__dict__)
    add = module.add
    saved = {k: os.environ.get(k) for k in ("TUNEDSL_CACHE_DIR", "TUNEDSL_RECORDS_PATH")}
    os.environ["TUNEDSL_CACHE_DIR"] = str(base / "sweep-cache")
    for n in SWEPT:
        assert add(*operands(n), n).source == "tuned"
    out = base / "shipped"
    built = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "build", "--out", str(out)],
        capture_output=True, text=True, env=os.environ.copy(), timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert sorted(out.glob("*.rule.json")), built.stdout
    os.environ["TUNEDSL_CACHE_DIR"] = str(base / "fresh-cache")
    os.environ["TUNEDSL_RECORDS_PATH"] = str(out)
    rule_store.forget_loaded()
    yield add
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    rule_store.forget_loaded()


def test_an_unseen_key_inside_a_capture_launches_the_rules_pick(shipped: Any) -> None:
    assert captured(shipped, 50_000).source == "rule"  # inside the sweep's range, never swept


def test_an_unseen_key_inside_torch_compile_is_decided_by_the_rule(shipped: Any) -> None:
    from tunedsl.backends.torch_compile import MIN_TORCH, supported

    if not supported(torch.__version__):
        pytest.skip(f"a plain site traces inside torch.compile from torch {MIN_TORCH}")
    from tunedsl.runtime import tuner

    tunes: list[object] = []
    real = tuner.tune

    def counting(req: Any) -> Any:
        tunes.append(req)
        return real(req)

    tuner.tune = counting
    try:

        def step(a, b, c):  # type: ignore[no-untyped-def]
            shipped(a, b, c, a.numel())
            return c * 2

        compiled = torch.compile(step, fullgraph=True)
        a, b, c = operands(70_000)  # never swept
        torch.testing.assert_close(compiled(a, b, c), (a + b) * 2)
    finally:
        tuner.tune = real  # type: ignore[assignment]
    assert tunes == []


def test_a_new_key_specialized_like_an_earlier_one_launches_directly(
    shipped: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedsl.backends import triton_launch

    first = shipped(*operands(90_001), 90_001)  # never swept; an int of class "i"
    jit_calls: list[object] = []
    real = triton_launch.jit_run
    monkeypatch.setattr(
        triton_launch, "jit_run", lambda *a, **k: (jit_calls.append(a), real(*a, **k))[1]
    )
    n = 90_003  # another new key, the same specialization
    a, b, c = operands(n)
    second = shipped(a, b, c, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert first.source == second.source == "rule"
    if second.config != first.config:
        pytest.skip("the rule picks differently for the two sizes")
    assert jit_calls == []  # the launcher of the first key's launch, not Triton's JIT


def test_new_sizes_captured_in_turn_are_decided_by_the_layouts_plan(
    shipped: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedsl.runtime import miss

    general: list[object] = []
    real = miss.resolve
    monkeypatch.setattr(miss, "resolve", lambda s, c: (general.append(c), real(s, c))[1])
    for n in [60_001 + 16 * i for i in range(6)]:  # never swept, one layout (n % 16 == 1)
        assert captured(shipped, n).source == "rule"
    # The layout's first new size went the general way (unless an earlier test's did); the
    # rest were decided by the plan it left, inside the captures.
    assert len(general) <= 1
