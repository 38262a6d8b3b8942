"""Kernels of test_ported_autotuners_seventeenth.py: a scaled copy whose scale is a runtime
float, a copy that adds a runtime flag (Triton's test_specialize inputs), a kernel that reads a
float tensor through a byte view of its own storage (Helion's private clones of mixed-dtype
aliases), an in-place increment that calls back into Python between programs (to interrupt a
launch half done), a row sum whose rows may be empty (Inductor's zero-size inputs) and an
in-place row normalisation (Inductor's coordinate-descent persistent reduction)."""

import triton
import triton.language as tl

#: What ``tick`` counts: the programs run so far, and the one to interrupt (None: none).
TICKS = {"count": 0, "stop_at": None}


def tick() -> int:
    """Called by ``bump_ticking`` once per program (the interpreter runs the kernel's body as
    Python): a ``KeyboardInterrupt`` at program ``stop_at``, as Ctrl-C would arrive there."""
    TICKS["count"] += 1
    if TICKS["count"] == TICKS["stop_at"]:
        raise KeyboardInterrupt
    return 0


@triton.jit
def scaled_copy(out, x, n, scale, BLOCK: tl.constexpr):
    """``out[:n] = x[:n] * scale``, ``scale`` a runtime float."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * scale, mask=mask)


@triton.jit
def add_flag(out, x, n, flag, BLOCK: tl.constexpr):
    """``out[:n] = x[:n] + 1`` where ``flag`` is true, else ``x[:n]``; ``flag`` is any scalar
    Triton specializes (a bool, an int of any class, a float or ``None``)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    if flag:
        v = v + 1
    tl.store(out + offs, v, mask=mask)


@triton.jit
def byte_sums(out, raw, n, BLOCK: tl.constexpr):
    """``out[i]`` = the sum of the four bytes of the float32 ``i`` of ``raw``'s storage, read
    through ``raw`` (a uint8 view); ``out`` may be that float32 tensor itself."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    s = tl.load(raw + i * 4, mask=mask).to(tl.int32)
    s += tl.load(raw + i * 4 + 1, mask=mask).to(tl.int32)
    s += tl.load(raw + i * 4 + 2, mask=mask).to(tl.int32)
    s += tl.load(raw + i * 4 + 3, mask=mask).to(tl.int32)
    tl.store(out + i, s.to(tl.float32), mask=mask)


@triton.jit
def bump_ticking(x, n, BLOCK: tl.constexpr):
    """``x[:n] += 1`` in place, one block per program, then ``tick()``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)
    tick()


@triton.jit
def row_sums(out, x, K, stride, BLOCK_K: tl.constexpr):
    """``out[row] = x[row, :K].sum()``: one program per row, ``K`` may be 0."""
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        offs = k + tl.arange(0, BLOCK_K)
        acc += tl.load(x + row * stride + offs, mask=offs < K, other=0.0)
    tl.store(out + row, tl.sum(acc, axis=0))


@triton.jit
def normalize_rows(x, M, N: tl.constexpr, XBLOCK: tl.constexpr):
    """``x[r] /= x[r].sum()`` in place for ``XBLOCK`` rows per program (a persistent
    reduction: each row is read whole, ``N`` a power of two)."""
    rows = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    cols = tl.arange(0, N)
    mask = rows[:, None] < M
    offs = rows[:, None] * N + cols[None, :]
    v = tl.load(x + offs, mask=mask, other=1.0)
    tl.store(x + offs, v / tl.sum(v, axis=1)[:, None], mask=mask)
