"""Row-wise softmax: one program per row, with ``num_warps`` and ``num_stages`` as launch hints.

Teaches: a grid that does not depend on the configuration (``blocks=n_rows``); a space of
launch hints only (nothing of it reaches the kernel's arguments); a block size computed once
from the data (``BLOCK``), which is an ordinary keyword argument, not part of the space.

    tunedsl run examples/softmax.py
"""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, workload
from tunedsl.gallery.kit import Example

ex = Example("softmax")


@triton.jit
def softmax_kernel(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)  # subtract the row's maximum: exp never overflows
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


SPACE = ex.pick(
    gpu=dict(num_warps=[4, 8, 16, 32], num_stages=[1, 2]),
    cpu=dict(num_warps=[4], num_stages=[1, 2]),
)


def softmax(x, y):
    n_rows, n_cols = x.shape
    # One whole row per program: the block is the row length rounded up to a power of two.
    block = triton.next_power_of_2(n_cols)
    return autotune(
        space=SPACE,
        blocks=n_rows,
        softmax_kernel(y, x, n_cols, x.stride(0), y.stride(0), BLOCK=block),
    )


SHAPE = ex.pick(gpu=(8192, 8192), cpu=(48, 200))


@workload
def warm():
    x = torch.empty(SHAPE, device=ex.device)
    softmax(x, torch.empty_like(x))


def main():
    x = torch.randn(SHAPE, device=ex.device)
    y = ex.poison(torch.empty_like(x))
    launch = softmax(x, y)
    ex.check("y", y, torch.softmax(x, dim=-1))

    ex.report(
        launch,
        problem=f"{SHAPE[0]}x{SHAPE[1]} float32",
        run=lambda: softmax(x, y),
        reference=lambda: torch.softmax(x, dim=-1),
    )


if __name__ == "__main__":
    main()
