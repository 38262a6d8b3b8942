"""Measuring on several devices (``backends/multi_device.py``) with real worker processes
under the interpreter: ``devices=[0, 0]`` gives two interpreter workers, so the spreading of
a batch, the merging of results, a worker crash in one of them and the leaders' re-measurement
on the caller's worker run for real, driven by the engine's search loop."""

from __future__ import annotations

import threading

import pytest
import torch
from isolate_kernels import double_or_die

from tunedsl import cdiv
from tunedsl.backends import isolated, multi_device
from tunedsl.engine.driver import SearchOutcome, run_search
from tunedsl.engine.seams import Measurer
from tunedsl.engine.search import make_strategy
from tunedsl.model.config import Config
from tunedsl.model.settings import Settings
from tunedsl.model.space import ListSpace
from tunedsl.model.variant import Variant
from tunedsl.runtime.tuner import TuneRequest

pytestmark = pytest.mark.needs_triton
N = 200


@pytest.fixture(autouse=True)
def _fresh_workers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "20")
    isolated.shutdown_workers()
    multi_device.shutdown_workers()
    yield
    isolated.shutdown_workers()
    multi_device.shutdown_workers()


def request(configs: list[Config]) -> tuple[TuneRequest, torch.Tensor, torch.Tensor]:
    x = torch.randn(N)
    y = torch.full_like(x, float("nan"))
    variants = [
        Variant(c, (x, y, N), {"TILE": c.tile, "MODE": c.mode}, (cdiv(N, c.tile),), {})
        for c in configs
    ]
    return (
        TuneRequest(kernel=double_or_die, variants=variants, settings=Settings(verify=True)),
        x,
        y,
    )


def test_two_workers_share_a_batch_and_the_caller_races_the_leaders() -> None:
    configs = [Config(tile=t, mode=0) for t in (16, 32, 64, 128, 256, 512)]
    req, x, y = request(configs)
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=2, chunk=1)
    assert isinstance(m, Measurer)
    m.wait_started()  # both up before the work comes: each takes some (whoever is free)
    try:
        out = run_search(ListSpace(configs), make_strategy("exhaustive"), m, final_leaders=3)
        pids = {slot.measurer.worker.proc.pid for slot in m.slots if slot.measurer.worker.proc}
    finally:
        m.close()
    # Spread: both workers compiled (and opened) part of the batch, each in its own process.
    assert set(m.owner.values()) == {0, 1} and len(pids) == 2
    # Merged: every configuration has one observation, measured, and the choice is one of them.
    status = {o.config: o.status for o in out.observations}
    assert status == {c: "ok" for c in configs}
    assert out.chosen in configs and out.compiled == len(configs)
    # The leaders were raced side by side on the caller's worker (slot 0), in the last round.
    final = [o for o in out.observations if o.round == out.final_round]
    assert len(final) == 3 and out.chosen in {o.config for o in final}
    assert m.final_from is not None
    on_caller = m.trace[m.final_from :]
    assert {o.config for o in final} == {cfg for cfg, _ in on_caller}
    assert all(slot == 0 for _, slot in on_caller)
    assert all(len(o.samples) >= 3 for o in final)
    # The caller's tensors were never written by a measurement (the workers have copies).
    assert torch.isnan(y).all()
    del x


def test_a_crash_in_one_worker_fails_one_configuration_and_the_rest_go_on() -> None:
    # mode=1 reads far outside any allocation: a segfault under the interpreter.
    configs = [Config(tile=t, mode=0) for t in (16, 32, 64, 128)] + [Config(tile=64, mode=1)]
    req, _, _ = request(configs)
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=2, chunk=2)
    try:
        prepared = {p.config: p for p in m.prepare(configs)}
        assert set(prepared) == set(configs)
        crashed = prepared[Config(tile=64, mode=1)]
        assert crashed.status == "failed" and "SIGSEGV" in (crashed.error or "")
        for c in configs[:4]:
            assert prepared[c].status == "ok" and len(m.banked[c]) == 2
        # The crashed worker restarted; both still measure, and the caller's takes over.
        assert m.sample(configs[0], 2) and m.sample(configs[0], 2)
        m.final_on_caller(configs[:2])
        assert len(m.sample(configs[1], 3)) == 3 and m.trace[-1] == (configs[1], 0)
    finally:
        m.close()


def test_a_worker_that_cannot_start_hands_its_work_to_the_others() -> None:
    configs = [Config(tile=t, mode=0) for t in (16, 32, 64, 128)]
    req, _, _ = request(configs)
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=1, chunk=1)
    try:
        # A setup the worker rejects: slot 1 answers every request with an error. (The
        # workers start when the measurer is made: wait, then replace slot 1's.)
        m.wait_started()
        m.slots[1].measurer.worker.kill()
        m.slots[1].measurer.worker.setup_frame = isolated.dumps(("setup", {"broken": True}))
        prepared = {p.config: p for p in m.prepare(configs)}
        assert {c: p.status for c, p in prepared.items()} == {c: "ok" for c in configs}
        assert m.slots[1].dead is not None and set(m.owner.values()) == {0}
    finally:
        m.slots[1].measurer.worker.setup_frame = None
        m.close()


