"""Launch hints and the occupancy formula (pure: register-file numbers are given)."""

from __future__ import annotations

import pytest

from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.hints import (
    INTERPRETER,
    InfeasibleConfig,
    TargetFacts,
    launch_options,
    occupancy_register_cap,
)

H100 = TargetFacts("cuda", regs_per_sm=65536, max_threads_per_sm=2048, warp_size=32)


@pytest.mark.parametrize(
    "occupancy, warps, expected",
    [
        (1, 4, 255),  # 65536 / 128 = 512, capped at 255
        (2, 4, 255),  # 256 -> 255
        (3, 4, 168),  # 170.67 -> 170 -> 168 (multiple of 8)
        (4, 4, 128),
        (2, 8, 128),
        (4, 8, 64),
        (5, 4, 96),  # 102.4 -> 102 -> 96
        (16, 4, 32),
    ],
)
def test_occupancy_register_cap(occupancy: int, warps: int, expected: int) -> None:
    assert occupancy_register_cap(occupancy, warps, 65536, 2048) == expected


def test_occupancy_cap_follows_the_register_file() -> None:
    # A hypothetical device with half the register file halves the cap.
    assert occupancy_register_cap(4, 4, 32768, 2048) == 64


def test_occupancy_beyond_thread_limit_is_infeasible() -> None:
    with pytest.raises(InfeasibleConfig, match="needs 4096 threads"):
        occupancy_register_cap(4, 32, 65536, 2048)


def test_occupancy_must_be_positive() -> None:
    with pytest.raises(InfeasibleConfig):
        occupancy_register_cap(0, 4, 65536, 2048)


def test_launch_options_translate_occupancy_on_nvidia() -> None:
    opts = launch_options(Config(tile=64, num_warps=8, occupancy=2), {"num_stages": 3}, H100)
    assert opts == {"num_stages": 3, "num_warps": 8, "maxnreg": 128}


def test_explicit_maxnreg_is_only_lowered() -> None:
    opts = launch_options(Config(occupancy=1, maxnreg=96), {}, H100)
    assert opts["maxnreg"] == 96


def test_occupancy_on_amd_is_waves_per_eu() -> None:
    amd = TargetFacts("hip", warp_size=64)
    assert launch_options(Config(occupancy=2), {}, amd) == {"waves_per_eu": 2}


def test_interpreter_gets_the_hints_without_occupancy() -> None:
    """The interpreter drops them before running the kernel; a @triton.heuristics reads them."""
    opts = launch_options(Config(num_warps=4, occupancy=2), {"num_stages": 2}, INTERPRETER)
    assert opts == {"num_warps": 4, "num_stages": 2}


def test_space_hint_overrides_static_hint() -> None:
    assert launch_options(Config(num_warps=8), {"num_warps": 4}, H100) == {"num_warps": 8}


def test_bad_hint_value() -> None:
    with pytest.raises(UsageError, match="positive integer"):
        launch_options(Config(num_warps=0), {}, H100)
