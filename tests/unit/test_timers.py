"""The timers' host-side checks (``backends/timers.py``): which samples are taken again,
and the switch interval while sampling. The CUDA timing itself is tested on the GPU
(``tests/gpu/test_runtime_gpu.py``)."""

from __future__ import annotations

import sys
import threading

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


def test_a_sampler_waits_for_helpers_at_work_and_helpers_wait_for_samplers() -> None:
    gate = timers.SamplingGate(patience_s=60)
    order: list[str] = []
    helper_in, helper_go, sampler_in, sampler_go = (threading.Event() for _ in range(4))

    def helper() -> None:
        with gate.helper_work():
            order.append("helper in")
            helper_in.set()
            helper_go.wait(10)
            order.append("helper out")

    def sampler() -> None:
        with gate.sampling():
            order.append("sampler in")
            sampler_in.set()
            sampler_go.wait(10)
            order.append("sampler out")

    def late_helper() -> None:
        with gate.helper_work():
            order.append("late helper in")

    first = _in_thread(helper)
    assert helper_in.wait(10)
    second = _in_thread(sampler)
    assert not sampler_in.wait(0.2)  # the helper is still at work
    third = _in_thread(late_helper)  # arrives while the sampler waits: it goes after it
    helper_go.set()
    assert sampler_in.wait(10)
    third.join(0.2)
    assert third.is_alive()  # held while the sampler samples
    sampler_go.set()
    for thread in (first, second, third):
        thread.join(10)
    assert order == ["helper in", "helper out", "sampler in", "sampler out", "late helper in"]


def test_a_sampler_stops_waiting_after_its_patience_and_samplers_share_the_gate() -> None:
    gate = timers.SamplingGate(patience_s=0.05)
    stuck, release = threading.Event(), threading.Event()

    def stuck_helper() -> None:
        with gate.helper_work():
            stuck.set()
            release.wait(10)

    helper = _in_thread(stuck_helper)
    assert stuck.wait(10)
    with gate.sampling():  # the helper never leaves: the sampler goes on after its patience
        inside = threading.Event()

        def other_sampler() -> None:
            with gate.sampling():
                inside.set()

        other = _in_thread(other_sampler)
        other.join(10)
        assert inside.is_set()  # a second sampler was not kept out by the first
        assert helper.is_alive()
    release.set()
    helper.join(10)
