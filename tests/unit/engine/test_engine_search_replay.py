"""The search against recorded data: ``search='auto'`` through the real driver and race on the
H100 table of every softmax configuration (``benchmarks/data``), replayed by
``benchmarks/bench_search_replay.py`` (stored medians with seeded noise, a simulated clock;
no GPU, no wall clock)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from landscape import LandscapeMeasurer, SimClock, make_space

from tunedsl.engine.driver import run_search
from tunedsl.engine.search import ModelSearch
from tunedsl.engine.search.model import GaussianProcess, expected_improvement, model_available

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from bench_search_replay import FAMILIES, load_table, replay

needs_model = pytest.mark.skipif(
    not model_available(), reason="search='model' needs numpy (its Gaussian process)"
)


@needs_model
def test_auto_chooses_within_2_percent_of_the_softmax_best_within_its_budget() -> None:
    # 600 valid configurations, a 5 s budget (0.1x of the exhaustive first call), compiles
    # as on the H100's 16 threads: three batches fit. The softmax is the hardest family for
    # the Gaussian process: batches of 8 chose within 2% in 12 of seeds 0-19 (and 3 of
    # these 5); batches that fill the 16 compile threads, in 16 of 20.
    family = FAMILIES["softmax"]
    table = load_table(family)  # checks the space's valid configurations are the table's
    gaps = []
    for seed in range(5):
        out, gap = replay(family, table, "auto", seed, family.budget_s)
        assert out.strategy == "auto:model"
        assert out.elapsed_s <= family.budget_s  # the search stopped in time
        assert out.measured <= 0.1 * len(table.medians)
        gaps.append(gap)
    assert sum(g <= 0.02 for g in gaps) >= 4, [f"{g:.1%}" for g in gaps]
    assert max(gaps) < 0.06


@needs_model
def test_the_replay_is_deterministic_given_the_seed() -> None:
    family = FAMILIES["softmax"]
    table = load_table(family)
    first, _ = replay(family, table, "model", 3, family.budget_s)
    again, _ = replay(family, table, "model", 3, family.budget_s)
    assert first.chosen == again.chosen
    assert [o.config for o in first.observations] == [o.config for o in again.observations]


def test_model_options_are_checked() -> None:
    with pytest.raises(ValueError, match=r"local \(2\) must be in \[0, 1\]"):
        ModelSearch(local=2)
    with pytest.raises(ValueError, match=r"reserve \(1\.5\)"):
        ModelSearch(reserve=1.5)


def test_the_gaussian_process_fits_and_knows_where_it_is_unsure() -> None:
    np = pytest.importorskip("numpy")
    x = np.linspace(0, 1, 9)[:, None]
    y = np.log(1 + 4 * (x[:, 0] - 0.6) ** 2)  # a bowl, lowest at 0.6
    gp = GaussianProcess().fit(x, y)
    mu, sd = gp.predict(x)
    assert np.abs(mu - y).max() < 0.05  # it fits the points it saw
    _, far_sd = gp.predict(np.array([[3.0]]))
    assert far_sd[0] > 5 * sd.max()  # far from the data it is unsure
    # EI is highest near the bowl's bottom among unseen points, and zero-ish where worse.
    grid = np.linspace(0, 1, 101)[:, None]
    m, s = gp.predict(grid)
    ei = expected_improvement(float(y.min()), m, s)
    assert abs(float(grid[int(np.argmax(ei)), 0]) - 0.6) < 0.1
    # Believing a point at its prediction (a batch's pick) keeps the prediction and
    # shrinks the uncertainty there, so the next pick goes elsewhere.
    at = np.array([[2.0]])
    (pm,), (ps,) = gp.predict(at)
    grown = gp.believe(at, np.array([pm]))
    (gm,), (gs,) = grown.predict(at)
    assert abs(gm - pm) < 0.05 * ps and gs < 0.5 * ps
    assert (grown.scale, grown.noise) == (gp.scale, gp.noise)  # the same kernel


@needs_model
def test_the_model_search_stops_when_its_next_batch_cannot_finish() -> None:
    # The square matmul: 10 s, batches of about 1.7 s (compile-bound). Started at 8.5 s, a
    # sixth batch would compile until after the driver stops racing: unmeasured, and its
    # compiles would take the final race's time (the leaders raced on 3 reps each).
    family = FAMILIES["square"]
    table = load_table(family)
    out, _ = replay(family, table, "model", 0, family.budget_s)
    assert out.exhausted  # the strategy stopped itself
    assert out.elapsed_s < 0.9 * family.budget_s  # ... with the final race inside the budget
    final = [o for o in out.observations if o.round == out.final_round]
    assert len(final) == 3 and all(len(o.samples) > 3 for o in final)
    # The stop is a budget decision: the time it left could not have held another batch.
    strategy = ModelSearch(seed=0)
    clock = SimClock()
    m = LandscapeMeasurer(clock=clock, overhead_s=0.0002)
    run_search(make_space(), strategy, m, budget_s=6.0, clock=clock)
    assert strategy._last_remaining is not None and strategy.batch_s
    assert strategy.reserve_s is not None and strategy.reserve_s < strategy.reserve * 6.0
    left = strategy._last_remaining - strategy.reserve_s  # the driver's reserve, as told
    assert 0 < left < max(strategy.batch_s[-3:])


@needs_model
def test_the_model_search_fills_the_compile_workers() -> None:
    # A batch of 8 on the H100's 16 compile threads waits as long as one of 16.
    strategy = ModelSearch(seed=0)
    strategy.hint(compile_workers=16, reserve_s=0.2)
    assert (strategy.batch, strategy.initial, strategy.reserve_s) == (16, 16, 0.2)
    assert [ModelSearch(seed=0, batch=8), ModelSearch(seed=0, initial=4)][0].batch == 8
    for workers, batch in [(2, 8), (64, 32)]:  # within 8 and 32
        strategy = ModelSearch(seed=0)
        strategy.hint(compile_workers=workers)
        assert strategy.batch == batch
    fixed = ModelSearch(seed=0, batch=8, initial=4)  # a batch named by the caller is kept
    fixed.hint(compile_workers=16)
    assert (fixed.batch, fixed.initial) == (8, 4)


@needs_model
def test_auto_on_split_k_fills_the_compile_workers_and_the_budget() -> None:
    # 1,020 configurations, 7.5 s, compiles on 16 workers: five batches of 16 fit (of 8, and
    # stopping at 90% of the budget, five batches of 8: 12 of held-out seeds 100-119).
    family = FAMILIES["splitk"]
    table = load_table(family)
    out, gap = replay(family, table, "auto", 100, family.budget_s)
    assert out.measured == 80 and gap <= 0.02
    assert 0.85 * family.budget_s < out.elapsed_s <= family.budget_s
    # On one compile worker (each compile 16x shorter) the batches stay at 8.
    out, _ = replay(family, table, "auto", 100, family.budget_s, workers=1)
    rounds = {o.round for o in out.observations if o.round != out.final_round}
    assert out.measured <= 8 * len(rounds) + 3


@needs_model
@pytest.mark.parametrize("name", ["square", "splitk"])
def test_auto_is_within_2_percent_on_the_matmuls_more_often_than_pattern(name: str) -> None:
    # Five held-out seeds (the strategy was tuned on seeds 0-19).
    family = FAMILIES[name]
    table = load_table(family)
    seeds = range(100, 105)
    auto = [replay(family, table, "auto", seed, family.budget_s)[1] for seed in seeds]
    pattern = [replay(family, table, "pattern", seed, family.budget_s)[1] for seed in seeds]
    assert sum(g <= 0.02 for g in auto) >= 4
    assert sum(auto) < sum(pattern)
