"""Two ranks over NCCL on two GPUs agree on every tuning decision (broadcast and allreduce).

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``). The exchange itself runs on a gloo side
group, so this also proves that the side group works beside an NCCL default group.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

RANK = r"""
import json, sys
import torch
import torch.distributed as dist
import triton
import triton.language as tl

rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                        world_size=world)
from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


tiles, sources = [], []
for n in (1 << 16, 1 << 20, 1 << 22):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    res = autotune_launch(
        vadd, space={"tile": [128, 256, 512, 1024, 2048]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="vadd",
    )
    torch.testing.assert_close(c, a + b)
    tiles.append(res.config.tile)
    sources.append(res.source)
t = torch.tensor(tiles, device="cuda")
dist.all_reduce(t)  # the NCCL group still works after the decisions
json.dump({"rank": rank, "tiles": tiles, "sources": sources}, open(out, "w"))
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("mode", ["broadcast", "allreduce"])
def test_two_gpu_ranks_over_nccl_agree(tmp_path: Path, mode: str) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "NCCL_NVLS_ENABLE": "0",
            "TUNEDSL_DISTRIBUTED": mode,
            "TUNEDSL_LOCK_TIMEOUT": "120",
            "TUNEDSL_TUNE_DEVICES": "1",  # each rank tunes on its own GPU
            "TUNEDSL_CACHE_DIR": str(tmp_path / f"node{rank}"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        argv = [sys.executable, str(script), str(rank), "2", str(port), str(tmp_path / f"{rank}")]
        procs.append(subprocess.Popen(argv, env=env, stderr=subprocess.PIPE))
    try:
        for p in procs:
            _, err = p.communicate(timeout=240)
            assert p.returncode == 0, err.decode()[-3000:]
    finally:
        for p in procs:  # a rank left waiting (the other failed) must not outlive the test
            if p.poll() is None:
                p.kill()
                p.wait()
    outs = [json.loads((tmp_path / f"{r}").read_text()) for r in range(2)]
    assert outs[0]["tiles"] == outs[1]["tiles"]
    assert outs[0]["sources"][0] == "tuned"
    if mode == "broadcast":  # rank 1 received every decision
        assert outs[1]["sources"] == ["broadcast"] * 3
    else:  # every rank measured its share and recorded the same choice
        assert outs[1]["sources"] == ["tuned"] * 3
