"""Timers: how long a launch takes (backends layer; torch imported lazily, CUDA only for
the event timer).

``WallTimer`` times synchronous launches on the CPU (the interpreter); ``CudaEventTimer``
times each launch between two CUDA events after an L2 flush. The CUDA-graph timer builds
on it in ``graph_timing.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tunedsl.backends.triton import device_facts, synchronize


class WallTimer:
    """Wall-clock timing of synchronous launches (the interpreter runs them on the CPU)."""

    kind = "wall"

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        times = []
        for _ in range(reps):
            setup()
            start = time.perf_counter()
            run()
            synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return times


class CudaEventTimer:
    """Device-event timing with the L2 cache flushed before every repetition.

    Before each repetition: ``setup()`` (restore/zero arguments, pre-hook), then a write of
    a buffer twice the L2 size (so no input is served from L2), then the start event; only
    the launch lies between the events. Compiles run beside the samples (compile threads
    loading results, worker processes): a host thread held up between the flush and the end
    event would be timed, but on the H100 holding compiles back while sampling changed no
    configuration chosen (BENCHMARKS.md, "Cold tuning").
    """

    kind = "cuda-events"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        l2 = device_facts().get("l2_bytes") or 50 * 2**20
        # At least 256 MiB (as triton.testing.do_bench): writing it keeps the GPU busy while
        # the CPU enqueues the start event and the launch, so no dispatch gap is timed.
        self.flush_buffer = torch.empty(max(2 * l2, 256 * 2**20), dtype=torch.int8, device="cuda")

    def flush_l2(self) -> None:
        self.flush_buffer.zero_()

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        return self.timed(run, setup, reps)

    def timed(self, launch: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        """``reps`` event timings of ``launch``, each after ``setup()`` and a flush."""
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for start, end in zip(starts, ends, strict=True):
            setup()
            self.flush_l2()
            start.record()
            launch()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
