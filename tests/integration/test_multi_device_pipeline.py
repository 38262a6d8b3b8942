"""The multi-device pipeline (``backends/multi_device.py``) with real worker processes under
the interpreter: the workers start with the measurer (beside the host compile), a free GPU
opens what the host compiled before the search asks for it (a prefetched batch, while the
current one is raced), one ``open`` request loads and times a whole part, and the time
split accounts for every configuration."""

from __future__ import annotations

import time

import pytest
import torch
from isolate_kernels import double_or_die

from tunedsl import cdiv
from tunedsl.backends import isolated, multi_device
from tunedsl.engine.driver import run_search
from tunedsl.engine.search import make_strategy
from tunedsl.model.config import Config
from tunedsl.model.settings import Settings
from tunedsl.model.space import ListSpace
from tunedsl.model.variant import Variant
from tunedsl.runtime.tuner import TuneRequest

pytestmark = pytest.mark.needs_triton
N = 200
CONFIGS = [Config(tile=t, mode=0) for t in (16, 32, 64, 128, 256, 512)]


@pytest.fixture(autouse=True)
def _fresh_workers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "60")
    isolated.shutdown_workers()
    multi_device.shutdown_workers()
    yield
    isolated.shutdown_workers()
    multi_device.shutdown_workers()


def request(configs: list[Config]) -> TuneRequest:
    x = torch.randn(N)
    y = torch.zeros_like(x)
    variants = [
        Variant(c, (x, y, N), {"TILE": c.tile, "MODE": c.mode}, (cdiv(N, c.tile),), {})
        for c in configs
    ]
    return TuneRequest(kernel=double_or_die, variants=variants, settings=Settings(verify=True))


def until(done, what: str, limit_s: float = 300.0) -> None:
    """Wait for ``done()`` (a guard against hanging, not a speed check)."""
    deadline = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_the_workers_start_with_the_measurer_before_any_work() -> None:
    m = multi_device.MultiDeviceMeasurer(request(CONFIGS), [0, 0], opening_reps=1)
    try:
        m.wait_started()
        procs = [slot.measurer.worker.proc for slot in m.slots]
        # Both processes are up and set up before anything was compiled or asked for.
        assert all(p is not None and p.poll() is None for p in procs)
        assert len({p.pid for p in procs if p is not None}) == 2
        assert not m.events and all(w.start_s > 0 for w in m.stats.workers)
    finally:
        m.close()


def test_a_prefetched_batch_is_opened_before_the_search_asks_for_it() -> None:
    m = multi_device.MultiDeviceMeasurer(request(CONFIGS), [0, 0], opening_reps=2)
    first, second = CONFIGS[:3], CONFIGS[3:]
    try:
        assert {p.config: p.status for p in m.prepare(first)} == {c: "ok" for c in first}
        m.prefetch(second)  # the driver announces the next batch before racing this one
        until(lambda: all(c in m.owner for c in second), "the prefetched batch opened")
        asked = time.perf_counter()
        got = {p.config: p for p in m.prepare(second)}
        assert {c: p.status for c, p in got.items()} == {c: "ok" for c in second}
        # Opened (loaded and timed) before prepare asked, with the opening banked.
        opened = {c: t for kind, c, t in m.events if kind == "measuring"}
        assert all(opened[c] < asked for c in second)
        assert all(len(m.banked[c]) == 2 for c in second)
    finally:
        m.close()


def test_one_open_request_loads_and_times_a_whole_part() -> None:
    req = request(CONFIGS[:3])
    measurer = isolated.IsolatedMeasurer(req, "auto", worker=isolated.Worker(None))
    try:
        replies = list(measurer.worker.stream(("open", [0, 1, 2], 3), 300.0))
    finally:
        measurer.close()
        measurer.worker.kill()
    assert sorted(r[1] for r in replies) == [0, 1, 2]
    for kind, _, status, reason, samples, load_s, time_s in replies:
        assert (kind, status, reason) == ("opened", "ok", None)
        assert len(samples) == 3 and all(s > 0 for s in samples)
        assert load_s >= 0 and time_s > 0


def test_the_time_split_accounts_for_every_configuration() -> None:
    m = multi_device.MultiDeviceMeasurer(request(CONFIGS), [0, 0], opening_reps=2, chunk=2)
    try:
        out = run_search(ListSpace(CONFIGS), make_strategy("exhaustive", batch=2), m)
    finally:
        m.close()
    split = m.stats
    assert out.chosen in CONFIGS and out.compiled == len(CONFIGS)
    assert sum(w.opened for w in split.workers) == len(CONFIGS)
    assert [w.device for w in split.workers] == [0, 0]
    assert all(w.start_s > 0 and w.time_s > 0 for w in split.workers if w.opened)
    assert split.first_s is not None and split.final_s > 0
    assert m.lookahead == 3  # the search announced three batches ahead


def test_a_race_round_runs_on_every_gpu_side_by_side() -> None:
    # Each configuration is opened on one worker; a later round of the race samples each on
    # its own worker, the workers at the same time (one thread per GPU), not one at a time.
    m = multi_device.MultiDeviceMeasurer(request(CONFIGS), [0, 0], opening_reps=1, chunk=1)
    try:
        m.wait_started()
        assert {p.status for p in m.prepare(CONFIGS)} == {"ok"}
        assert set(m.owner.values()) == {0, 1}
        asked = [(c, 6) for c in CONFIGS]
        banked = m.sample_round(asked)  # the openings, taken while opening
        assert [len(s) for s in banked] == [1] * len(CONFIGS) and not m.trace  # type: ignore[arg-type]
        got = m.sample_round(asked)
        # Every configuration got its samples, from the worker that opened it.
        assert all(isinstance(s, list) and len(s) == 6 for s in got), got
        on = dict(m.trace)
        assert on == {c: m.owner[c] for c in CONFIGS}
        per_device = {i: sum(1 for s in on.values() if s == i) for i in (0, 1)}
        assert per_device[0] >= 1 and per_device[1] >= 1
        assert m.most_sampling == 2  # both workers were sampling at once
    finally:
        m.close()


def test_the_search_takes_later_rounds_through_the_round_sampler() -> None:
    # Twin configurations (the same kernel twice): their intervals overlap, so the race
    # goes on past the openings, and each round samples a configuration on the worker that
    # opened it (how the openings spread over the workers depends on the machine's load).
    twins = [Config(tile=64, mode=0, twin=i) for i in range(6)]
    x = torch.randn(N)
    y = torch.zeros_like(x)
    variants = [Variant(c, (x, y, N), {"TILE": 64, "MODE": 0}, (cdiv(N, 64),), {}) for c in twins]
    req = TuneRequest(kernel=double_or_die, variants=variants, settings=Settings(verify=True))
    m = multi_device.MultiDeviceMeasurer(req, [0, 0], opening_reps=3, chunk=1)
    rounds: list[list[Config]] = []
    sample_round = m.sample_round

    def spy(asked):  # the real sampler; notes what each round asked for
        rounds.append([c for c, _ in asked])
        return sample_round(asked)

    m.sample_round = spy  # type: ignore[method-assign]
    try:
        m.wait_started()
        out = run_search(ListSpace(twins), make_strategy("exhaustive"), m, final_leaders=2)
    finally:
        m.close()
    assert out.chosen in twins
    assert rounds, "the race took no later round through sample_round"
    before_final = m.trace[: m.final_from]
    assert before_final and all(slot == m.owner[c] for c, slot in before_final)
