"""The configurations an ``args=`` function is probed under (``prune_args.probe``)."""

from __future__ import annotations

from tunedsl.model.config import Config
from tunedsl.model.settings import Settings
from tunedsl.model.space import Space
from tunedsl.runtime.prune_args import SPREAD, probe


def _large(space: Space, default: Config) -> Settings:
    return Settings(default=default, space=space, large=True)


def test_an_axis_of_one_value_costs_no_spread_samples() -> None:
    """An axis of one value has no configuration that moves it alone: the default and the
    moves of every other axis to its two ends tell every position apart, with no ``SPREAD``
    samples besides."""
    default = Config(BLOCK=16, num_warps=4, stages=1)
    space = Space(BLOCK=[16, 32, 64, 128], num_warps=[4], stages=[1, 2, 3])
    assert probe(_large(space, default)) == [
        default,
        default.replace(BLOCK=32),
        default.replace(BLOCK=128),
        default.replace(stages=2),
        default.replace(stages=3),
    ]


def test_an_axis_a_constraint_leaves_no_move_adds_spread_samples() -> None:
    """Where a constraint leaves an axis of several values no configuration that moves it
    alone, points spread over the space are probed too."""
    default = Config(BLOCK=16, num_warps=4)
    space = Space(
        BLOCK=[16, 32, 64, 128],
        num_warps=[4, 8],
        constraint=lambda c: c.num_warps == 4 or c.BLOCK >= 64,
    )
    picks = probe(_large(space, default))
    assert picks[:2] == [default, default.replace(BLOCK=32)]
    assert len(picks) > 2 and len(picks) <= 2 + SPREAD
    assert any(c.num_warps == 8 for c in picks)


def test_a_field_every_listed_configuration_shares_costs_no_spread_samples() -> None:
    """A list of configurations (more than ``PROBE_LIMIT``) whose ``num_warps`` is one
    value throughout: the default and, per other field, the first and last configuration
    moving that field alone are probed."""
    configs = [Config(BLOCK=b, stages=s, num_warps=4) for b in range(1, 7) for s in (1, 2, 3)]
    picks = probe(Settings(configs=configs, default=configs[0]))
    assert picks == [configs[0], configs[1], configs[2], configs[3], configs[15]]
