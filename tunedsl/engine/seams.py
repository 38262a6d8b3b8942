"""The tuning engine's three seams, as typed protocols (engine layer, pure Python).

A miss is tuned by one loop (``engine.driver``): a **search strategy** proposes
configurations, a **measurer** compiles and times them, and the outcome goes to a
**record store**. Each seam is small so new implementations touch nothing else:

- strategies (exhaustive, random, pattern, model): ``tunedsl/engine/search/``;
- measurers (in-process compile pool and timer; isolated worker processes; one worker per
  GPU): beside the Triton boundary, since they compile and launch;
- record stores (the JSON files of the user's cache, read-only ``TUNEDSL_RECORDS_PATH``
  directories, Redis): ``tunedsl/store/``.

None of these protocols mentions torch or triton.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import random

    from tunedsl.model.config import Config
    from tunedsl.model.record import Record

#: What a measured configuration ended as. "failed": compile or run error, or resources
#: exceeded; "rejected": ``verify=`` disagreed with the reference.
STATUSES = ("ok", "failed", "rejected")


@dataclass(frozen=True)
class Observation:
    """What the engine knows about one configuration so far."""

    config: Config
    status: str  # one of STATUSES
    median_ms: float | None = None
    samples: tuple[float, ...] = ()  # raw repetitions in ms, oldest first
    reason: str | None = None  # why it failed or was rejected
    round: int = 0  # measurements with the same round were taken side by side


@runtime_checkable
class SearchSpace(Protocol):
    """The valid configurations of a site, possibly far too many to list."""

    def size_hint(self) -> int:
        """The number of points before the constraint (an upper bound of the valid ones)."""
        ...

    def __contains__(self, config: object) -> bool: ...

    def iter_valid(self) -> Iterator[Config]:
        """Every valid configuration, lazily, in space order."""
        ...

    def first_valid(self) -> Config:
        """One valid configuration, the same every time, found after a bounded number of
        points (``UsageError`` naming the constraint when none is among them)."""
        ...

    def sample(self, rng: random.Random, count: int) -> list[Config]:
        """Up to ``count`` distinct valid configurations drawn uniformly."""
        ...

    def neighbours(self, config: Config) -> list[Config]:
        """Valid configurations one step up or down one ordered axis (or another value of
        one categorical axis)."""
        ...


@runtime_checkable
class SearchStrategy(Protocol):
    """Proposes what to measure next (ask/tell). Deterministic given its seed."""

    name: str

    def propose(
        self, space: SearchSpace, history: Sequence[Observation], remaining_s: float | None
    ) -> list[Config]:
        """The next batch to measure; an empty list means the search is done.
        ``remaining_s`` is the budget left in seconds (None: no budget)."""
        ...


@dataclass(frozen=True)
class Prepared:
    """A configuration the measurer compiled (and verified): ``error`` None means it can be
    sampled, else it is a failure with ``status`` and ``error`` as the reason."""

    config: Config
    status: str = "ok"
    error: str | None = None


@runtime_checkable
class Measurer(Protocol):
    """Compiles and times configurations somewhere (this process, a worker, another GPU)."""

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        """Compile (and verify) ``configs``, yielding each in completion order."""
        ...

    def sample(self, config: Config, reps: int) -> list[float]:
        """``reps`` fresh timings in ms of a prepared configuration (warm-up excluded).
        Raises ``MeasureFailure`` when the configuration fails at run time."""
        ...

    def close(self) -> None: ...


class MeasureFailure(RuntimeError):
    """A configuration failed while being measured; the message is the reason recorded."""


@runtime_checkable
class RecordStore(Protocol):
    """Where decisions live: get, put, list, delete by key digest, and a lock per digest.

    ``get`` validates strictly and treats anything damaged as a miss (one warning), never an
    exception; nothing a store returns was unpickled.
    """

    name: str
    writable: bool

    def get(self, digest: str) -> Record | None: ...

    def put(self, record: Record) -> bool:
        """Store ``record``; False (with one warning) when it could not be written."""
        ...

    def delete(self, digest: str) -> bool: ...

    def iter_records(self) -> Iterator[Record]: ...

    def lock(self, digest: str, timeout_s: float) -> AbstractContextManager[bool]:
        """Hold the cross-process (or cross-node) lock of ``digest``: yields True when held,
        False when ``timeout_s`` passed first (the caller then tunes without it)."""
        ...
