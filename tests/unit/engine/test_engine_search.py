"""Search strategies and the driver over a synthetic landscape (a deterministic cost over
144,000 configurations, seeded noise, a simulated clock): strategies beat random, the budget
is honoured, seeds repeat, failures are remembered and a stored search is continued."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from landscape import BEST, LandscapeMeasurer, SimClock, compiles, cost_ms, make_space

from tunedsl.engine.driver import SearchEvent, SearchOutcome, run_search
from tunedsl.engine.effort import search_effort
from tunedsl.engine.seams import Measurer, Observation, SearchStrategy
from tunedsl.engine.search import STRATEGIES, make_strategy
from tunedsl.engine.search.model import model_available
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config
from tunedsl.model.space import Space

needs_model = pytest.mark.skipif(
    not model_available(), reason="search='model' needs numpy (its Gaussian process)"
)
SPACE = make_space()


def search(
    name: str, seed: int = 0, budget: float | None = 6.0, **kw: object
) -> tuple[SearchOutcome, LandscapeMeasurer]:
    clock = SimClock()
    m = LandscapeMeasurer(seed=seed, clock=clock)
    space = kw.pop("space", SPACE)
    history = kw.pop("history", ())
    strategy = make_strategy(name, seed=seed, **kw)  # type: ignore[arg-type]
    out = run_search(space, strategy, m, budget_s=budget, clock=clock, history=history)  # type: ignore[arg-type]
    return out, m


def test_the_strategies_and_measurer_implement_the_seams() -> None:
    assert isinstance(LandscapeMeasurer(), Measurer)
    for name in STRATEGIES:
        if name != "model" or model_available():
            assert isinstance(make_strategy(name), SearchStrategy)
    with pytest.raises(UsageError, match="search='nope': expected one of auto, exhaustive"):
        make_strategy("nope")


@pytest.mark.parametrize("name", ["pattern", pytest.param("model", marks=needs_model)])
def test_strategies_find_the_best_more_often_than_random(name: str) -> None:
    seeds = range(3)
    found = sum(search(name, seed)[0].chosen == BEST for seed in seeds)
    by_random = sum(search("random", seed)[0].chosen == BEST for seed in seeds)
    assert found > by_random
    assert found >= 2


def test_exhaustive_measures_a_small_space_completely_and_finds_its_best() -> None:
    small = Space(
        BLOCK_M=[64, 128],
        BLOCK_N=[64, 128, 256],
        BLOCK_K=[32, 128],
        GROUP_M=[4],
        num_warps=[1, 4],
        num_stages=[1, 4],
        layout=["nn", "tn"],
        split_k=[1],
    )
    out, m = search("exhaustive", budget=None, space=small)
    assert out.exhausted
    assert out.chosen == BEST
    assert len(out.observations) == len(small.configs()) == 96
    assert out.measured == sum(1 for c in small.configs() if compiles(c))
    assert max(m.prepared.values()) == 1  # nothing compiled twice
    # Racing: a configuration 1.3x slower than the leader of its race costs only its
    # opening repetitions; the whole space costs far fewer than a fixed count each.
    by_round: dict[int, list[Config]] = {}
    for o in out.observations:
        if o.status == "ok":
            by_round.setdefault(o.round, []).append(o.config)
    slow = [
        c for cs in by_round.values() for c in cs if cost_ms(c) >= 1.3 * min(cost_ms(x) for x in cs)
    ]
    assert len(slow) > 10
    assert all(m.reps[c] == 3 for c in slow)
    assert sum(m.reps.values()) < 10 * len(m.reps)


@pytest.mark.parametrize("name", ["random", "pattern", pytest.param("model", marks=needs_model)])
def test_the_budget_is_honoured(name: str) -> None:
    budget = 2.0
    out, m = search(name, budget=budget)
    # One compile in flight and the final race's opening may run past the budget, no more.
    slack = m.compile_s + 3 * 3 * (m.overhead_s + 2.5e-3)
    assert out.elapsed_s <= budget + slack
    assert m.clock.now == out.elapsed_s
    if name != "model":  # the model search stops itself when its next batch would not fit
        assert not out.exhausted
    more, _ = search(name, budget=2 * budget)
    assert more.measured > out.measured


@pytest.mark.parametrize(
    "name", ["random", "pattern", pytest.param("model", marks=needs_model), "auto"]
)
def test_a_seed_gives_the_same_search(name: str) -> None:
    a, _ = search(name, seed=5, budget=2.0)
    b, _ = search(name, seed=5, budget=2.0)
    c, _ = search(name, seed=6, budget=2.0)
    assert a.chosen == b.chosen
    assert a.observations == b.observations
    assert a.seed == 5
    assert [o.config for o in a.observations] != [o.config for o in c.observations]


def test_failed_configurations_are_recorded_and_never_tried_again() -> None:
    out, _ = search("random", budget=3.0)
    failed = [o for o in out.observations if o.status == "failed"]
    assert failed and all("out of resources" in (o.reason or "") for o in failed)
    assert all(not compiles(o.config) for o in failed)
    # A second process continuing the stored search never compiles them again.
    again, m2 = search("random", budget=6.0, history=out.observations)
    assert not any(m2.prepared[o.config] for o in failed)
    assert {o.config: o for o in again.observations}[failed[0].config] == failed[0]


def test_a_failure_at_run_time_is_remembered() -> None:
    clock = SimClock()
    small = Space(BLOCK_M=[128], BLOCK_N=[64, 128], BLOCK_K=[32], GROUP_M=[4], num_warps=[4],
                  num_stages=[4], layout=["nn"], split_k=[1])  # fmt: skip
    m = LandscapeMeasurer(clock=clock, fail_at_run=[BEST])
    out = run_search(small, make_strategy("exhaustive"), m, clock=clock)
    status = {o.config: (o.status, o.reason) for o in out.observations}
    assert status[BEST] == ("failed", "run: illegal memory access")
    assert out.chosen != BEST


def test_a_larger_budget_continues_a_stored_search() -> None:
    first, _ = search("pattern", seed=1, budget=1.5)
    later, m = search("pattern", seed=1, budget=8.0, history=first.observations)
    before = {o.config for o in first.observations}
    # Nothing measured before is compiled again, except leaders raced in the final round.
    recompiled = [c for c in before if m.prepared[c]]
    assert len(recompiled) <= 3
    new = {o.config for o in later.observations} - before
    assert later.compiled == len(new) + len(recompiled)
    assert later.measured == sum(1 for o in later.observations if o.config in new and o.samples)
    assert cost_ms(later.chosen) <= cost_ms(first.chosen)
    assert later.chosen == BEST
    # The choice comes from a race run side by side in this process.
    assert {o.config: o for o in later.observations}[later.chosen].round == later.final_round
    assert later.final_round > max(o.round for o in first.observations)


def test_compile_ahead_hands_the_next_batch_to_the_measurer() -> None:
    out, m = search("random", budget=2.0)
    assert m.prefetched  # each batch was prefetched while the previous one was measured
    assert out.compiled >= out.measured


def test_every_configuration_failing_is_a_tuning_error() -> None:
    clock = SimClock()
    bad = Space(BLOCK_M=[256], BLOCK_N=[256], BLOCK_K=[16], GROUP_M=[1], num_warps=[1, 2],
                num_stages=[1], layout=["nn"], split_k=[1])  # fmt: skip
    with pytest.raises(TuningError, match="no configuration could be measured"):
        run_search(bad, make_strategy("auto"), LandscapeMeasurer(clock=clock), clock=clock)


def test_progress_events_report_the_search() -> None:
    events: list[SearchEvent] = []
    clock = SimClock()
    m = LandscapeMeasurer(clock=clock)
    out = run_search(
        SPACE, make_strategy("pattern"), m, budget_s=1.0, clock=clock, on_event=events.append
    )
    kinds = [e.kind for e in events]
    assert kinds[0] == "batch" and kinds[-1] == "done" and "raced" in kinds
    assert events[-1].best == out.chosen
    measured = [e.measured for e in events]
    assert measured == sorted(measured)
    left = [e.remaining_s for e in events if e.remaining_s is not None]
    assert left == sorted(left, reverse=True)


def test_auto_is_exhaustive_on_small_spaces_and_guided_on_large_ones() -> None:
    small = Space(tile=[16, 32, 64], warps=[1, 2, 4, 8])
    auto = make_strategy("auto")
    auto.propose(small, [], None)
    assert auto.resolved == "auto:exhaustive"  # type: ignore[attr-defined]
    big = make_strategy("auto")
    big.propose(SPACE, [], 10.0)
    assert big.resolved == ("auto:model" if model_available() else "auto:pattern")  # type: ignore[attr-defined]


def test_model_without_numpy_names_it_and_auto_climbs_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The surrogate (a Gaussian process) needs numpy only: model and auto work where it is
    # installed (the core's own environment, without numpy, is the case below).
    if importlib.util.find_spec("numpy") is not None:
        assert isinstance(make_strategy("model"), SearchStrategy)
        auto = make_strategy("auto")
        auto.propose(SPACE, [], 10.0)
        assert auto.resolved == "auto:model"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "numpy", None)  # what an absent package looks like
    with pytest.raises(UsageError, match=r"search='model' needs numpy"):
        make_strategy("model")
    auto = make_strategy("auto")
    auto.propose(SPACE, [], 10.0)
    assert auto.resolved == "auto:pattern"  # type: ignore[attr-defined]


def test_the_effort_table_has_exactly_the_accepted_names() -> None:
    from tunedsl import knobs
    from tunedsl.engine.effort import SEARCH_EFFORTS

    assert tuple(SEARCH_EFFORTS) == knobs.EFFORT_NAMES


def test_effort_presets() -> None:
    quick, thorough = search_effort("quick"), search_effort("thorough")
    assert quick.budget_s < search_effort("default").budget_s < thorough.budget_s
    assert quick.race.rel_width > thorough.race.rel_width
    with pytest.raises(UsageError, match="effort='max'"):
        search_effort("max")


def test_observations_keep_their_samples_and_rounds() -> None:
    out, _ = search("random", budget=1.0)
    ok = [o for o in out.observations if o.status == "ok"]
    assert all(o.samples and o.median_ms is not None for o in ok)
    assert isinstance(ok[0], Observation)
    rounds = {o.round for o in ok}
    assert len(rounds) > 1  # one round per raced batch
    assert isinstance(Config, type)


def test_search_and_budget_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedsl import knobs

    assert knobs.search() == "auto" and knobs.budget_s() is None
    monkeypatch.setenv("TUNEDSL_SEARCH", "Pattern")
    monkeypatch.setenv("TUNEDSL_BUDGET", "2.5")
    assert knobs.search() == "pattern" and knobs.budget_s() == 2.5
    assert set(knobs.SEARCH_STRATEGIES) == set(STRATEGIES)
    monkeypatch.setenv("TUNEDSL_SEARCH", "genetic")
    with pytest.raises(UsageError, match="TUNEDSL_SEARCH='genetic'"):
        knobs.search()
    monkeypatch.setenv("TUNEDSL_BUDGET", "-1")
    with pytest.raises(UsageError, match="TUNEDSL_BUDGET='-1' must be a positive, finite number"):
        knobs.budget_s()


def test_prune_narrows_each_batch_before_it_is_compiled() -> None:
    clock = SimClock()
    m = LandscapeMeasurer(clock=clock)
    seen: list[int] = []

    def prune(batch: list[Config]) -> list[Config]:
        seen.append(len(batch))
        return [c for c in batch if c.split_k == 1]

    out = run_search(SPACE, make_strategy("random"), m, budget_s=1.0, clock=clock, prune=prune)
    assert seen and all(c.split_k == 1 for c in m.prepared)
    # Compile-ahead gets the next batch already pruned: nothing pruned is compiled early.
    assert m.prefetched and all(c.split_k == 1 for batch in m.prefetched for c in batch)
    assert all(o.config.split_k == 1 for o in out.observations)


class Hinted:
    """A random search that records the driver's hints before each batch."""

    name = "hinted"
    adaptive = True

    def __init__(self) -> None:
        self.inner = make_strategy("random", batch=4)
        self.hints: list[dict[str, object]] = []

    def hint(self, **hints: object) -> None:
        self.hints.append(hints)

    def propose(
        self, space: Space, history: list[Observation], remaining_s: float | None
    ) -> list[Config]:
        return self.inner.propose(space, history, remaining_s)


