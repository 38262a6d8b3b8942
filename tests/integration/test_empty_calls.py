"""A call that launches nothing under any configuration (an empty tensor) is ``"empty"`` on
every path that decides it: ``mode="off"``, a space of one configuration, a rule's plan."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from rule_helpers import SPACE, rules_cli, ship
from runtime_helpers import call, record_files, site
from runtime_kernels import vadd

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]


def args(n: int) -> tuple:
    a, b = torch.randn(n), torch.randn(n)
    return (a, b, torch.empty_like(a), n)


@pytest.mark.parametrize(
    ("space", "options"),
    [({"tile": [64, 128]}, {"mode": "off"}), ({"tile": [64]}, {})],
    ids=["mode-off", "one-configuration"],
)
def test_an_empty_call_with_nothing_to_compare_is_empty_and_kept_nowhere(
    space: dict, options: dict, tune_count: list
) -> None:
    s = site("nothing-to-compare", space=space, options=options)
    assert call(s, vadd, args(0), 0).source == "empty"
    assert call(s, vadd, args(0), 0).source == "empty"  # not kept in memory
    a, b, c, n = args(256)
    res = call(s, vadd, (a, b, c, n), n)
    assert res.source == "default" and res.config.tile == 64
    torch.testing.assert_close(c, a + b)
    assert record_files() == [] and tune_count == []


@triton.jit
def rows_plus_one(x, out, total, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < total
    tl.store(out + offs, tl.load(x + offs, mask=m) + 1, mask=m)


def rows(s, r: int):
    """``rows_plus_one`` on ``r`` rows of 64: ``total`` is a multiple of 16 for every ``r``
    (0 included), so the rows are the key's one size and every ``r`` one argument layout."""
    x = torch.randn(r, 64)
    out = torch.empty_like(x)
    res = call(s, rows_plus_one, (x, out, r * 64), r * 64)
    torch.testing.assert_close(out, x + 1)
    return res


def test_an_empty_call_that_a_rules_plan_reads_is_empty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    swept = site("rows", space=SPACE)
    assert [rows(swept, r).source for r in (1, 4, 16)] == ["tuned"] * 3
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    ship(out, monkeypatch, tmp_path)
    s = site("rows", space=SPACE)
    # The first row count a rule decides leaves the site a plan for its argument layout,
    # which decides the layout's next new row counts; 0 rows reads as 1 there (log2 of a
    # size below 1 is 0), inside the swept range, yet launches nothing.
    assert rows(s, 2).source == "rule"
    assert rows(s, 0).source == "empty"
    assert rows(s, 0).source == "empty"  # kept nowhere
    assert rows(s, 8).source == "rule"
    assert len(tune_count) == 3 and record_files() == []
