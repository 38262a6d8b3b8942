"""The search loop: strategy -> measurer.prepare -> race -> observations (engine layer, pure).

``run_search`` asks the strategy for a batch, has the measurer compile it (``prepare`` yields
each configuration as it finishes compiling, and the race opens each as it arrives, so
measuring overlaps compiling), races the batch, and hands the observations back to the
strategy, until the strategy is done or the budget is spent. Then the best few are raced
once more side by side, so the choice compares timings taken together (one ``round``).

- **Budget**: seconds on an injectable ``clock``; the loop stops proposing when all but
  the final race's reserve is spent and a race stops at the next sample once it is spent.
  The reserve is ``reserve`` of the budget until the races have shown what a repetition
  costs, then only what the final race can take (every leader at ``max_reps``, twice over)
  when that is less: a flat 10% left a tenth of every budget unused. A measurer that
  re-measures the leaders elsewhere (``final_on_caller``) keeps the flat share. A compile in
  flight is the only overrun.
- **Hints**: a strategy with ``hint(compile_workers=, reserve_s=)`` is told, before each
  batch, how many configurations compile in parallel (the measurer's ``compile_workers``,
  if it has one) and the seconds kept for the final race.
- **Compile-ahead**: a strategy that is not ``adaptive`` (exhaustive, random) proposes its
  next batches before the current one is raced (the measurer's ``lookahead`` batches, and
  enough for ``AHEAD_PER_SLOT`` configurations a compile slot), and a measurer with
  ``prefetch(configs)`` starts compiling them then; when the search stops (budget, end of
  the space), its ``cancel_ahead()`` drops what was announced and never raced, before the
  final race.
- **Default first**: ``first`` (the site's ``default=``) joins the first batch when it is
  in the space, not known yet and kept by ``prune``: a strategy sampling a large space would
  otherwise seldom meet the one configuration the user knows is good.
- **Memory**: ``history`` (observations of a stored search) is continued, never repeated: a
  configuration that failed or was rejected is not tried again, one measured is not
  measured again except as a leader in the final race.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.engine.racing import DEFAULT_RACE, RaceResult, RaceSettings, race
from tunedsl.engine.seams import Measurer, Observation, SearchSpace, SearchStrategy
from tunedsl.errors import TuningError
from tunedsl.model.config import Config

Clock = Callable[[], float]

#: Compile-ahead depth, in configurations a compile slot: while a batch is raced (and waits
#: for its slowest compile, which may take a minute where most take a second), the next
#: ones compile. One batch of 16 ahead left most of a 32-slot host idle; the compile
#: processes serve the batch being raced first (``backends/compile_ahead.py``), so a deep
#: queue takes the processes that batch leaves idle (BENCHMARKS.md, "Compile-ahead depth
#: and order").
AHEAD_PER_SLOT = 16
#: ... and at most this many batches announced ahead (a budget may end the search first:
#: what was announced and not started is cancelled). Each compiling batch holds a thread a
#: configuration in this process, waiting for a compile process: more would cost the
#: measuring thread its share of the interpreter.
MAX_AHEAD_BATCHES = 16


@dataclass(frozen=True)
class SearchEvent:
    """Progress, for a progress line: ``kind`` is "batch" (about to compile one), "raced"
    (a batch measured) or "done"."""

    kind: str
    strategy: str
    measured: int  # configurations measured in this run so far
    compiled: int
    best: Config | None
    best_ms: float | None
    remaining_s: float | None  # None: no budget


@dataclass(frozen=True)
class SearchOutcome:
    chosen: Config
    observations: tuple[Observation, ...]  # every configuration known (stored and new)
    strategy: str  # "auto:model" once auto chose
    seed: int
    budget_s: float | None
    measured: int  # configurations measured in this run (not taken from history)
    compiled: int  # configurations the measurer prepared in this run
    elapsed_s: float
    exhausted: bool  # the strategy had nothing more to propose (else the budget ran out)
    final_round: int  # the round of the last side-by-side race (the chosen one's)


def run_search(
    space: SearchSpace,
    strategy: SearchStrategy,
    measurer: Measurer,
    *,
    budget_s: float | None = None,
    race_settings: RaceSettings = DEFAULT_RACE,
    history: Sequence[Observation] = (),
    clock: Clock = time.monotonic,
    on_event: Callable[[SearchEvent], None] | None = None,
    final_leaders: int = 3,
    reserve: float = 0.1,
    prune: Callable[[list[Config]], Sequence[Config]] | None = None,
    first: Sequence[Config] = (),
) -> SearchOutcome:
    """Search ``space`` with ``strategy``, measuring through ``measurer``; see the module.
    ``prune(batch)`` (the site's ``prune=`` bound to this call's arguments) narrows each
    proposed batch before it is compiled; what it drops is neither measured nor recorded.
    ``first`` (the site's default) is measured in the first batch, where valid."""
    run = _Run(space, strategy, measurer, budget_s, race_settings, history, clock, on_event)
    run.prune = prune
    run.first = [c for c in dict.fromkeys(first) if c not in run.known and c in space]
    run.reserve = reserve
    run.final_leaders = max(1, final_leaders)
    run.loop()
    # Batches announced ahead and never raced: their compiles would share the host with the
    # final race, which decides the choice.
    cancel_ahead = getattr(measurer, "cancel_ahead", None)
    if cancel_ahead is not None:
        cancel_ahead()
    return run.finish(final_leaders)


class _Run:
    def __init__(
        self,
        space: SearchSpace,
        strategy: SearchStrategy,
        measurer: Measurer,
        budget_s: float | None,
        settings: RaceSettings,
        history: Sequence[Observation],
        clock: Clock,
        on_event: Callable[[SearchEvent], None] | None,
    ) -> None:
        self.space = space
        self.strategy = strategy
        self.measurer = measurer
        self.budget_s = budget_s
        self.settings = settings
        self.clock = clock
        self.on_event = on_event
        self.start = clock()
        self.known: dict[Config, Observation] = {o.config: o for o in history}
        self.stored = set(self.known)
        self.round = max((o.round for o in history), default=-1) + 1
        self.first_round = self.round  # observations of earlier rounds are history's
        self.prepared: set[Config] = set()
        self.measured: set[Config] = set()
        self.exhausted = False
        self.first: list[Config] = []  # measured in the first batch (the site's default)
        self.queued: set[Config] = set()  # handed to a race already (compile-ahead included)
        self.dropped: set[Config] = set()  # what prune= dropped (never handed to it again)
        self.prune: Callable[[list[Config]], Sequence[Config]] | None = None
        self.reserve = 0.1  # the final race's share of the budget, at most
        self.final_leaders = 3
        self.sample_s = 0.0  # clock seconds spent in measurer.sample, and its repetitions
        self.sample_reps = 0
        self.tried = any(o.status == "ok" for o in self.known.values())  # see over()

    # -- time ----------------------------------------------------------------------------
    def remaining(self) -> float | None:
        if self.budget_s is None:
            return None
        return self.budget_s - (self.clock() - self.start)

    def spent(self, keep_s: float = 0.0) -> bool:
        """Whether all but ``keep_s`` seconds of the budget are spent."""
        return self.budget_s is not None and self.clock() - self.start >= self.budget_s - keep_s

    def reserve_s(self) -> float | None:
        """Seconds kept for the final race: what its leaders can take at most (``max_reps``
        each at the mean cost of a repetition so far; the leaders, the fastest, cost less),
        twice over, within the flat ``reserve`` share."""
        if self.budget_s is None:
            return None
        flat = self.reserve * self.budget_s
        if not self.sample_reps or hasattr(self.measurer, "final_on_caller"):
            return flat  # nothing measured yet, or the leaders are loaded again elsewhere
        per_rep = self.sample_s / self.sample_reps
        return min(flat, 2 * self.final_leaders * self.settings.max_reps * per_rep)

    def sample(self, config: Config, reps: int) -> list[float]:
        """``measurer.sample``, timed on the clock (what a repetition costs)."""
        before = self.clock()
        try:
            return self.measurer.sample(config, reps)
        finally:
            self.sample_s += self.clock() - before
            self.sample_reps += reps

    def sample_round(self, asked: Sequence[tuple[Config, int]]) -> list[Any]:
        """``measurer.sample_round`` (a round's samples at once), timed like ``sample``."""
        before = self.clock()
        try:
            return list(self.measurer.sample_round(asked))  # type: ignore[attr-defined]
        finally:
            self.sample_s += self.clock() - before
            self.sample_reps += sum(reps for _, reps in asked)

    def in_reserve(self) -> bool:
        return self.spent(self.reserve_s() or 0.0)

    def over(self) -> bool:
        """Whether the search stops here: its budget is in reserve and it has a time (stored)
        or has tried a configuration (a budget spent before the first one was measured left
        nothing to choose from, and said every configuration failed)."""
        return self.in_reserve() and (self.tried or self.sample_reps > 0)

    def hint(self) -> None:
        tell = getattr(self.strategy, "hint", None)
        if tell is not None:
            workers = getattr(self.measurer, "compile_workers", None)
            tell(compile_workers=workers, reserve_s=self.reserve_s())

    # -- the loop ------------------------------------------------------------------------
    def loop(self) -> None:
        # The next batches, asked for (and pruned) before this one is raced: (batch, fresh,
        # whether it held a configuration never seen before, even one prune= dropped).
        # A measurer's ``lookahead`` (default 1) says how many to announce ahead: one on
        # several GPUs keeps its host compiling while a batch's race runs.
        pending: deque[tuple[list[Config], list[Config], bool]] = deque()
        ahead = max(1, int(getattr(self.measurer, "lookahead", 1)))
        slots = int(getattr(self.measurer, "compile_workers", None) or 0)  # 0: compiles none
        idle = 0
        while not self.over():
            if pending:
                batch, fresh, novel = pending.popleft()
            else:
                batch = self.ask()
                fresh, novel = self.screen(batch)
            if not batch:
                self.exhausted = True
                return
            if not fresh:
                # A strategy re-proposing known points must not spin forever; a batch that
                # prune= dropped whole is progress (a prune keeping 2% of a space empties
                # most batches of 8, and counting those stopped the search early).
                idle = 0 if novel else idle + 1
                if idle > 100:
                    self.exhausted = True
                    return
                continue
            idle = 0
            self.emit("batch")
            if not getattr(self.strategy, "adaptive", True):
                prefetch = getattr(self.measurer, "prefetch", None)
                while self.announce_more(pending, ahead, slots):
                    after = self.ask()
                    pending.append((after, *self.screen(after)))
                    if pending[-1][1] and prefetch is not None:
                        prefetch(pending[-1][1])
            self.race_batch(fresh, self.over)
            self.emit("raced")

    @staticmethod
    def announce_more(
        pending: deque[tuple[list[Config], list[Config], bool]], ahead: int, slots: int
    ) -> bool:
        """Whether to announce one more batch: ``ahead`` batches at least, and enough that
        every compile slot has ``AHEAD_PER_SLOT`` configurations waiting, so a batch whose
        race waits on its slowest compile leaves no core idle; never past the space's end."""
        if pending and not pending[-1][0]:
            return False
        if len(pending) < ahead:
            return True
        waiting = sum(len(fresh) for _, fresh, _ in pending)
        return waiting < AHEAD_PER_SLOT * slots and len(pending) < MAX_AHEAD_BATCHES

    def screen(self, batch: Sequence[Config]) -> tuple[list[Config], bool]:
        """The batch's configurations not known yet and kept by ``prune``, and whether it
        held any never seen before (kept or dropped)."""
        new = [
            c
            for c in dict.fromkeys(batch)
            if c not in self.known and c not in self.queued and c not in self.dropped
        ]
        fresh = new
        if self.prune is not None and new:
            kept = set(self.prune(list(new)))
            fresh = [c for c in new if c in kept]
            self.dropped.update(c for c in new if c not in kept)
        self.queued.update(fresh)
        return fresh, bool(new)

    def ask(self) -> list[Config]:
        self.hint()
        batch = list(self.strategy.propose(self.space, list(self.known.values()), self.remaining()))
        if self.first:  # the default joins the first batch (the strategy's stay whole)
            batch = [*(c for c in self.first if c not in batch), *batch]
            self.first = []
        return batch

    def opened(self, configs: Sequence[Config]) -> Generator[Config, None, None]:
        """The configurations that compiled, as they finish; failures become observations."""
        for prep in self.measurer.prepare(configs):
            self.prepared.add(prep.config)
            if prep.status == "ok" and prep.error is None:
                yield prep.config
            else:
                status = prep.status if prep.status != "ok" else "failed"
                self.note(Observation(prep.config, status, reason=prep.error, round=self.round))

    def race_batch(
        self, configs: Sequence[Config], expired: Callable[[], bool], open_all: bool = False
    ) -> RaceResult:
        # What this run prepared already is raced as is; the rest is compiled first.
        ready = [c for c in configs if c in self.prepared]
        stream = self.opened([c for c in configs if c not in self.prepared])
        try:
            result = race(
                itertools.chain(ready, stream),
                self.sample,
                self.settings,
                expired=expired,
                open_all=open_all,
                # a measurer over several GPUs takes a round's samples on them side by side
                sample_round=self.sample_round if hasattr(self.measurer, "sample_round") else None,
            )
        finally:
            stream.close()  # stop taking compiles once the budget is spent
        for cfg, samples in result.samples.items():
            self.measured.add(cfg)
            median = result.median(cfg)
            self.note(Observation(cfg, "ok", median, tuple(samples), round=self.round))
        for cfg, why in result.failed.items():
            self.measured.add(cfg)
            self.note(Observation(cfg, "failed", reason=why, round=self.round))
        self.round += 1
        return result

    def note(self, obs: Observation) -> None:
        self.known.pop(obs.config, None)  # re-insert: the newest observation comes last
        self.known[obs.config] = obs
        self.tried = True

    # -- choosing ------------------------------------------------------------------------
    def ok(self) -> list[Observation]:
        return sorted(
            (o for o in self.known.values() if o.status == "ok" and o.median_ms is not None),
            key=lambda o: o.median_ms or 0.0,
        )

    def finish(self, final_leaders: int) -> SearchOutcome:
        ok = self.ok()
        if not ok:
            raise TuningError(
                f"no configuration could be measured ({len(self.known)} tried)",
                {repr(o.config): o.reason or o.status for o in self.known.values()},
            )
        leaders = [o.config for o in ok[: max(1, final_leaders)]]
        if any(self.known[c].round < self.first_round for c in leaders):
            # A stored leader's time is another process's and does not compare with this
            # one's: the best configuration measured here races with the stored leaders, or
            # one added to the space could lose to old times it never met.
            fresh = next((o.config for o in ok if o.round >= self.first_round), None)
            if fresh is not None and fresh not in leaders:
                leaders.append(fresh)
        # The leaders are always raced once more, side by side and from fresh samples: a
        # first race stops as soon as its thresholds allow, and its few opening repetitions
        # can mis-rank close leaders (on the H100 the 48-configuration anchor matmul chose a
        # configuration 5.7% slower without this); timings of two races, or a stored one,
        # do not compare at all (drift). A measurer on several GPUs re-measures the leaders
        # on the caller's (``final_on_caller``).
        on_caller = getattr(self.measurer, "final_on_caller", None)
        needs_final = len(leaders) > 1
        chosen, final_round = leaders[0], self.known[leaders[0]].round
        if needs_final:
            if on_caller is not None:
                on_caller(leaders)
            result = self.race_batch(leaders, self.spent, open_all=True)
            if result.leader is not None:
                chosen, final_round = result.leader, self.round - 1
            else:
                chosen = self.ok()[0].config
        self.emit("done", best=chosen)
        return SearchOutcome(
            chosen=chosen,
            observations=tuple(self.known.values()),
            strategy=str(getattr(self.strategy, "resolved", self.strategy.name)),
            seed=int(getattr(self.strategy, "seed", 0)),
            budget_s=self.budget_s,
            measured=len(self.measured - self.stored),
            compiled=len(self.prepared),
            elapsed_s=self.clock() - self.start,
            exhausted=self.exhausted,
            final_round=final_round,
        )

    def emit(self, kind: str, best: Config | None = None) -> None:
        if self.on_event is None:
            return
        ok = self.ok()
        top = self.known[best] if best is not None else (ok[0] if ok else None)
        self.on_event(
            SearchEvent(
                kind=kind,
                strategy=str(getattr(self.strategy, "resolved", self.strategy.name)),
                measured=len(self.measured - self.stored),
                compiled=len(self.prepared),
                best=top.config if top is not None else None,
                best_ms=top.median_ms if top is not None else None,
                remaining_s=self.remaining(),
            )
        )
