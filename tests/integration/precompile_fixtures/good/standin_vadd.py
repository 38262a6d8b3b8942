"""Precompile fixture (plain Python): a vector add behind a stand-in site, with a workload."""

import os
import sys

import torch
import triton
import triton.language as tl

from tunedsl import workload
from tunedsl.precompile.workload import PrecompileSite, precompile_device

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from standin_site import StandInSite


@triton.jit
def vadd(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


_site = PrecompileSite(
    StandInSite({"BLOCK": [64, 128], "num_warps": [1, 2]}, label="standin_vadd.py:add")
)


def add(a, b, c):
    n = c.numel()
    return _site(
        vadd,
        (a, b, c, n),
        {},
        lambda cfg: ((), {"BLOCK": cfg.BLOCK}, (triton.cdiv(n, cfg.BLOCK),)),
        None,
        None,
    )


@workload
def warm():
    x = torch.ones(256, device=precompile_device())
    add(x, x, torch.empty_like(x))
    add(x, x, torch.empty_like(x))  # the same signature again: compiled once


if __name__ == "__main__":
    raise SystemExit("this module must never run as __main__ during precompile")