def test_the_final_race_reserve_is_what_the_leaders_can_take() -> None:
    # The flat 10% until a repetition's cost is known, then 3 leaders x 30 repetitions at
    # the mean cost of one, twice over: the loop races on past 90% of the budget.
    clock = SimClock()
    m = LandscapeMeasurer(clock=clock, overhead_s=0.0002)  # a repetition costs 1.2-4 ms
    strategy = Hinted()
    raced: list[float] = []

    def on_event(event: SearchEvent) -> None:
        if event.kind == "raced":
            raced.append(clock.now)

    out = run_search(SPACE, strategy, m, budget_s=10.0, clock=clock, on_event=on_event)  # type: ignore[arg-type]
    reserves = [float(h["reserve_s"]) for h in strategy.hints]  # type: ignore[arg-type]
    assert reserves[0] == pytest.approx(1.0)  # nothing measured yet
    assert all(2 * 3 * 30 * 0.0012 < r < 2 * 3 * 30 * 0.004 for r in reserves[1:])
    assert {h["compile_workers"] for h in strategy.hints} == {1}  # the measurer's own
    assert max(raced) > 10.0 - reserves[-1] - 0.01 > 9.0
    assert out.elapsed_s <= 10.0
    final = [o for o in out.observations if o.round == out.final_round]
    assert len(final) == 3 and all(len(o.samples) > 3 for o in final)


