"""What names a site and its records: each call of a line its own site, and the launch's
per-configuration text in the record digest. Real kernels (Triton's interpreter)."""

from __future__ import annotations

import pytest
import torch
from runtime_kernels import vadd

from tunedsl import autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton

N = 256


def _tensors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b = torch.randn(N), torch.randn(N)
    return a, b, torch.empty(N), torch.empty(N)


def _grid(cfg):
    return (cdiv(N, cfg.tile),)


# -- two autotune_launch calls on one line -------------------------------------------------


def two_on_one_line(name: str | None = None):
    a, b, c1, c2 = _tensors()
    first = autotune_launch(vadd, space={"tile": [64, 128]}, grid=_grid, args=lambda cfg: (a, b, c1, N, cfg.tile), name=name); second = autotune_launch(vadd, space={"tile": [32, 256]}, grid=_grid, args=lambda cfg: (a, b, c2, N, cfg.tile), name=name)  # noqa: E702  # fmt: skip
    alone = autotune_launch(
        vadd,
        space={"tile": [32, 64]},
        grid=_grid,
        args=lambda cfg: (a, b, c1, N, cfg.tile),
        name=name,
    )
    torch.testing.assert_close(c1, a + b)
    torch.testing.assert_close(c2, a + b)
    return first, second, alone


def test_two_calls_on_one_line_are_two_sites() -> None:
    first, second, alone = two_on_one_line()
    mod = "test_site_launch_identity.py:two_on_one_line:autotune_launch"
    # Each call is its own site: the second is tuned over its own space, never handed the
    # first's decision (a configuration its space does not even hold).
    assert (first.site, second.site) == (mod, mod + "#1")
    assert second.source == "tuned" and second.config.tile in (32, 256)
    # A call alone on its line keeps the identity it always had (existing records match):
    # its ordinal counts the calls of the function on earlier lines.
    assert alone.site == mod + "#2"
    # Each keeps its own decision on later calls.
    again = two_on_one_line()
    assert [r.source for r in again] == ["memory"] * 3
    assert [r.config for r in again] == [first.config, second.config, alone.config]


def test_calls_of_one_name_on_one_line_stay_one_site() -> None:
    first, second, _ = two_on_one_line(name="shared-name")
    assert first.site == second.site == "shared-name"
