"""Kernels of test_ported_autotuners_eighteenth.py: a sum whose rounding follows its block
(Helion's and Kernel Tuner's accuracy tolerances), a histogram of atomic increments (Triton's
``reset_to_zero``), an in-place increment (Helion's mutating reference), and a copy under
a heuristic that raises for one block (Helion's ``autotune_ignore_errors``)."""

import triton
import triton.language as tl


@triton.jit
def block_sum(x, out, n, BLOCK: tl.constexpr):
    """``out[0] = sum(x[:n])``, summed in ``BLOCK`` lanes: another block rounds otherwise."""
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(out, tl.sum(acc, axis=0))


@triton.jit
def histogram(x, counts, n, BLOCK: tl.constexpr):
    """``counts[v] += 1`` for each ``v`` of ``x[:n]``: counts accumulate over launches."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0)
    tl.atomic_add(counts + v, 1, mask=offs < n)


@triton.jit
def increment(x, n, BLOCK: tl.constexpr):
    """``x[:n] += 1`` in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


def half_of(args: dict) -> int:
    """A heuristic that cannot handle a block of 64 (as a lookup table missing an entry)."""
    if args["BLOCK"] == 64:
        raise KeyError("no HALF for BLOCK=64")
    return args["BLOCK"] // 2


@triton.heuristics({"HALF": half_of})
@triton.jit
def copy_halves(x, y, n, BLOCK: tl.constexpr, HALF: tl.constexpr):
    """``y[:n] = x[:n]`` in two halves of ``HALF`` lanes."""
    base = tl.program_id(0) * BLOCK
    for h in tl.static_range(2):
        offs = base + h * HALF + tl.arange(0, HALF)
        tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