def test_a_measurer_racing_the_leaders_elsewhere_keeps_the_flat_reserve() -> None:
    clock = SimClock()
    m = LandscapeMeasurer(clock=clock, overhead_s=0.0002)
    m.final_on_caller = lambda leaders: None  # type: ignore[attr-defined]
    strategy = Hinted()
    run_search(SPACE, strategy, m, budget_s=10.0, clock=clock)  # type: ignore[arg-type]
    assert len(strategy.hints) > 1
    assert all(h["reserve_s"] == pytest.approx(1.0) for h in strategy.hints)


def test_drawing_a_pool_of_a_space_whose_valid_points_are_rare_draws_once() -> None:
    """A space of 960,000 points whose constraint keeps 0.125% of them: a strategy's draw of
    new configurations stops after a round of draws that came back short (another round
    costs as many constraint calls and draws the same rarity), where it drew four rounds, and
    a budgeted search's proposal took four times as long (17 s against a 2 s budget)."""
    calls = []

    def sparse(c: Config) -> bool:
        calls.append(1)
        return c.a == 1 and c.b < 3 and c.c < 10

    space = Space(a=list(range(4)), b=list(range(100)), c=list(range(60)), d=list(range(40)),
                  constraint=sparse)  # fmt: skip
    strategy = make_strategy("random", seed=0)
    drawn = strategy.sample_new(space, set(), 8)  # type: ignore[attr-defined]
    assert drawn and all(sparse(c) for c in drawn)
    assert len(calls) <= 200 * 2 * 8 + len(drawn)  # one round of SAMPLE_TRIES draws a point
