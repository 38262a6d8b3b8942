"""The timers' host-side checks (``backends/timers.py``): which samples are taken again,
and the switch interval while sampling. The CUDA timing itself is tested on the GPU
(``tests/gpu/test_runtime_gpu.py``)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from tunedsl.backends import timers


def test_a_launch_queued_while_the_flush_runs_is_kept_a_later_one_is_taken_again() -> None:
    check = timers.LateQueueCheck(flush_ms=0.08, reps=2)  # 80 µs: queue within 64 µs
    assert check.limit_s == pytest.approx(64e-6)
    assert not check.retake(25e-6)
    assert check.retake(2e-3)  # 2 ms: the GPU waited for the host inside the timed region
    assert check.retaken == 1


def test_retakes_are_bounded_so_a_slow_host_still_finishes() -> None:
    check = timers.LateQueueCheck(flush_ms=0.08, reps=2)
    late = [check.retake(1e-3) for _ in range(10)]
    assert late == [True] * (timers.RETAKES_PER_REP * 2) + [False] * (10 - 6)
    assert check.retaken == 6


def test_the_switch_interval_is_short_while_any_thread_samples_and_restored_after() -> None:
    before = sys.getswitchinterval()
    inside = threading.Event()
    leave = threading.Event()
    seen: list[float] = []

    def other_sampler() -> None:
        with timers.quick_gil_switches():
            inside.set()
            leave.wait(10)
            seen.append(sys.getswitchinterval())

    thread = threading.Thread(target=other_sampler)
    thread.start()
    assert inside.wait(10)
    with timers.quick_gil_switches():  # overlapping samplers: the first one's value is kept
        assert sys.getswitchinterval() == pytest.approx(timers.SAMPLING_SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == pytest.approx(timers.SAMPLING_SWITCH_INTERVAL_S)
    leave.set()
    thread.join(10)
    assert seen == [pytest.approx(timers.SAMPLING_SWITCH_INTERVAL_S)]
    assert sys.getswitchinterval() == pytest.approx(before)


def _in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _until(condition, what: str) -> None:
    """Wait (up to 10 s) for ``condition()``: a thread has queued at the gate, say."""
    for _ in range(2000):
        if condition():
            return
        time.sleep(0.005)
    raise AssertionError(f"never: {what}")


class _Step:
    """A thread that enters ``gate`` (as a helper or a sampler), says so, and leaves when told.
    It returns once the thread is inside or queued at the gate, so the order of arrival is
    the order of the steps."""

    def __init__(self, gate: timers.SamplingGate, role: str, name: str, order: list[str]):
        self.entered, self.leave = threading.Event(), threading.Event()
        enter = gate.helper_work if role == "helper" else gate.sampling
        side = 0 if role == "helper" else 1
        before = gate.waiting()[side]

        def body() -> None:
            with enter():
                order.append(f"{name} in")
                self.entered.set()
                self.leave.wait(10)
                order.append(f"{name} out")

        self.thread = _in_thread(body)
        _until(lambda: self.entered.is_set() or gate.waiting()[side] > before, f"{name} arrives")

    def finish(self) -> None:
        self.leave.set()
        self.thread.join(10)


def test_a_sampler_waits_for_helpers_at_work_and_helpers_wait_for_a_sample() -> None:
    gate = timers.SamplingGate(patience_s=60, helper_patience_s=60)
    order: list[str] = []
    helper = _Step(gate, "helper", "helper", order)
    assert helper.entered.is_set()
    sampler = _Step(gate, "sampler", "sampler", order)
    assert not sampler.entered.wait(0.2)  # the helper is still at work
    helper.finish()
    assert sampler.entered.wait(10)
    late = _Step(gate, "helper", "late helper", order)
    assert not late.entered.wait(0.2)  # held while the sample is taken
    sampler.finish()
    assert late.entered.wait(10)
    late.finish()
    assert order == [
        "helper in", "helper out", "sampler in", "sampler out", "late helper in",
        "late helper out",
    ]  # fmt: skip


def test_a_helper_arriving_after_a_waiting_sampler_goes_after_it() -> None:
    # A compile thread that loads one result after another must not keep a sample out.
    gate = timers.SamplingGate(patience_s=60, helper_patience_s=60)
    order: list[str] = []
    helper = _Step(gate, "helper", "helper", order)
    sampler = _Step(gate, "sampler", "sampler", order)
    next_helper = _Step(gate, "helper", "next helper", order)  # queued after the sampler
    assert not sampler.entered.wait(0.2) and not next_helper.entered.is_set()
    helper.finish()
    assert sampler.entered.wait(10)
    assert not next_helper.entered.wait(0.2)
    sampler.finish()
    assert next_helper.entered.wait(10)
    next_helper.finish()
    assert order == [
        "helper in", "helper out", "sampler in", "sampler out", "next helper in",
        "next helper out",
    ]  # fmt: skip


def test_helpers_waiting_for_one_sampler_go_before_the_next_sampler() -> None:
    # Timers on two GPUs sampling one after another must not keep the loads out.
    gate = timers.SamplingGate(patience_s=60, helper_patience_s=60)
    order: list[str] = []
    first = _Step(gate, "sampler", "first sampler", order)
    assert first.entered.is_set()
    helper = _Step(gate, "helper", "helper", order)
    second = _Step(gate, "sampler", "second sampler", order)  # a helper waits: it goes first
    first.finish()
    assert helper.entered.wait(10)
    assert not second.entered.wait(0.2)
    helper.finish()
    assert second.entered.wait(10)
    second.finish()
    assert order == [
        "first sampler in", "first sampler out", "helper in", "helper out",
        "second sampler in", "second sampler out",
    ]  # fmt: skip


def test_both_sides_stop_waiting_after_their_patience_and_samplers_share_the_gate() -> None:
    # A hook that tunes another site from inside a timed region must not wait on itself.
    gate = timers.SamplingGate(patience_s=0.05, helper_patience_s=0.05)
    order: list[str] = []
    stuck = _Step(gate, "helper", "stuck helper", order)
    with gate.sampling():  # the helper never leaves: the sampler goes on after its patience
        other = _Step(gate, "sampler", "other sampler", order)
        assert other.entered.wait(10)  # samplers do not keep each other out
        late = _Step(gate, "helper", "late helper", order)
        assert late.entered.wait(10)  # in, although samples are being taken
        for step in (other, late):
            step.finish()
    stuck.finish()
    assert gate.waiting() == (0, 0)


class _InterruptedWait(threading.Condition):
    """A condition whose first wait raises as Ctrl-C would, in the middle of waiting."""

    interrupted = False

    def wait(self, timeout=None):  # type: ignore[no-untyped-def]
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_an_interrupted_wait_leaves_no_ticket_behind() -> None:
    gate = timers.SamplingGate(patience_s=60, helper_patience_s=60)
    gate._cond = _InterruptedWait()
    order: list[str] = []
    helper = _Step(gate, "helper", "helper", order)
    with pytest.raises(KeyboardInterrupt), gate.sampling():
        pass  # pragma: no cover - the wait for the helper is interrupted
    assert gate.waiting() == (0, 0)
    helper.finish()
    later = _Step(gate, "helper", "later helper", order)
    assert later.entered.wait(10)  # not kept out by the interrupted sampler's ticket
    later.finish()


class _CountingCondition(threading.Condition):
    wakeups = 0

    def notify_all(self) -> None:
        self.wakeups += 1
        super().notify_all()


def test_entering_wakes_nobody_only_leaving_does() -> None:
    # A waiting helper woken while a sample is taken would take the GIL beside it only to
    # wait again.
    gate = timers.SamplingGate(patience_s=60, helper_patience_s=60)
    cond = _CountingCondition()
    gate._cond = cond
    order: list[str] = []
    first = _Step(gate, "sampler", "first sampler", order)
    assert cond.wakeups == 0  # its entry woke nobody
    with gate.sampling():  # samplers do not wait for each other: in at once
        assert cond.wakeups == 0
        helper = _Step(gate, "helper", "helper", order)  # waits while samples are taken
        assert cond.wakeups == 0
    assert cond.wakeups == 1  # leaving wakes the waiting helper, which waits on
    first.finish()
    assert helper.entered.wait(10) and cond.wakeups == 2
    helper.finish()
