"""Small real Triton kernels of the fourth set of ported autotuner tests
(test_ported_autotuners_fourth.py)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_scale(src, N, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    """src += SCALE, in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(src + offs, tl.load(src + offs, mask=offs < N) + SCALE, mask=offs < N)


@triton.jit
def copy_scaled(dst, src, N, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src * SCALE."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N) * SCALE, mask=offs < N)


@triton.heuristics({"EVEN": lambda args: args["N"] % args["BLOCK"] == 0})
@triton.heuristics({"HALF": lambda args: args["BLOCK"] // 2})
@triton.jit
def copy_halves(dst, src, N, EVEN: tl.constexpr, HALF: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src, each program in two halves of HALF; unmasked when EVEN."""
    for part in tl.static_range(2):
        offs = tl.program_id(0) * BLOCK + part * HALF + tl.arange(0, HALF)
        if EVEN:
            tl.store(dst + offs, tl.load(src + offs))
        else:
            tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.heuristics({"BLOCK_N": lambda args: triton.next_power_of_2(args["N"])})
@triton.jit
def row_copy(dst, src, M, N, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    """dst = src (M x N, contiguous, M a multiple of ROWS), ROWS rows a program, BLOCK_N >= N
    columns."""
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    for r in tl.static_range(ROWS):
        row = tl.program_id(0) * ROWS + r
        tl.store(dst + row * N + cols, tl.load(src + row * N + cols, mask=mask), mask=mask)


@triton.heuristics({"CAP": lambda args: bool(args["CAP"])})
@triton.jit
def capped(dst, src, N, CAP: tl.constexpr, BLOCK: tl.constexpr):
    """dst = min(src, 1) when CAP, else src (Unsloth passes such flags and lets a heuristic
    normalise them to a bool)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < N)
    if CAP:
        x = tl.minimum(x, 1.0)
    tl.store(dst + offs, x, mask=offs < N)


@triton.jit(do_not_specialize=["N"])
def copy_unspecialized(dst, src, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def special_params(
    src, dst, N, BLOCK: tl.constexpr, num_warps: tl.constexpr, num_stages: tl.constexpr
):
    """dst = src * num_stages + num_warps: a kernel whose parameters are named like Triton's
    launch options (Inductor's test_triton_kernel_special_params)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < N)
    tl.store(dst + offs, x * num_stages + num_warps, mask=offs < N)


@triton.jit
def add_as(x, y, out, N, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    """out = x.to(DTYPE) + y.to(DTYPE) (Inductor's add_kernel_with_dtype)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x + offs, mask=offs < N).to(DTYPE)
    b = tl.load(y + offs, mask=offs < N).to(DTYPE)
    tl.store(out + offs, a + b, mask=offs < N)


@triton.jit
def fill_value(dst, v, BLOCK: tl.constexpr):
    """dst[:BLOCK] = v, as int64."""
    tl.store(dst + tl.arange(0, BLOCK), tl.full([BLOCK], v, tl.int64))


@triton.jit
def add_one_strided(x, N, stride, BLOCK: tl.constexpr):
    """x[i * stride] += 1 for i < N, in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ptrs = x + offs * stride
    tl.store(ptrs, tl.load(ptrs, mask=offs < N) + 1, mask=offs < N)
