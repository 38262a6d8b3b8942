"""Search effort presets: the default time budget and how hard races look (engine layer).

The one table of efforts; its names are ``knobs.EFFORT_NAMES`` (what ``effort=`` and
``TUNEDSL_EFFORT`` accept).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedsl.engine.racing import RaceSettings
from tunedsl.errors import UsageError


@dataclass(frozen=True)
class SearchEffort:
    name: str
    budget_s: float  # default budget of one search, in seconds
    race: RaceSettings
    final_leaders: int  # the best this many are raced side by side before choosing


SEARCH_EFFORTS: dict[str, SearchEffort] = {
    "quick": SearchEffort(
        "quick", 4.0, RaceSettings(first_reps=2, more_reps=2, max_reps=12, rel_width=0.02), 2
    ),
    "default": SearchEffort("default", 10.0, RaceSettings(), 3),
    "thorough": SearchEffort(
        "thorough",
        40.0,
        RaceSettings(first_reps=5, more_reps=5, max_reps=100, confidence=0.99, rel_width=0.005),
        5,
    ),
}


def search_effort(name: str) -> SearchEffort:
    try:
        return SEARCH_EFFORTS[name]
    except KeyError:
        raise UsageError(f"effort={name!r}: expected one of {', '.join(SEARCH_EFFORTS)}") from None


def search_budget(budget_s: float | None, search: str, effort: str, size: int) -> float | None:
    """The budget of one search of ``size`` configurations: ``budget_s`` when given, else
    none for a small space searched exhaustively (its record then covers every candidate),
    else the effort preset's. The tuner searches under it, and the plan of how many GPUs
    measure (``backends/device_plan.py``) weighs the same budget."""
    from tunedsl.engine.search.auto import SMALL_VALID

    if budget_s is not None:
        return budget_s
    if search in ("auto", "exhaustive") and size <= SMALL_VALID:
        return None
    return search_effort(effort).budget_s
