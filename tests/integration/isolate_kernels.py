"""Kernels for the isolated-measurement tests: configurations that crash or hang on purpose."""

from __future__ import annotations

import os

import triton
import triton.language as tl


@triton.jit
def double_or_die(x, y, n, TILE: tl.constexpr, MODE: tl.constexpr):
    """y = 2 x for MODE 0. MODE 1 reads far outside any allocation (a segfault under the
    interpreter, an illegal address on a GPU); MODE 2 spins forever."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    if MODE == 2:
        # A volatile load in the loop: a compiler may not delete it as a side-effect-free
        # infinite loop.
        spin = tl.load(x, volatile=True).to(tl.int32) * 0
        while spin == 0:
            spin = tl.load(x, volatile=True).to(tl.int32) * 0
    if MODE == 1:
        far = offs.to(tl.int64) * 1000000007 + 1000000007 * 1000
        tl.store(y + far, tl.load(x + far))
    else:
        tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


@triton.jit
def double_or_abort(x, y, n, TILE: tl.constexpr, ABORT: tl.constexpr):
    """Interpreter only: the interpreter runs the body as Python, so ABORT calls os.abort()."""
    if ABORT:
        os.abort()
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


@triton.jit
def double_or_exit(x, y, n, TILE: tl.constexpr, EXIT: tl.constexpr):
    """Interpreter only: EXIT leaves the worker with status 0 without a reply, as a GPU
    worker does after a failed launch (there, once it has replied)."""
    if EXIT:
        leave_cleanly()
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


def leave_cleanly() -> None:
    """Note the attempt (in the file ``TUNEDSL_TEST_EXIT_LOG`` names), then exit 0."""
    with open(os.environ["TUNEDSL_TEST_EXIT_LOG"], "a") as log:
        log.write("attempt\n")
    os._exit(0)
