"""The kernel families of ``bench_search.py``: kernels, spaces and problems.

Three families, each a ``Family``: its Triton kernel, the axes of its space, the constraint
that makes a configuration valid (shared memory and registers), its shape presets and how
to build a problem (arguments, grid, constexpr keywords, a correctness check):

* ``mm``: fp16 matmul with grouped ordering and masks (Triton tutorial 03's kernel): BLOCK_M,
  BLOCK_N, BLOCK_K in 16..256, GROUP_M 1 or 8, 2/4/8 warps, 2..6 stages: 1,636 valid
  configurations of 3,750;
* ``splitk``: the same matmul with a SPLIT_K axis (1, 2, 4, 8): the K loop is cut into
  SPLIT_K contiguous chunks, one per program of the grid's second axis, each adding its
  partial tile into an fp32 output with ``tl.atomic_add`` (so the output is zeroed before
  every launch: ``reset_to_zero``). For skinny shapes, where the output alone has too few
  tiles to fill the GPU. Tiles 16..128 x 32..256 x 32..128, 4/8 warps, 2..5 stages, GROUP_M
  1: 1,020 valid configurations of 1,536;
* ``softmax``: a row softmax in two passes over column blocks (online max and sum, then the
  normalized write): ROWS per program, BLOCK, warps, stages, with at most 64 elements of a
  block per thread: 600 valid configurations of 720. A memory-bound landscape, unlike the
  matmul's.

Shape presets: ``square`` (4096^3), ``skinny`` (M=256, N=K=4096) for the matmuls, ``rows``
(8192 x 4096) for the softmax; ``--shape`` also takes the numbers (``256,4096,4096``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

SMEM_BYTES = 232448  # H100/H200: the largest dynamic shared memory of one block


@triton.jit
def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % width) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        x = tl.load(a + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)  # fmt: skip
        y = tl.load(b + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


@triton.jit
def mm_splitk(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
              SPLIT_K: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % width) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # This program's chunk of the K tiles: SPLIT_K contiguous chunks (the last may be short).
    tiles = tl.cdiv(K, BK)
    per = tl.cdiv(tiles, SPLIT_K)
    first = tl.program_id(1) * per
    last = min(first + per, tiles)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(first, last):
        kk = k * BK + rk
        x = tl.load(a + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)  # fmt: skip
        y = tl.load(b + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
        acc += tl.dot(x, y)
    out = c + rm[:, None] * scm + rn[None, :] * scn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K == 1:
        tl.store(out, acc, mask=mask)
    else:
        tl.atomic_add(out, acc, mask=mask, sem="relaxed")


@triton.jit
def softmax(x, y, n_rows, n_cols, sx, sy, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for r in range(ROWS):  # (row + cols * 0: the row test as a vector, as the interpreter needs)
        row = tl.program_id(0) * ROWS + r
        # Pass 1: per lane, the running maximum and the sum of exp(v - maximum). A finite
        # start keeps lanes that never see a column at exp(-huge) = 0 instead of NaN.
        m = tl.full((BLOCK,), -1e30, tl.float32)
        s = tl.zeros((BLOCK,), tl.float32)
        for c0 in range(0, n_cols, BLOCK):
            mask = (c0 + cols < n_cols) & (row + cols * 0 < n_rows)
            v = tl.load(x + row * sx + c0 + cols, mask=mask, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, v)
            s = s * tl.exp(m - m_new) + tl.exp(v - m_new)
            m = m_new
        top = tl.max(m, axis=0)
        total = tl.sum(s * tl.exp(m - top), axis=0)
        # Pass 2: the normalized values.
        for c0 in range(0, n_cols, BLOCK):
            mask = (c0 + cols < n_cols) & (row + cols * 0 < n_rows)
            v = tl.load(x + row * sx + c0 + cols, mask=mask, other=-float("inf")).to(tl.float32)
            tl.store(y + row * sy + c0 + cols, (tl.exp(v - top) / total).to(tl.float16),
                     mask=mask)  # fmt: skip


def tiles_fit(cfg: dict[str, int]) -> bool:
    """Shared memory of the pipelined tiles, and registers of the accumulator and loads."""
    threads = 32 * cfg["num_warps"]
    if (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2 * cfg["num_stages"] > SMEM_BYTES:
        return False
    acc = cfg["BM"] * cfg["BN"] / threads
    return 8 <= acc <= 128 and (cfg["BM"] + cfg["BN"]) * cfg["BK"] / threads <= 128


def block_fits(cfg: dict[str, int]) -> bool:
    """Between 1 and 64 elements of a softmax block per thread (registers)."""
    return 1 <= cfg["BLOCK"] // (32 * cfg["num_warps"]) <= 64


@dataclass(frozen=True)
class Family:
    name: str
    kernel: Any
    axes: dict[str, list[int]]
    valid: Callable[[dict[str, int]], bool]
    shapes: dict[str, str]  # preset name -> "M,N,K" or "rows,cols"; the first is the default
    reset_to_zero: tuple[str, ...] = ()  # outputs the kernel accumulates into

    def configs(self) -> list[dict[str, int]]:
        """Every valid configuration, in product order."""
        names = list(self.axes)
        every = (dict(zip(names, v, strict=True)) for v in itertools.product(*self.axes.values()))
        return [c for c in every if self.valid(c)]

    def shape(self, text: str | None) -> str:
        """A preset's numbers, or the numbers given; the default preset for None."""
        if text is None:
            return next(iter(self.shapes.values()))
        return self.shapes.get(text, text)


