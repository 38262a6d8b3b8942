"""``tunedsl sweep`` on Ray with one actor per GPU (``num_gpus=1``), on a host with two GPUs. Also prints the sweep's throughput with one actor and with two (for
``docs/scale-out.md``; printed, never asserted).

    python -m pytest -q -s tests/gpu/test_sweep_gpu.py
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if torch.cuda.device_count() < 2:
    pytest.skip("needs two GPUs", allow_module_level=True)

from tunedsl.precompile.sweep import sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
"""A sweep of a matmul over shapes; each task notes which GPU its actor holds."""
import os, pathlib
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@workload
def matmul(n=1024, run="a"):
    # Each run compiles from its own Triton cache (a fair comparison between runs).
    os.environ["TRITON_CACHE_DIR"] = os.path.join(os.environ["SWEEP_MARKERS"], "triton-" + run)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    res = autotune_launch(
        mm,
        space={"BM": [64, 128], "BN": [64, 128], "BK": [32, 64]},
        grid=lambda cfg: (cdiv(n, cfg.BM), cdiv(n, cfg.BN)),
        args=(a, b, c, n, n, n),
        kwargs=lambda cfg: {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK},
        name="sweep-mm",
    )
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=2e-2, atol=1e-1)
    note = pathlib.Path(os.environ["SWEEP_MARKERS"]) / f"{run}-{n}"
    note.write_text(f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')} {res.config}")
'''

SIZES = [512, 768, 1024, 1280, 1536, 1792, 2048, 2304]


def test_one_actor_per_gpu_tunes_every_shape_once(tmp_path: Path) -> None:
    script = tmp_path / "sweep_mm.py"
    script.write_text(SCRIPT)
    markers = tmp_path / "markers"
    markers.mkdir()
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
    env = {
        "SWEEP_MARKERS": str(markers),
        "TUNEDSL_QUIET": "1",
        "TUNEDSL_TUNE_DEVICES": "1",  # each actor tunes on the GPU Ray gave it
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    ray.init(num_gpus=2, runtime_env={"env_vars": env}, log_to_driver=False)
    rows = []
    try:
        for run, actors in (("one", 1), ("two", 2)):
            shapes = tmp_path / f"shapes-{run}.json"
            shapes.write_text(json.dumps([{"n": n, "run": run} for n in SIZES]))
            start = time.perf_counter()
            written, outcomes = sweep(
                str(script), str(shapes), use_ray=True, gpus_per_task=1, actors=actors,
                bundle=str(tmp_path / f"bundle-{run}.json"), out=io.StringIO(),
            )  # fmt: skip
            wall = time.perf_counter() - start
            assert [o.error for o in outcomes] == [None] * len(SIZES)
            assert len(written) == len(SIZES)  # one record per shape (one key each)
            held = {(markers / f"{run}-{n}").read_text().split()[1] for n in SIZES}
            # One actor per GPU: each actor saw exactly one GPU, and with two actors both GPUs
            # tuned part of the sweep.
            assert all("," not in h for h in held) and len(held) == actors, held
            rows.append({"actors": actors, "tasks": len(SIZES), "wall_s": round(wall, 2),
                         "tasks_per_s": round(len(SIZES) / wall, 3)})  # fmt: skip
    finally:
        ray.shutdown()
    print()
    for row in rows:
        print("SWEEP", json.dumps(row))
    header, *lines = (tmp_path / "bundle-two.json").read_text().splitlines()
    assert json.loads(header) == {"tunedsl_records": 2} and len(lines) == len(SIZES)
