"""Kernels of test_ported_autotuners_sixteenth.py: a copy and an atomic accumulation (TileLang's
and Triton's autotuner test kernels, launched on a buffer picked per configuration), a 2-D copy
tuned over Kernel Tuner's pairs of block sizes, and Triton's test_cache.py kernel that calls a
Triton function given as a ``tl.constexpr`` with a tuple of its arguments."""

import triton
import triton.language as tl


@triton.jit
def copy(dst, src, N, BLOCK_SIZE: tl.constexpr):
    """``dst[:N] = src[:N]`` (stored in ``dst``'s dtype)."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(src + offsets, mask=offsets < N)
    tl.store(dst + offsets, x, mask=offsets < N)


@triton.jit
def accumulate(out, src, N, BLOCK_SIZE: tl.constexpr):
    """``out[:N] += src[:N]``, atomically: each launch adds into what ``out`` holds."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(src + offsets, mask=offsets < N)
    tl.atomic_add(out + offsets, x, mask=offsets < N)


@triton.jit
def copy_2d(dst, src, M, N, BLOCK_X: tl.constexpr, BLOCK_Y: tl.constexpr):
    """Kernel Tuner's 2-D thread blocks: a ``BLOCK_X`` x ``BLOCK_Y`` tile of a row-major
    ``M`` x ``N`` matrix per program."""
    rows = tl.program_id(0) * BLOCK_X + tl.arange(0, BLOCK_X)
    cols = tl.program_id(1) * BLOCK_Y + tl.arange(0, BLOCK_Y)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offsets = rows[:, None] * N + cols[None, :]
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


@triton.jit
def func1():
    return 1


@triton.jit
def func2():
    return 2


@triton.jit
def func3(x):
    return x


@triton.jit
def func4(x, y):
    return x + y


@triton.jit
def call_fn(Y, fn: tl.constexpr, fn_args):
    """Triton's test_function_arguments kernel: ``Y = fn(*fn_args)``."""
    tl.store(Y, fn(*fn_args))


@triton.jit
def accumulate_optional(out, extra, src, N, BLOCK_SIZE: tl.constexpr):
    """``out[:N] += src[:N]``, and ``extra[:N] += src[:N]`` where ``extra`` is given (an
    optional buffer, ``None`` where a caller does not use it), atomically."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(src + offsets, mask=offsets < N)
    tl.atomic_add(out + offsets, x, mask=offsets < N)
    if extra is not None:
        tl.atomic_add(extra + offsets, x, mask=offsets < N)
