"""Racing: clear losers cost a handful of repetitions, close ones are re-measured side by side
in alternating order, and the race stops when the leader is separated or settled."""

from __future__ import annotations

import pytest
from landscape import LandscapeMeasurer

from tunedsl.engine.racing import RaceSettings, interval, race
from tunedsl.model.config import Config


class Fixed(LandscapeMeasurer):
    """Landscape noise and clock, but each configuration's true time given by its ``t``."""

    def sample(self, config: Config, reps: int) -> list[float]:
        self.calls.append((config, reps))
        self.reps[config] += reps
        if config.get("fails"):
            from tunedsl.engine.seams import MeasureFailure

            raise MeasureFailure("illegal memory access")
        return [config.t * (1 + self.rng.gauss(0, self.noise)) for _ in range(reps)]


def cfgs(*times: float) -> list[Config]:
    return [Config(t=t) for t in times]


def test_a_configuration_three_times_slower_costs_a_handful_of_repetitions() -> None:
    m = Fixed(seed=0)
    settings = RaceSettings()
    result = race(cfgs(1.0, 3.0, 3.3, 5.0), m.sample, settings)
    assert result.leader == Config(t=1.0)
    for slow in cfgs(3.0, 3.3, 5.0):
        assert m.reps[slow] == settings.first_reps
    assert result.rounds == 0  # separated after the opening measurement


def test_close_contenders_are_remeasured_side_by_side_in_alternating_order() -> None:
    m = Fixed(seed=1, noise=0.03)
    result = race(cfgs(1.0, 1.02, 4.0), m.sample, RaceSettings(max_reps=30))
    a, b, slow = cfgs(1.0, 1.02, 4.0)
    assert m.reps[slow] == 3
    assert m.reps[a] > 3 and m.reps[b] > 3
    assert result.rounds >= 2 and result.reopened == 2
    rounds = [cfg for cfg, _ in m.calls[5:]]  # after the opening A, B, slow and A, B again
    first, second = rounds[:2]
    assert {first, second} == {a, b}
    assert rounds[:4] == [first, second, second, first]  # A B, then B A: drift hits both alike
    assert result.leader == a


def test_the_race_stops_when_intervals_are_below_the_threshold() -> None:
    m = Fixed(seed=2, noise=0.0)  # noise-free: every interval has zero width at once
    result = race(cfgs(1.0, 1.0 + 1e-9), m.sample, RaceSettings(reopen_within=0.0))
    assert result.rounds == 0
    assert sum(m.reps.values()) == 6


class SlowedOpening(Fixed):
    """The true best's opening was measured beside running compiles: 12% slower."""

    def sample(self, config: Config, reps: int) -> list[float]:
        times = super().sample(config, reps)
        if config.t == 1.0 and self.reps[config] == reps:  # its first measurement
            return [t * 1.12 for t in times]
        return times


def test_an_opening_slowed_beside_compiles_does_not_rule_out_the_best() -> None:
    candidates = cfgs(1.0, 1.05, 1.4)
    best, runner, far = candidates
    # Without the side-by-side re-measurement the slowed opening loses the race.
    blind = race(candidates, SlowedOpening(seed=4, noise=0.005).sample,
                 RaceSettings(reopen_within=0.0))  # fmt: skip
    assert blind.leader == runner
    m = SlowedOpening(seed=4, noise=0.005)
    result = race(candidates, m.sample, RaceSettings())
    assert result.leader == best
    assert result.reopened == 2  # best and runner, not the far one
    assert m.reps[far] == 3
    assert all(t < 1.02 for t in result.samples[best])  # the slowed opening was replaced


def test_repetitions_are_capped_for_a_tie() -> None:
    m = Fixed(seed=3, noise=0.05)
    settings = RaceSettings(max_reps=12, rel_width=0.0001)
    race(cfgs(1.0, 1.0), m.sample, settings)  # a true tie never separates
    assert max(m.reps.values()) <= 12


def test_failures_at_run_time_are_reported_not_raised() -> None:
    m = Fixed(seed=0)
    bad = Config(t=0.5, fails=True)
    result = race([bad, *cfgs(1.0, 2.0)], m.sample)
    assert result.failed == {bad: "run: illegal memory access"}
    assert result.leader == Config(t=1.0)


def test_an_expired_budget_stops_opening_candidates() -> None:
    m = Fixed(seed=0)
    seen: list[Config] = []

    def expired() -> bool:
        return len(seen) >= 2

    result = race(
        cfgs(1.0, 2.0, 3.0), m.sample, expired=expired, on_measured=lambda c, s: seen.append(c)
    )
    assert list(result.samples) == cfgs(1.0, 2.0)
    both = race(cfgs(1.0, 2.0, 3.0), m.sample, expired=lambda: True, open_all=True)
    assert len(both.samples) == 3


def test_interval_widens_for_few_samples() -> None:
    assert interval([1.0]) == (float("-inf"), float("inf"))
    lo3, hi3 = interval([1.0, 1.1, 0.9])
    lo9, hi9 = interval([1.0, 1.1, 0.9] * 3)
    assert lo3 < lo9 < 1.0 < hi9 < hi3
    with pytest.raises(ValueError):
        RaceSettings(first_reps=0)


def test_a_round_sampler_takes_each_round_at_once_and_decides_as_one_at_a_time() -> None:
    # The same noise stream, one sample at a time or a round at a time: the same race.
    one = Fixed(seed=1, noise=0.03)
    alone = race(cfgs(1.0, 1.02, 1.04, 4.0), one.sample, RaceSettings(max_reps=30))
    many = Fixed(seed=1, noise=0.03)
    rounds: list[list[Config]] = []

    def sample_round(asked):
        rounds.append([c for c, _ in asked])
        return [many.sample(c, reps) for c, reps in asked]

    together = race(
        cfgs(1.0, 1.02, 1.04, 4.0), many.sample, RaceSettings(max_reps=30),
        sample_round=sample_round,
    )  # fmt: skip
    assert together.leader == alone.leader and together.samples == alone.samples
    assert together.rounds == alone.rounds >= 1 and together.reopened == alone.reopened == 3
    # The reopening and each later round were one call each, with every open candidate.
    assert len(rounds) == 1 + together.rounds
    assert set(rounds[0]) == set(cfgs(1.0, 1.02, 1.04))


def test_a_round_sampler_failure_fails_that_configuration_alone() -> None:
    from tunedsl.engine.seams import MeasureFailure

    bad = Config(t=1.01, fails=1)
    m = Fixed(seed=2, noise=0.03)
    calls = 0

    def sample_round(asked):
        nonlocal calls
        calls += 1
        return [MeasureFailure("lost") if c == bad else m.sample(c, r) for c, r in asked]

    def first(config: Config, reps: int) -> list[float]:  # the openings succeed
        return [config.t] * reps

    result = race([Config(t=1.0), bad, Config(t=1.02)], first, sample_round=sample_round)
    assert calls >= 1 and result.failed[bad] == "run: lost"
    assert bad not in result.samples and result.leader is not None
