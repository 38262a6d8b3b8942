"""Kernels of test_ported_autotuners_twelfth.py."""

import os
import time

import triton
import triton.language as tl

#: Launches of each slot in this process (a worker's own count, under ``isolate=True``).
LAUNCHES: dict[int, int] = {}


def fail_late(slot: int, at: int, how: int) -> None:
    """Called by the interpreter from a kernel's body (it runs the body as Python): the
    ``at``-th launch of ``slot`` in this process aborts it (``how`` 1), hangs (2) or
    raises (3)."""
    LAUNCHES[slot] = LAUNCHES.get(slot, 0) + 1
    if LAUNCHES[slot] >= at:
        if how == 1:
            os.abort()
        if how == 3:
            raise RuntimeError(f"launch {LAUNCHES[slot]} of slot {slot} failed")
        time.sleep(3600)


@triton.jit
def wearing_copy(dst, src, wear, N, SLOT: tl.constexpr, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src. Program 0 adds 1e-4 to wear[SLOT] per launch (a change within the in-place
    watch's tolerance: ``wear`` is an output, not restored between launches), and a launch
    that finds LIMIT launches' wear there raises (``tl.assume``, which the interpreter
    checks): a configuration that builds and runs, then fails at its LIMIT-th launch."""
    if tl.program_id(0) == 0:
        w = tl.load(wear + SLOT)
        tl.store(wear + SLOT, w + 1e-4)
        tl.assume(w < LIMIT * 1e-4 - 5e-5)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    tl.store(dst + i, tl.load(src + i, mask=mask), mask=mask)


@triton.jit
def repeat_copy(dst, src, N, REPEAT: tl.constexpr, WIDTH: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src, copied REPEAT times over (work in proportion to REPEAT); a WIDTH that is
    not a power of two fails to build (``tl.arange``)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    for _ in range(REPEAT):
        x = tl.load(src + i, mask=mask)
        x = x + tl.sum(tl.zeros((WIDTH,), tl.float32) + tl.arange(0, WIDTH) * 0, axis=0)
        tl.store(dst + i, x, mask=mask)


@triton.jit
def copy_or_trash(dst, src, N, TRASH: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src. With TRASH, each program also writes its block of ``src`` times 100, and
    the second program raises (``tl.assume``): a launch that wrote an input, then failed."""
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    x = tl.load(src + i, mask=mask)
    tl.store(dst + i, x, mask=mask)
    if TRASH:
        tl.store(src + i, x * 100, mask=mask)
        tl.assume(pid < 1)


@triton.jit
def copy_failing_late(dst, src, N, SLOT: tl.constexpr, AT: tl.constexpr, HOW: tl.constexpr,
                      BLOCK: tl.constexpr):  # fmt: skip
    """dst = src; the AT-th launch of SLOT in a process aborts it, hangs or raises
    (interpreter only: ``fail_late``)."""
    if tl.program_id(0) == 0:
        if HOW != 0:
            fail_late(SLOT, AT, HOW)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    tl.store(dst + i, tl.load(src + i, mask=mask), mask=mask)


@triton.jit
def gather_and_advance(out, src, idx, N, SLACK: tl.constexpr, BLOCK: tl.constexpr):
    """out = src[idx], then idx += 1 (an index the kernel advances in place); an index past
    N + SLACK raises (a bounds check): launches that start from the one before run off."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    j = tl.load(idx + i, mask=mask, other=0)
    tl.assume(tl.max(j) < N + SLACK)
    tl.store(out + i, tl.load(src + j, mask=mask), mask=mask)
    tl.store(idx + i, j + 1, mask=mask)