MM_SHAPES = {"square": "4096,4096,4096", "skinny": "256,4096,4096"}

FAMILIES: dict[str, Family] = {
    "mm": Family(
        "mm",
        mm,
        {
            "BM": [16, 32, 64, 128, 256],
            "BN": [16, 32, 64, 128, 256],
            "BK": [16, 32, 64, 128, 256],
            "GROUP_M": [1, 8],
            "num_warps": [2, 4, 8],
            "num_stages": [2, 3, 4, 5, 6],
        },
        tiles_fit,
        MM_SHAPES,
    ),
    "splitk": Family(
        "splitk",
        mm_splitk,
        {
            "BM": [16, 32, 64, 128],
            "BN": [32, 64, 128, 256],
            "BK": [32, 64, 128],
            "GROUP_M": [1],
            "SPLIT_K": [1, 2, 4, 8],
            "num_warps": [4, 8],
            "num_stages": [2, 3, 4, 5],
        },
        tiles_fit,
        {"skinny": MM_SHAPES["skinny"], "square": MM_SHAPES["square"]},
        reset_to_zero=("c",),
    ),
    "softmax": Family(
        "softmax",
        softmax,
        {
            "ROWS": [1, 2, 4, 8, 16],
            "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
            "num_warps": [1, 2, 4, 8, 16, 32],
            "num_stages": [1, 2, 3, 4],
        },
        block_fits,
        {"rows": "8192,4096"},
    ),
}

HINTS = ("num_warps", "num_stages")


@dataclass
class Problem:
    """One problem of a family: the kernel's arguments and how a configuration launches."""

    args: tuple[Any, ...]
    grid: Callable[[dict[str, int]], tuple[int, ...]]
    check: Callable[[], float]  # relative error of the output (after a launch)

    @staticmethod
    def kwargs(cfg: dict[str, int]) -> dict[str, int]:
        """The constexpr keywords of a configuration (its axes less the launch hints)."""
        return {k: v for k, v in cfg.items() if k not in HINTS}


def make_problem(family: Family, shape: str, device: str) -> Problem:
    dims = tuple(int(x) for x in shape.split(","))
    torch.manual_seed(0)
    if family.name in ("mm", "splitk"):
        if len(dims) != 3:
            raise SystemExit(f"--shape {shape!r}: a matmul needs M,N,K (or square, skinny)")
        m, n, k = dims
        a = torch.randn(m, k, device=device, dtype=torch.float16)
        b = torch.randn(k, n, device=device, dtype=torch.float16)
        # split-K adds partial tiles into an fp32 output; the plain matmul writes fp16
        out_dtype = torch.float32 if family.name == "splitk" else torch.float16
        c = torch.zeros(m, n, device=device, dtype=out_dtype)
        args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1))  # fmt: skip

        def mm_grid(cfg: dict[str, int]) -> tuple[int, ...]:
            tiles = triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"])
            return (tiles, cfg["SPLIT_K"]) if "SPLIT_K" in cfg else (tiles,)

        def mm_check() -> float:
            ref = a.float() @ b.float()
            return float((c.float() - ref).norm() / ref.norm())

        return Problem(args, mm_grid, mm_check)
    if len(dims) != 2:
        raise SystemExit(f"--shape {shape!r}: the softmax needs rows,cols (or rows)")
    rows, cols = dims
    x = torch.randn(rows, cols, device=device, dtype=torch.float16)
    y = torch.empty_like(x)

    def softmax_check() -> float:
        ref = torch.softmax(x.float(), dim=1)
        return float((y.float() - ref).norm() / ref.norm())

    return Problem(
        (x, y, rows, cols, x.stride(0), y.stride(0)),
        lambda cfg: (triton.cdiv(rows, cfg["ROWS"]),),
        softmax_check,
    )


def label(cfg: dict[str, int]) -> str:
    return " ".join(f"{k}={cfg[k]}" for k in sorted(cfg))
