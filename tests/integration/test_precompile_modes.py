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


def test_a_site_built_before_precompile_mode_is_an_error_there_never_a_silent_tune() -> None:
    # A script imported before the block had sites that precompile mode never wrapped: its
    # workload's calls in the block tuned and launched for real, wrote records, and the
    # session reported nothing compiled (no error, no note).
    from tunedsl.errors import UsageError
    from tunedsl.precompile.workload import import_script, precompile_mode, registered_workloads

    module = import_script(FIXTURE)
    with precompile_mode() as session:
        for entry in registered_workloads(module.__name__):
            with pytest.raises(UsageError, match=r"built before precompile_mode\(\) was entered"):
                entry.fn()
    assert session.reports == []
    records = Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records"
    assert not records.exists() or not list(records.glob("*.json"))  # nothing tuned
    # Outside the block the site is an ordinary one again.
    import torch

    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    assert module.scale(x, y, 3.0).source == "tuned" and torch.equal(y, 3 * x)
