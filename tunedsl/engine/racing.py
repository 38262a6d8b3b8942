"""Racing: spend repetitions only where they can change the choice (engine layer, pure).

Every candidate is measured a little (``first_reps``) as it arrives; those near the leader
are then measured again side by side (``reopen_within``), since an opening measured beside
running compiles may be slowed by them; then, round after round, only the
candidates whose confidence interval still overlaps the leader's are measured again, side by
side in alternating order (A B C, C B A, ...) so that drift (clock boost, heat, a neighbour
process) affects all of them alike. A candidate stops being measured when it is separated
from the leader, when its interval is narrower than ``rel_width`` of its median (or
``abs_width_ms``: further repetitions cannot tell it from the leader), or at ``max_reps``.
A configuration three times slower than the leader is separated after its first
repetitions, so it costs a handful, not a full budget.

The interval is around the median: its standard error is about 1.25 standard deviations
over sqrt(n) (the median's efficiency for normal noise), the deviation estimated robustly
from the inter-quartile range once there are four samples, and widened by Student's t for
small samples.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tunedsl.engine.seams import MeasureFailure
from tunedsl.model.config import Config

# config, reps -> fresh timings in ms (Measurer.sample)
SampleFn = Callable[[Config, int], list[float]]
# [(config, reps), ...] -> each one's fresh timings or its MeasureFailure, in order: a round's
# samples taken at once (a measurer over several devices takes them side by side)
RoundFn = Callable[[Sequence[tuple[Config, int]]], list["list[float] | MeasureFailure"]]

# Two-sided 95% Student t quantiles by degrees of freedom (beyond the table: 1.96).
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


@dataclass(frozen=True)
class RaceSettings:
    """How hard a race looks (``SEARCH_EFFORTS`` holds the presets)."""

    first_reps: int = 3  # every candidate's opening measurement
    more_reps: int = 3  # each survivor's measurement per further round
    max_reps: int = 30  # no candidate is measured more than this in one race
    confidence: float = 0.95
    rel_width: float = 0.01  # a half-interval under 1% of the median is settled
    abs_width_ms: float = 0.0005  # ... or under 0.5 us
    # Once all are open, every candidate whose opening median is within this fraction of
    # the leader's is measured again side by side, the fresh samples replacing its opening:
    # openings arrive one by one while compiles fill the CPU, and a launching thread kept
    # waiting slows a sample, so an opening alone must not rule out a near candidate.
    reopen_within: float = 0.15

    def __post_init__(self) -> None:
        if not (1 <= self.first_reps <= self.max_reps and self.more_reps >= 1):
            raise ValueError(f"bad race settings: {self}")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"race confidence must be in [0.5, 1): {self.confidence}")
        if self.reopen_within < 0:
            raise ValueError(f"race reopen_within must be 0 or more: {self.reopen_within}")


DEFAULT_RACE = RaceSettings()


@dataclass
class RaceResult:
    """Every candidate's samples from this race, the failures, and the leader."""

    samples: dict[Config, list[float]] = field(default_factory=dict)
    failed: dict[Config, str] = field(default_factory=dict)
    rounds: int = 0  # re-measurement rounds after the opening one
    reopened: int = 0  # candidates whose opening was measured again side by side
    leader: Config | None = None

    def median(self, config: Config) -> float:
        return statistics.median(self.samples[config])


