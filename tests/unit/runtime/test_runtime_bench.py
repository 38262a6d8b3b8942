"""The timing summary of raw samples (pure Python)."""

from __future__ import annotations

import pytest

from tunedsl.engine import bench


def test_summarize_median_and_spread() -> None:
    t = bench.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert t.median_ms == 3.0 and t.min_ms == 1.0 and t.reps == 5
    assert t.spread > 0


def test_summarize_of_few_samples_uses_their_range_and_refuses_none() -> None:
    t = bench.summarize([2.0, 4.0])
    assert t.median_ms == 3.0 and t.spread == pytest.approx(2.0 / 3.0)
    with pytest.raises(ValueError, match="no samples"):
        bench.summarize([])
