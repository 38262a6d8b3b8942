"""Timers: how long a launch takes (backends layer; torch imported lazily, CUDA only for
the event timer).

``WallTimer`` times synchronous launches on the CPU (the interpreter); ``CudaEventTimer``
times each launch between two CUDA events after an L2 flush, and takes again a sample whose
launch was queued too late for the flush to cover (``LateQueueCheck``). The CUDA-graph
timer builds on it in ``graph_timing.py``.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


#: A timed launch and its end event must be queued within this share of the L2 flush's GPU
#: time after the flush was: then the GPU is still flushing when they arrive, and no wait
#: for the host lies between the events. A later sample is taken again. (Not the whole
#: flush: the GPU may start it a few microseconds before its enqueue call returns.)
QUEUE_SHARE_OF_FLUSH = 0.8
#: Retakes allowed per repetition asked for: a host too slow for the check still finishes.
RETAKES_PER_REP = 3
#: The interpreter's switch interval while a timer samples (Python's default is 5 ms).
#: Triton's launcher lets go of the GIL around ``cuLaunchKernel``; a thread that takes it
#: then (a compile thread loading a kernel, say) keeps it for up to the switch interval
#: before the timing thread may queue the end event, and that wait would be timed.
SAMPLING_SWITCH_INTERVAL_S = 2e-5


_switch_lock = threading.Lock()
_switch_saved: list[float] = []  # the interval before the first of the timers now sampling
_switch_users = 0


@contextmanager
def quick_gil_switches() -> Iterator[None]:
    """``SAMPLING_SWITCH_INTERVAL_S`` as the switch interval while any thread is inside;
    the interval from before comes back when the last one leaves."""
    global _switch_users
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved[:] = [sys.getswitchinterval()]
            sys.setswitchinterval(min(_switch_saved[0], SAMPLING_SWITCH_INTERVAL_S))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved[0])


class SamplingGate:
    """Turns between a timer's samples and the tuning process's helper threads.

    A compile worker's result is loaded in the tuning process, on a compile thread, while the
    timing thread samples; those loads are Python holding the GIL for milliseconds, and a
    timing thread that waits for the GIL after a launch makes the GPU wait inside the timed
    region (event timing beside such a thread on the H100: 1.2-8x the time alone, even with
    the switch interval at 5 µs). So helper work runs inside :meth:`helper_work`, a timer's
    sample (its repetitions) inside :meth:`sampling`, and the two take turns in the order
    they arrived (helpers together, samplers together):

    - a helper waits while a sample is taken, and for samplers that arrived before it;
    - a sampler waits for the helpers at work and those that arrived before it.

    Both wait a bounded time, then go on anyway (the late-queue check guards a sample taken
    beside a helper): ``patience_s`` for a sampler, ``helper_patience_s`` for a helper, so
    a tune started from inside a sample (a ``pre_hook`` that tunes another site) cannot
    wait on itself: its compile jobs are held up to ``helper_patience_s`` each. Helpers get
    their turn even while timers on several GPUs sample one after another."""

    def __init__(self, patience_s: float = 0.1, helper_patience_s: float = 2.0) -> None:
        self.patience_s = patience_s
        self.helper_patience_s = helper_patience_s
        self._cond = threading.Condition()
        self._tickets = itertools.count()
        self._helpers = 0  # at work
        self._sampling = 0  # samples being taken
        self._helpers_waiting: set[int] = set()  # their tickets
        self._samplers_waiting: set[int] = set()

    def waiting(self) -> tuple[int, int]:
        """(helpers, samplers) waiting now: for tests and diagnostics."""
        with self._cond:
            return len(self._helpers_waiting), len(self._samplers_waiting)

    @contextmanager
    def helper_work(self) -> Iterator[None]:
        with self._cond:
            self._wait_turn(
                self._helpers_waiting,
                lambda t: bool(self._sampling) or min(self._samplers_waiting, default=t) < t,
                self.helper_patience_s,
            )
            self._helpers += 1
        try:
            yield
        finally:
            with self._cond:
                self._helpers -= 1
                self._cond.notify_all()

    @contextmanager
    def sampling(self) -> Iterator[None]:
        with self._cond:
            self._wait_turn(
                self._samplers_waiting,
                lambda t: bool(self._helpers) or min(self._helpers_waiting, default=t) < t,
                self.patience_s,
            )
            self._sampling += 1
        try:
            yield
        finally:
            with self._cond:
                self._sampling -= 1
                self._cond.notify_all()

    def _wait_turn(self, queue: set[int], blocked: Callable[[int], bool], patience: float) -> None:
        """With the condition held: take a ticket in ``queue`` and wait while ``blocked``
        (at most ``patience`` seconds). The ticket leaves the queue however the wait ends,
        an interrupt included: a ticket left behind would hold the other side up for good."""
        ticket = next(self._tickets)
        queue.add(ticket)
        try:
            deadline = time.monotonic() + patience
            while blocked(ticket):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        except BaseException:
            queue.discard(ticket)
            self._cond.notify_all()  # the other side may go now
            raise
        # No wake-up here: the other side stays blocked by this one's entry, and waking
        # threads only to wait again would have them take the GIL beside a sample.
        queue.discard(ticket)


#: The process's gate: compile threads' loads on one side, every timer on the other.
GATE = SamplingGate()


class LateQueueCheck:
    """Whether a timed launch was queued too late to be timed alone (pure; the timers use it).

    Event timing queues ``flush, start event, launch, end event`` and relies on the flush
    keeping the GPU busy while the host queues the rest. A host thread held up in between
    (by the GIL while other threads load kernels, or by a CPU full of compiles) makes the
    GPU wait inside the timed region: on the H100, openings measured beside 16 compile
    workers read 1-4 ms for a 60 µs matmul, and a consistently slowed opening can rule the
    best configuration out. So the host time from the flush's return to the end event's is
    compared with the flush's own GPU time, and a late sample is taken again."""

    def __init__(self, flush_ms: float, reps: int) -> None:
        self.limit_s = QUEUE_SHARE_OF_FLUSH * flush_ms / 1e3
        self.retakes_left = RETAKES_PER_REP * reps
        self.retaken = 0

    def retake(self, queued_s: float) -> bool:
        """True when a sample whose launch took ``queued_s`` to queue must be taken again."""
        if queued_s <= self.limit_s or self.retakes_left <= 0:
            return False
        self.retakes_left -= 1
        self.retaken += 1
        return True