def interval(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """(low, high) confidence interval of the median of ``samples``."""
    n = len(samples)
    mid = statistics.median(samples)
    if n < 2:
        return (-math.inf, math.inf)  # one sample says nothing about the noise
    if n >= 4:
        q1, _, q3 = statistics.quantiles(samples, n=4)
        sigma = (q3 - q1) / 1.349
    else:
        sigma = statistics.stdev(samples)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    t = z * _T95.get(n - 1, 1.96) / 1.96
    half = t * 1.2533 * sigma / math.sqrt(n)
    return (mid - half, mid + half)


def race(
    candidates: Iterable[Config],
    sample: SampleFn,
    settings: RaceSettings = DEFAULT_RACE,
    *,
    expired: Callable[[], bool] = lambda: False,
    on_measured: Callable[[Config, list[float]], None] | None = None,
    open_all: bool = False,
    sample_round: RoundFn | None = None,
) -> RaceResult:
    """Race ``candidates`` (an iterable, consumed lazily: each is opened as it arrives, so
    a compile stream can feed it). ``expired()`` True stops the race at the next sample;
    candidates not opened by then are left out of the result (never measured), unless
    ``open_all``: then every candidate gets its opening measurement whatever the time.
    ``sample_round``: takes each later round's samples in one call (the round is then
    checked against ``expired()`` once, before it starts)."""
    out = RaceResult()
    stream = iter(candidates)
    # Checked before pulling the next candidate: pulling may wait for a compile.
    while open_all or not expired():
        cfg = next(stream, None)
        if cfg is None:
            break
        if _take(out, cfg, sample, settings.first_reps) and on_measured is not None:
            on_measured(cfg, out.samples[cfg])
    if settings.reopen_within > 0 and len(out.samples) > 1:
        _reopen(out, sample, settings, expired, sample_round)
    while out.samples and not expired():
        active = _still_open(out, settings)
        if not active:
            break
        out.rounds += 1
        order = active if out.rounds % 2 else list(reversed(active))
        if sample_round is not None:
            asked = [(c, min(settings.more_reps, settings.max_reps - len(out.samples[c])))
                     for c in order]  # fmt: skip
            for (cfg, _), fresh in zip(asked, sample_round(asked), strict=True):
                _keep(out, cfg, fresh)
            continue
        for cfg in order:
            if expired():
                break
            _take(
                out, cfg, sample, min(settings.more_reps, settings.max_reps - len(out.samples[cfg]))
            )
    if out.samples:
        out.leader = min(out.samples, key=out.median)
    return out


def _reopen(
    out: RaceResult,
    sample: SampleFn,
    settings: RaceSettings,
    expired: Callable[[], bool],
    sample_round: RoundFn | None = None,
) -> None:
    """Measure the candidates near the leader again, one after another, fastest first
    (with ``sample_round``: in one round)."""
    best = min(out.median(c) for c in out.samples)
    near = sorted(
        (c for c in out.samples if out.median(c) <= best * (1 + settings.reopen_within)),
        key=out.median,
    )
    if len(near) < 2:
        return  # nobody near enough for the opening to decide: the race goes on as it is
    if sample_round is not None:
        if expired():
            return
        asked = [(c, settings.first_reps) for c in near]
        openings = {c: out.samples.pop(c) for c in near}
        for cfg, fresh in zip(near, sample_round(asked), strict=True):
            if _keep(out, cfg, fresh):
                out.reopened += 1
            elif cfg not in out.failed:  # no fresh samples: the opening stands
                out.samples[cfg] = openings[cfg]
        return
    for cfg in near:
        if expired():
            return
        opening = out.samples.pop(cfg)
        if _take(out, cfg, sample, settings.first_reps):
            out.reopened += 1
        elif cfg not in out.failed:  # no fresh samples: the opening stands
            out.samples[cfg] = opening


def _take(out: RaceResult, cfg: Config, sample: SampleFn, reps: int) -> bool:
    try:
        fresh: list[float] | MeasureFailure = sample(cfg, reps)
    except MeasureFailure as err:
        fresh = err
    return _keep(out, cfg, fresh)


def _keep(out: RaceResult, cfg: Config, fresh: list[float] | MeasureFailure) -> bool:
    """Add ``cfg``'s fresh samples (or its failure) to the race."""
    if isinstance(fresh, MeasureFailure):
        err = fresh
        out.samples.pop(cfg, None)
        out.failed[cfg] = "run: " + (str(err).strip() or type(err).__name__)
        return False
    if not fresh:
        return bool(out.samples.get(cfg))
    out.samples.setdefault(cfg, []).extend(float(t) for t in fresh)
    return True


def _still_open(out: RaceResult, settings: RaceSettings) -> list[Config]:
    """The candidates worth another round: overlapping the leader and not yet settled."""
    bounds = {c: interval(s, settings.confidence) for c, s in out.samples.items()}
    leader = min(out.samples, key=out.median)
    leader_high = bounds[leader][1]
    overlapping = [c for c in out.samples if bounds[c][0] <= leader_high]
    if overlapping == [leader]:
        return []  # the leader is separated from everyone
    active = []
    for cfg in overlapping:
        low, high = bounds[cfg]
        mid = out.median(cfg)
        settled = (high - low) / 2 <= max(settings.rel_width * abs(mid), settings.abs_width_ms)
        if not settled and len(out.samples[cfg]) < settings.max_reps:
            active.append(cfg)
    return active
