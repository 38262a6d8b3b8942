"""docs/triton-autotune.md's examples run as the page says: the `triton.autotune` kernel and
its tunedsl port (the same text, decorator removed) give the same results on sizes that are
and are not multiples of the blocks, and the accumulating example adds over calls."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.needs_triton

# triton.autotune times with the GPU driver's benchmarker; a CPU timer lets it run here.
CPU_BENCH = """\
import functools, time
import triton


def _cpu_bench(fn, quantiles=None):
    fn()
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1e3
    return [ms, ms, ms] if quantiles else ms


triton.autotune = functools.partial(triton.autotune, do_bench=_cpu_bench)
"""

DRIVE = """
import sys
torch.manual_seed(0)
out = {{}}
for M, K in [(8, 64), (5, 50), (3, 100), (8, 64)]:
    a, x = torch.randn(M, K), torch.randn(K)
    out[(M, K)] = (a, x, {fn}(a, x))
torch.save(out, sys.argv[1])
"""


def _blocks() -> list[str]:
    text = (REPO / "docs" / "triton-autotune.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _run(tmp_path: Path, name: str, text: str, *argv: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path), *argv],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def test_the_pages_port_gives_triton_autotunes_results(tmp_path: Path) -> None:
    import torch

    before, after, _ = _blocks()
    kernel = re.sub(r"@triton\.autotune\(\n.*?\n\)\n", "", before, count=1, flags=re.S)
    assert "triton.autotune" not in kernel and "@triton.heuristics" in kernel
    _run(tmp_path, "before.py", CPU_BENCH + before + DRIVE.format(fn="matvec_triton"), "b.pt")
    _run(tmp_path, "after.py", kernel + after + DRIVE.format(fn="matvec_tunedsl"), "a.pt")
    want, got = torch.load(tmp_path / "b.pt"), torch.load(tmp_path / "a.pt")
    for size, (a, x, y) in want.items():
        assert torch.allclose(y, a @ x, rtol=1e-4, atol=1e-4), size
        assert torch.allclose(got[size][2], y, rtol=1e-4, atol=1e-4), size


def test_the_pages_accumulating_example_adds_over_calls(tmp_path: Path) -> None:
    head = (
        "import torch\nimport triton\nimport triton.language as tl\nfrom tunedsl import autotune\n"
    )
    _run(tmp_path, "accumulate.py", head + _blocks()[2])


def test_the_tables_perf_model_form_calls_a_triton_perf_model() -> None:
    """The table's `prune=` for `perf_model`/`top_k`, as written there, with a perf model of
    Triton's form (every argument and field, launch options included, by keyword)."""
    from tunedsl.model.config import Config

    text = (REPO / "docs" / "triton-autotune.md").read_text()
    form = re.search(r"`(prune=lambda configs, args: sorted\(.*?\)\[:k\])`", text)
    assert form is not None

    def m(A, X, Y, M, K, BLOCK_K, SPLIT_K, num_warps, num_stages, num_ctas):
        # Triton passes ``config.all_kwargs()``: num_ctas too (its matmul model takes **kwargs)
        return K / (BLOCK_K * SPLIT_K) + num_warps

    k = 2
    prune = eval(form.group(1).removeprefix("prune="), {"m": m, "k": k})
    configs = [Config(BLOCK_K=b, SPLIT_K=s) for b in (16, 64) for s in (1, 4)]
    args = {"A": None, "X": None, "Y": None, "M": 8, "K": 256}
    assert prune(configs, args) == [Config(BLOCK_K=64, SPLIT_K=4), Config(BLOCK_K=16, SPLIT_K=4)]