class CudaEventTimer:
    """Device-event timing with the L2 cache flushed before every repetition.

    Before each repetition: ``setup()`` (restore/zero arguments, pre-hook), then a write of
    a buffer twice the L2 size (so no input is served from L2), then the start event; only
    the launch lies between the events. A repetition whose launch was queued after the
    flush could have ended is taken again (:class:`LateQueueCheck`); ``retaken`` counts them.
    """

    kind = "cuda-events"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        l2 = device_facts().get("l2_bytes") or 50 * 2**20
        # At least 256 MiB (as triton.testing.do_bench): writing it keeps the GPU busy while
        # the CPU enqueues the start event and the launch, so no dispatch gap is timed.
        self.flush_buffer = torch.empty(max(2 * l2, 256 * 2**20), dtype=torch.int8, device="cuda")
        self.flush_ms: float | None = None  # the flush's GPU time, measured once
        self.retaken = 0

    def flush_l2(self) -> None:
        self.flush_buffer.zero_()

    def flush_time_ms(self) -> float:
        """The L2 flush's GPU time: the fastest of five, timed once per timer."""
        if self.flush_ms is None:
            torch = self.torch
            pairs = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(5)
            ]
            for start, end in pairs:
                start.record()
                self.flush_l2()
                end.record()
            torch.cuda.synchronize()
            self.flush_ms = min(start.elapsed_time(end) for start, end in pairs)
        return self.flush_ms

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        return self.timed(run, setup, reps)

    def timed(self, launch: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        """``reps`` event timings of ``launch``, each after ``setup()`` and a flush."""
        torch = self.torch
        check = LateQueueCheck(self.flush_time_ms(), reps)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        # One turn of the gate for all repetitions: loads wait for the whole sample (a turn
        # per repetition let a load in between repetitions, and timing beside a busy helper
        # was 3x the time alone on the H100).
        with GATE.sampling(), quick_gil_switches():
            i = 0
            while i < reps:
                setup()
                self.flush_l2()
                flushed = time.perf_counter()
                starts[i].record()
                launch()
                ends[i].record()
                if not check.retake(time.perf_counter() - flushed):
                    i += 1  # else the same events are recorded again
        torch.cuda.synchronize()
        self.retaken += check.retaken
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=False)]
