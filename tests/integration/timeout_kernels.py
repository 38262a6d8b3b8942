"""A kernel one configuration of which is slow to answer once per process (its first launch
there waits), for the timeout tests."""

from __future__ import annotations

import time

import triton
import triton.language as tl

_launched: set[tuple[int, int]] = set()


def wait(first_ms: object, each_ms: object) -> int:
    """Called by the interpreted kernel: ``first_ms`` at this configuration's first launch in
    the process, ``each_ms`` at every launch."""
    first = int(getattr(first_ms, "value", first_ms))  # type: ignore[call-overload]
    each = int(getattr(each_ms, "value", each_ms))  # type: ignore[call-overload]
    if (first, each) not in _launched:
        _launched.add((first, each))
        time.sleep(first / 1000)
    time.sleep(each / 1000)
    return 0


@triton.jit
def slow_first_copy(x, y, n, FIRST: tl.constexpr, EACH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    wait(FIRST, EACH)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
