"""Kernels of test_ported_autotuners_fifteenth.py: Triton's test_autotuner.py kernels (an
optional tensor argument passed as ``None``, a plain copy), Kernel Tuner's vector add with its
block size named ``block_dim_x``, and a copy whose second field changes nothing but the
kernel's identity, for searches over a space too large to measure whole."""

import triton
import triton.language as tl


@triton.jit
def fill_src_or_dst(src, dst, N, BLOCK_SIZE: tl.constexpr):
    """Triton's ``test_reset_to_zero`` kernel: ones into ``src`` when it is given, else into
    ``dst`` (``src`` is an optional buffer, ``None`` where a caller does not use it)."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < N
    if src is not None:
        tl.store(src + offsets, tl.full([BLOCK_SIZE], 1, dtype=src.dtype.element_ty), mask=mask)
    else:
        tl.store(dst + offsets, tl.full([BLOCK_SIZE], 1, dtype=dst.dtype.element_ty), mask=mask)


@triton.jit
def copy(dst, src, N, BLOCK_SIZE: tl.constexpr):
    """Triton's ``test_prune_configs`` kernel: ``dst[:N] = src[:N]``."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(src + offsets, mask=offsets < N)
    tl.store(dst + offsets, x, mask=offsets < N)


@triton.jit
def copy_variant(dst, src, N, BLOCK_SIZE: tl.constexpr, VARIANT: tl.constexpr):
    """``copy`` with a second tuned field, ``VARIANT``, that changes no result (each value is
    another compiled kernel, as an unroll factor would be): a space of hundreds of points."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(src + offsets, mask=offsets < N)
    tl.store(dst + offsets, x + VARIANT * 0, mask=offsets < N)


@triton.jit
def vector_add(c, a, b, n, block_dim_x: tl.constexpr, PADDED: tl.constexpr):
    """Kernel Tuner's ``vector_add`` (test_runners.py), its block size named ``block_dim_x``
    (``block_size_names=["block_dim_x"]``): ``c = a + b``. A Triton block is a power of two,
    so a program covers ``block_dim_x`` elements with ``PADDED`` lanes, the rest masked."""
    j = tl.arange(0, PADDED)
    i = tl.program_id(0) * block_dim_x + j
    mask = (j < block_dim_x) & (i < n)
    tl.store(c + i, tl.load(a + i, mask=mask) + tl.load(b + i, mask=mask), mask=mask)


@triton.jit
def row_sum(x, out, N: tl.constexpr, BLOCK: tl.constexpr):
    """One program per row: ``out[row] = sum(x[row, :N])``, accumulated in float32 over
    ``BLOCK`` lanes (so each block size adds in another order) and stored in ``out``'s
    dtype, as a bfloat16 norm or loss kernel does."""
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * N + offs, mask=offs < N, other=0.0)
    tl.store(out + row, tl.sum(acc, 0).to(out.dtype.element_ty))


@triton.jit
def cast_and_double(x, out8, out32, N, BLOCK: tl.constexpr):
    """Helion's ``mixed_output``: ``x`` cast to float8 in ``out8`` and ``x * 2`` in
    ``out32``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < N)
    tl.store(out8 + offs, v.to(out8.dtype.element_ty), mask=offs < N)
    tl.store(out32 + offs, v * 2.0, mask=offs < N)
