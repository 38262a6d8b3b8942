"""Sweep fixture: two workloads over the same shapes; ``fail="slow"`` makes the second one
wait (the test interrupts it) after the first has finished that shape."""

import os
import pathlib
import time

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def scale(x, y, n, FACTOR: tl.constexpr, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m) * FACTOR, mask=m)


def _scale(n: int, factor: int, name: str) -> None:
    x, y = torch.randn(n), torch.empty(n)
    autotune_launch(
        scale,
        space={"tile": [64, 128]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, y, n),
        kwargs=lambda cfg: {"FACTOR": factor, "TILE": cfg.tile},
        name=name,
    )
    assert torch.equal(y, x * factor)


@workload
def double(n=256, fail=""):
    _scale(n, 2, "sweep-double")


@workload
def triple(n=256, fail=""):
    if fail == "slow":  # stands for a long tuning run (the test interrupts it)
        (pathlib.Path(os.environ["SWEEP_MARKERS"]) / "slow-started").write_text("")
        time.sleep(120)
    _scale(n, 3, "sweep-triple")
