"""Precompile fixture: one configuration cannot compile (BLOCK=48 is not a power of two)."""

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
def scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m) * 2, mask=m)


_site = PrecompileSite(StandInSite({"BLOCK": [32, 48]}, label="standin_broken.py:double"))


def double(x, y):
    n = y.numel()
    return _site(
        scale,
        (x, y, n),
        {},
        lambda cfg: ((), {"BLOCK": cfg.BLOCK}, (triton.cdiv(n, cfg.BLOCK),)),
        None,
        None,
    )


@workload
def warm():
    x = torch.ones(100, device=precompile_device())
    double(x, torch.empty_like(x))
