"""Layer norm forward: several rows per program, and the row statistics saved for backward.

Teaches: a ``$`` field used in both the grid and the kernel (``rows`` per program:
``blocks=cdiv(n_rows, $rows)``, ``ROWS=$rows``, a 2-D tile of ``ROWS`` rows) mixed with a
launch hint in one space; a kernel with several outputs (``y``, ``mean``, ``rstd``), each
checked against PyTorch.

    tunedsl run examples/layer_norm.py
"""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.gallery.kit import Example

ex = Example("layer_norm")


@triton.jit
def layer_norm_kernel(
    x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, row_stride, eps,
    BLOCK: tl.constexpr, ROWS: tl.constexpr,
):  # fmt: skip
    # A [ROWS, BLOCK] tile: ROWS whole rows per program, reduced along axis 1.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols[None, :] < n_cols)
    offsets = rows[:, None] * row_stride + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centered = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols).to(tl.float32)  # once for ROWS rows
    b = tl.load(b_ptr + cols, mask=cols < n_cols).to(tl.float32)
    y = centered * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


SPACE = ex.pick(
    gpu=dict(rows=[1, 2, 4, 8], num_warps=[4, 8, 16]),
    cpu=dict(rows=[1, 4], num_warps=[4]),
)
EPS = 1e-5


def layer_norm(x, weight, bias, y, mean, rstd):
    n_rows, n_cols = x.shape
    return autotune(
        space=SPACE,
        blocks=cdiv(n_rows, $rows),
        layer_norm_kernel(
            x, y, weight, bias, mean, rstd, n_rows, n_cols, x.stride(0), EPS,
            BLOCK=triton.next_power_of_2(n_cols), ROWS=$rows,
        ),
    )  # fmt: skip


SHAPE = ex.pick(gpu=(32768, 2048), cpu=(33, 200))
DTYPE = ex.pick(gpu=torch.float16, cpu=torch.float32)


def outputs(n_rows, n_cols):
    y = ex.poison(torch.empty(n_rows, n_cols, device=ex.device, dtype=DTYPE))
    mean = ex.poison(torch.empty(n_rows, device=ex.device))
    rstd = ex.poison(torch.empty(n_rows, device=ex.device))
    return y, mean, rstd


@workload
def warm():
    x = torch.empty(SHAPE, device=ex.device, dtype=DTYPE)
    w = torch.empty(SHAPE[1], device=ex.device, dtype=DTYPE)
    layer_norm(x, w, w, *outputs(*SHAPE))


def main():
    x = torch.randn(SHAPE, device=ex.device, dtype=DTYPE)
    weight = torch.randn(SHAPE[1], device=ex.device, dtype=DTYPE)
    bias = torch.randn(SHAPE[1], device=ex.device, dtype=DTYPE)
    y, mean, rstd = outputs(*SHAPE)
    launch = layer_norm(x, weight, bias, y, mean, rstd)

    x32 = x.float()
    expected_y = torch.nn.functional.layer_norm(x32, (SHAPE[1],), weight.float(), bias.float(), EPS)
    ex.check("y", y, expected_y.to(DTYPE))
    ex.check("mean", mean, x32.mean(dim=1))
    ex.check("rstd", rstd, torch.rsqrt(x32.var(dim=1, unbiased=False) + EPS), rtol=1e-4, atol=1e-4)

    ex.report(
        launch,
        problem=f"{SHAPE[0]}x{SHAPE[1]} {str(DTYPE).removeprefix('torch.')}",
        run=lambda: layer_norm(x, weight, bias, y, mean, rstd),
        reference=lambda: torch.nn.functional.layer_norm(x, (SHAPE[1],), weight, bias, EPS),
    )


if __name__ == "__main__":
    main()
