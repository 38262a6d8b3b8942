"""Kernels of test_ported_autotuners_ninth.py (imported by its DSL script)."""

import triton
import triton.language as tl


@triton.jit
def increment(x, n, BLOCK: tl.constexpr):
    """x += 1 in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)


@triton.jit
def mul2(src, out, n, BLOCK: tl.constexpr):
    """out = 2 * src."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(src + offs, mask=mask) * 2, mask=mask)


@triton.jit
def _double_in_place(p, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(p + offs, tl.load(p + offs, mask=mask) * 2, mask=mask)


@triton.jit
def mul2_add_act(a, b, out, n, BLOCK: tl.constexpr, ACT: tl.constexpr):
    """a *= 2 and b *= 2 in place (through a called ``@jit`` function), then out = a + b,
    negatives zeroed where ``ACT == "zero_negs"`` (Inductor's multi-kernel test kernel)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    _double_in_place(a, n, BLOCK)
    _double_in_place(b, n, BLOCK)
    total = tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask)
    if ACT == "zero_negs":
        total = tl.where(total >= 0, total, 0)
    tl.store(out + offs, total, mask=mask)


class Seen:
    """What the heuristic below was asked: ``(n, BLOCK, EVEN)`` per call (an object, not a
    plain value, so the kernel's identity does not follow what it holds)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool]] = []


SEEN = Seen()


def _even(args: dict) -> bool:
    value = args["n"] % args["BLOCK"] == 0
    SEEN.calls.append((args["n"], args["BLOCK"], value))
    return value


@triton.heuristics({"EVEN": _even})
@triton.jit
def add_even(a, b, out, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """out = a + b, unmasked where the heuristic found ``n`` a multiple of ``BLOCK``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out + offs, tl.load(a + offs) + tl.load(b + offs))
    else:
        mask = offs < n
        tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def fill_one(src, dst, n, BLOCK: tl.constexpr):
    """Ones into ``src``, or into ``dst`` where ``src`` is None (an optional buffer)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if src is not None:
        tl.store(src + offs, tl.full([BLOCK], 1, dtype=src.dtype.element_ty), mask=mask)
    else:
        tl.store(dst + offs, tl.full([BLOCK], 1, dtype=dst.dtype.element_ty), mask=mask)


@triton.jit
def copy(dst, src, N, BLOCK: tl.constexpr):
    """dst = src."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def increment_strided(x, n, stride, BLOCK: tl.constexpr):
    """x[i * stride] += 1 for i < n: in place, through a view's stride."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x + offs * stride, tl.load(x + offs * stride, mask=mask) + 1, mask=mask)
