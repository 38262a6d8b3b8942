"""The driver announces a measurer's ``lookahead`` batches ahead (``engine/driver.py``), so
a host compiling for several GPUs keeps compiling while a batch's race runs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from landscape import LandscapeMeasurer, SimClock

from tunedsl.engine.driver import AHEAD_PER_SLOT, run_search
from tunedsl.engine.seams import Prepared
from tunedsl.engine.search import make_strategy
from tunedsl.model.config import Config
from tunedsl.model.space import ListSpace

CONFIGS = [
    Config(BLOCK_M=m, BLOCK_N=n, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=4, layout="nn",
           split_k=1)
    for m in (16, 32, 64)
    for n in (16, 32, 64, 128)
]  # fmt: skip


class Logged(LandscapeMeasurer):
    """Logs the order of ``prepare`` and ``prefetch`` calls."""

    def __init__(self, lookahead: int | None) -> None:
        super().__init__(clock=SimClock())
        self.compile_workers = 0  # no compile slots to fill: the lookahead alone counts
        if lookahead is not None:
            self.lookahead = lookahead
        self.log: list[tuple[str, list[Config]]] = []

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        self.log.append(("prepare", list(configs)))
        yield from super().prepare(configs)

    def prefetch(self, configs: Sequence[Config]) -> None:
        self.log.append(("prefetch", list(configs)))
        super().prefetch(configs)


def searched(lookahead: int | None) -> Logged:
    m = Logged(lookahead)
    strategy = make_strategy("exhaustive", batch=2)
    out = run_search(ListSpace(CONFIGS), strategy, m, clock=m.clock)
    assert out.exhausted and {o.config for o in out.observations} == set(CONFIGS)
    return m


def ahead_at_each_prepare(m: Logged) -> list[int]:
    """How many prefetched batches were not yet prepared when each prepare began."""
    announced: list[list[Config]] = []
    out = []
    for kind, configs in m.log:
        if kind == "prefetch":
            announced.append(configs)
        elif not configs:
            continue  # the final race's leaders are prepared already
        elif configs in announced:
            announced.remove(configs)
            out.append(len(announced))
        else:
            out.append(len(announced))
    return out


def test_three_batches_ahead_with_a_lookahead_of_three() -> None:
    m = searched(3)
    # Each configuration announced once, in the space's order, none twice.
    flat = [c for batch in m.prefetched for c in batch]
    assert flat == CONFIGS[2:]
    # While a batch is raced, three more are compiling (until the space runs out).
    assert ahead_at_each_prepare(m) == [3, 3, 3, 2, 1, 0]
    assert all(batch for batch in m.prefetched)  # an empty (exhausted) batch is not announced


def test_one_batch_ahead_by_default() -> None:
    m = searched(None)
    assert [c for batch in m.prefetched for c in batch] == CONFIGS[2:]
    assert ahead_at_each_prepare(m) == [1, 1, 1, 1, 1, 0]


class Slotted(Logged):
    """A measurer whose host compiles ``compile_workers`` configurations at once."""

    def __init__(self, workers: int) -> None:
        super().__init__(None)
        self.compile_workers = workers


def test_enough_batches_ahead_to_keep_every_compile_slot_busy() -> None:
    # One compile slot and batches of two: while a batch waits on its slowest compile,
    # AHEAD_PER_SLOT configurations a slot are announced, not the single default batch.
    m = Slotted(1)
    out = run_search(ListSpace(CONFIGS), make_strategy("exhaustive", batch=2), m, clock=m.clock)
    assert out.exhausted
    assert [c for batch in m.prefetched for c in batch] == CONFIGS[2:]
    depth = AHEAD_PER_SLOT // 2  # batches of two
    assert depth > 1
    assert ahead_at_each_prepare(m) == [min(depth, 5 - i) for i in range(6)]


def test_an_adaptive_strategy_is_never_announced_ahead() -> None:
    m = Slotted(8)
    run_search(ListSpace(CONFIGS), make_strategy("pattern", batch=2), m, clock=m.clock)
    assert m.prefetched == []