def test_a_tuning_in_this_process_teaches_the_gpu_plan_its_measuring_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tunedsl.backends import device_plan
    from tunedsl.backends import triton as bt
    from tunedsl.runtime.tuner import tune

    monkeypatch.setattr(device_plan, "_seen", {})
    configs = [Config(tile=t, mode=0) for t in (8, 16, 32, 64, 128, 256, 512, 1024)]
    req, _, _ = request(configs)
    tune(req)  # in this process (one device, off a GPU), measured for real
    model = device_plan.model_name(bt.device_facts())
    seen = device_plan.costs_for(model, warm=False, isolate=False)
    assert seen.measure_s != device_plan.DEFAULT_MEASURE_S
    assert 0 < seen.measure_s < 30  # seconds a configuration, not milliseconds or a sum


class SlowWorker(isolated.Worker):
    """A real worker whose process starts only once ``gate`` is set (a slow start)."""

    def __init__(self, device: int | None, gate: threading.Event) -> None:
        super().__init__(device)
        self.gate = gate

    def start(self) -> None:
        self.gate.wait(300)
        super().start()


def test_the_callers_gpu_measures_in_this_process_while_the_other_workers_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tunedsl.backends import device_workers
    from tunedsl.backends.inprocess import InProcessMeasurer

    configs = [Config(tile=t, mode=0) for t in (16, 32, 64, 128)]
    req, _, _ = request(configs)
    gate = threading.Event()
    monkeypatch.setattr(device_workers, "worker", lambda device, nth: SlowWorker(device, gate))
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=2, local=True)
    try:
        assert isinstance(m.slots[0].measurer, InProcessMeasurer)
        # The other worker has not started: the caller's GPU opens everything, at once.
        prepared = {p.config: p for p in m.prepare(configs)}
        assert {c: p.status for c, p in prepared.items()} == {c: "ok" for c in configs}
        assert not m.slots[1].started.is_set()
        assert set(m.owner.values()) == {0} and all(len(m.banked[c]) == 2 for c in configs)
        m.final_on_caller(configs[:2])
        assert len(m.sample(configs[1], 3)) == 3 and m.trace[-1] == (configs[1], 0)
    finally:
        gate.set()
        m.close()
        m.slots[1].measurer.worker.kill()


def test_a_local_caller_and_a_worker_share_the_search_and_the_caller_races_the_leaders() -> None:
    configs = [Config(tile=t, mode=0) for t in (8, 16, 32, 64, 128, 256, 512, 1024)]
    req, _, _ = request(configs)
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=2, chunk=1, local=True)
    m.wait_started()
    try:
        out = run_search(ListSpace(configs), make_strategy("exhaustive"), m, final_leaders=3)
    finally:
        m.close()
    assert {o.config: o.status for o in out.observations} == {c: "ok" for c in configs}
    assert set(m.owner.values()) == {0, 1}  # this process and the worker both opened some
    assert m.slots[0].stats.opened + m.slots[1].stats.opened == len(configs)
    assert m.slots[0].thread is None  # no thread, no worker: the search's thread measured
    final = {o.config for o in out.observations if o.round == out.final_round}
    assert m.final_from is not None and out.chosen in final
    assert all(slot == 0 for _, slot in m.trace[m.final_from :])


def test_a_stored_leader_in_the_final_race_is_raced_on_the_callers_gpu() -> None:
    """A search that continues a stored record (a larger budget) races its stored leaders
    with its own in the final race: ``prepare`` after ``final_on_caller`` hands them to the
    race (they are readied on the caller's GPU) instead of waiting forever for a host
    compile that the closed host stage never starts and no GPU would open."""
    from tunedsl.engine.seams import Observation

    configs = [Config(tile=t, mode=0) for t in (16, 32, 64, 128)]
    stored = [Config(tile=t, mode=0) for t in (256, 512)]
    req, _, _ = request(configs + stored)
    history = [
        Observation(c, "ok", 1e-4 * (i + 1), (1e-4 * (i + 1),) * 3) for i, c in enumerate(stored)
    ]
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=2, chunk=1)
    m.wait_started()
    outcome: list[object] = []
    space, strategy = ListSpace(configs + stored), make_strategy("exhaustive")

    def search() -> None:
        outcome.append(run_search(space, strategy, m, final_leaders=3, history=history))

    searching = threading.Thread(target=search, daemon=True)
    try:
        searching.start()
        searching.join(60)
        assert not searching.is_alive(), "the final race waited forever for a stored leader"
    finally:
        if not searching.is_alive():  # else its thread holds the measurer: the fixture ends it
            m.close()
    out = outcome[0]
    assert isinstance(out, SearchOutcome)
    final = {o.config for o in out.observations if o.round == out.final_round}
    assert set(stored) <= final and out.chosen in final
    assert m.final_from is not None and all(slot == 0 for _, slot in m.trace[m.final_from :])
