"""Histogram with atomics: every program adds its block's counts into one shared histogram.

Teaches: ``reset_to_zero``. The kernel accumulates into ``hist`` with ``tl.atomic_add``, so
each benchmark run would add on top of the previous one; ``reset_to_zero=["hist"]`` (a
kernel parameter's name) makes the tuner zero it before every run and once more when tuning
ends, so the caller gets one histogram, not the sum of the tuner's runs.

    tunedsl run examples/histogram.py
"""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.gallery.kit import Example

ex = Example("histogram")

NUM_BINS = 256


@triton.jit
def histogram_kernel(x_ptr, hist, n, NUM_BINS: tl.constexpr, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    values = tl.load(x_ptr + offsets, mask=mask, other=0)
    counts = tl.histogram(values, NUM_BINS, mask=mask)  # this block's counts, in registers
    tl.atomic_add(hist + tl.arange(0, NUM_BINS), counts)  # one atomic per bin per block


SPACE = ex.pick(
    gpu=dict(tile=[1024, 2048, 4096, 8192, 16384], num_warps=[4, 8]),
    cpu=dict(tile=[1024, 4096], num_warps=[4]),
)


def histogram(x, hist):
    n = x.numel()
    return autotune(
        space=SPACE,
        blocks=cdiv(n, $tile),
        reset_to_zero=["hist"],
        histogram_kernel(x, hist, n, NUM_BINS=NUM_BINS, TILE=$tile),
    )


SIZE = ex.pick(gpu=1 << 26, cpu=10_000 + 3)


@workload
def warm():
    histogram(
        torch.zeros(SIZE, device=ex.device, dtype=torch.int32),
        torch.zeros(NUM_BINS, device=ex.device, dtype=torch.int32),
    )


def main():
    x = torch.randint(0, NUM_BINS, (SIZE,), device=ex.device, dtype=torch.int32)
    # The output accumulates, so it starts at zero (the caller's job, as with any atomics);
    # the tuner's runs in between must not leak into it.
    hist = torch.zeros(NUM_BINS, device=ex.device, dtype=torch.int32)
    launch = histogram(x, hist)
    expected = torch.bincount(x, minlength=NUM_BINS).to(torch.int32)
    ex.check("hist", hist, expected)

    def run_once():
        hist.zero_()
        histogram(x, hist)

    ex.report(
        launch,
        problem=f"n={SIZE} int32 into {NUM_BINS} bins",
        run=run_once,
        reference=lambda: torch.bincount(x, minlength=NUM_BINS),
    )


if __name__ == "__main__":
    main()
