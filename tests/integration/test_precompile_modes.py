"""Precompile mode through the real runtime site, in process, under the interpreter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

FIXTURE = Path(__file__).parent / "precompile_fixtures" / "good" / "dsl_scale.py"


def _warm(session_kwargs: dict) -> object:
    from tunedsl.precompile.workload import import_script, precompile_mode, registered_workloads

    with precompile_mode(**session_kwargs) as session:
        module = import_script(FIXTURE)
        for entry in registered_workloads(module.__name__):
            entry.fn()
    return session, module


def test_sites_built_in_precompile_mode_count_interpreted_configurations() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    session, module = _warm({})
    totals = session.totals()
    assert totals["interpreted"] == 4 and totals["compiled"] == 0
    records = Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records"
    assert not records.exists() or not list(records.glob("*.json"))  # nothing tuned
    # Outside the mode the same site launches for real.
    import torch

    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    launch = module.scale(x, y, 3.0)
    assert torch.equal(y, 3 * x) and launch.source == "tuned"


def test_tune_mode_tunes_and_writes_the_record_then_finds_it() -> None:
    session, _ = _warm({"tune": True})
    assert [r.tuned for r in session.reports] == [True]
    records = Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records"
    assert len(list(records.glob("*.json"))) == 1
    again, _ = _warm({"tune": True})  # a fresh import: the record decides, nothing tuned
    assert [(r.tuned, r.cached) for r in again.reports] == [(False, 1)]


def test_a_site_built_before_precompile_mode_compiles_there_never_a_silent_tune() -> None:
    # A script imported before the block: its sites' misses in the block are the mode's
    # too (the mode is read on a miss, not when a site is built): they compile, nothing is
    # tuned or written, and outside the block the site tunes and launches.
    from tunedsl.precompile.workload import import_script, precompile_mode, registered_workloads

    module = import_script(FIXTURE)
    with precompile_mode() as session:
        for entry in registered_workloads(module.__name__):
            entry.fn()
    assert session.totals()["interpreted"] == 4
    records = Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records"
    assert not records.exists() or not list(records.glob("*.json"))  # nothing tuned
    import torch

    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    assert module.scale(x, y, 3.0).source == "tuned" and torch.equal(y, 3 * x)
