"""Replay the search strategies against the stored H100 tables (a simulation, no GPU).

``benchmarks/data/search_*.json`` hold the median time of EVERY valid configuration of a
family, measured on the H100 by ``bench_search.py``. This script runs each strategy through
the real engine driver (``run_search``, ``make_strategy``, the real race) with a measurer
that answers from the table:

* **timings**: a configuration's stored median times ``1 + N(0, noise)`` per sample
  (``--noise``, 1.5% by default), seeded per run;
* **a simulated clock** (no wall clock): compiling is a pool of ``--workers`` threads (16:
  the H100 machine's cores) with list scheduling, each compile taking
  ``workers * exhaustive_first_call_s / N`` seconds, so that compiling the whole space in
  full batches takes the exhaustive first call's time. A batch of 8 on 16 workers then takes
  one compile time (~1.4 s for the softmax), which matches the GPU runs (``model``
  measured 25 configurations in its 5 s). The driver's compile-ahead (``prefetch``) queues
  the next batch at once. Each sample costs its time plus ``--overhead-ms`` (L2 flush,
  events, synchronisation). ``--workers 1`` is the optimistic model (every compile
  ``exhaustive_first_call_s / N``, whatever the batch: about twice the configurations).
  The measurer's ``compile_workers`` is ``--workers``, which the driver hands to the
  strategy (``auto``'s batches fill them);
* **the budget** of the search suite of ``run_gpu.sh``: 10 s for the matmuls, 5 s for the softmax
  (0.1x of its 50.9 s exhaustive call), 7.5 s for split-K (0.1x of its 76.7 s);
  ``--budget`` sets one for all.

The families' axes and constraints are re-declared here (``search_families.py`` imports
torch and triton at its top and defines the kernels), and checked against the tables: the
valid configurations of each space must be exactly the table's keys. The strategy's own CPU
time (fitting a model) is not on the simulated clock.

Per family and strategy, over ``--seeds`` seeds (``--seed-start`` and on: seeds 0-19 are the
ones the strategies were tuned on, so report a held-out range too, e.g. ``--seed-start 100``,
and a second ``--noise``): mean and worst gap of the chosen
configuration's stored time to the table's best, the share within 2%, configurations
measured and simulated seconds (and their ratio to the exhaustive first call).

    .venv/bin/python benchmarks/bench_search_replay.py [--seeds 20] [--seed-start 0]
        [--families softmax] [--strategies auto,model,pattern,random] [--budget 10]
        [--workers 16] [--noise 0.015] [--exhaustive]
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedsl.engine.driver import SearchOutcome, run_search
from tunedsl.engine.seams import Prepared
from tunedsl.engine.search import make_strategy
from tunedsl.model.config import Config
from tunedsl.model.space import Space

DATA = Path(__file__).resolve().parent / "data"
SMEM_BYTES = 232448  # as search_families.py: the H100's largest dynamic shared memory


def tiles_fit(c: Config) -> bool:
    """search_families.tiles_fit: shared memory of the pipelined tiles, and registers."""
    threads = 32 * c["num_warps"]
    if (c["BM"] + c["BN"]) * c["BK"] * 2 * c["num_stages"] > SMEM_BYTES:
        return False
    acc = c["BM"] * c["BN"] / threads
    return 8 <= acc <= 128 and (c["BM"] + c["BN"]) * c["BK"] / threads <= 128


def block_fits(c: Config) -> bool:
    """search_families.block_fits: 1 to 64 elements of a softmax block per thread."""
    return 1 <= c["BLOCK"] // (32 * c["num_warps"]) <= 64


MM_AXES = {
    "BM": [16, 32, 64, 128, 256],
    "BN": [16, 32, 64, 128, 256],
    "BK": [16, 32, 64, 128, 256],
    "GROUP_M": [1, 8],
    "num_warps": [2, 4, 8],
    "num_stages": [2, 3, 4, 5, 6],
}
SPLITK_AXES = {  # search_families.py's splitk family
    "BM": [16, 32, 64, 128],
    "BN": [32, 64, 128, 256],
    "BK": [32, 64, 128],
    "GROUP_M": [1],
    "SPLIT_K": [1, 2, 4, 8],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}
SOFTMAX_AXES = {
    "ROWS": [1, 2, 4, 8, 16],
    "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
}


@dataclass(frozen=True)
class ReplayFamily:
    """One stored table and the space it was measured over (as ``bench_search.py`` builds it:
    ``Space(constraint=..., **family.axes)``, so the axis kinds are inferred the same way)."""

    name: str
    table: str  # the file's name prefix under benchmarks/data
    axes: dict[str, list[int]]
    valid: Callable[[Config], bool]
    budget_s: float  # the search suite's budget for it

    def space(self) -> Space:
        return Space(constraint=self.valid, **self.axes)


FAMILIES = {
    "square": ReplayFamily("square", "search_mm_4096x4096x4096_", MM_AXES, tiles_fit, 10.0),
    "skinny": ReplayFamily("skinny", "search_mm_256x4096x4096_", MM_AXES, tiles_fit, 10.0),
    "softmax": ReplayFamily("softmax", "search_softmax_8192x4096_", SOFTMAX_AXES, block_fits, 5.0),
    # 0.1x of its 76.7 s exhaustive first call on the H100
    "splitk": ReplayFamily("splitk", "search_splitk_256x4096x4096_", SPLITK_AXES, tiles_fit, 7.5),
}


def label(c: Config) -> str:
    """search_families.label: the table's key of a configuration."""
    return " ".join(f"{k}={c[k]}" for k in sorted(c))


@dataclass(frozen=True)
class Table:
    medians: dict[str, float]
    best: str
    best_ms: float
    exhaustive_s: float

    def gap(self, c: Config) -> float:
        """The chosen configuration's stored time over the best, minus one."""
        return self.medians[label(c)] / self.best_ms - 1


def load_table(family: ReplayFamily, data: Path = DATA) -> Table:
    """The family's H100 table, checked against the re-declared space."""
    paths = sorted(data.glob(f"{family.table}*H100*.json"))
    if not paths:
        raise SystemExit(f"no stored table {family.table}*H100*.json under {data}")
    raw = json.loads(paths[-1].read_text())
    table = Table(raw["median_ms"], raw["best"], raw["best_ms"], raw["exhaustive_first_call_s"])
    keys = {label(c) for c in family.space().iter_valid()}
    if keys != set(table.medians):
        raise SystemExit(
            f"{paths[-1].name}: the re-declared {family.name} space has {len(keys)} valid "
            f"configurations, the table {len(table.medians)}; fix the axes or constraint here"
        )
    return table


class SimClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ReplayMeasurer:
    """A ``Measurer`` answering from a stored table on a simulated clock (see the module)."""

    def __init__(
        self,
        table: Table,
        seed: int,
        clock: SimClock,
        workers: int = 16,
        noise: float = 0.015,
        overhead_ms: float = 1.0,
    ) -> None:
        self.table = table
        self.rng = random.Random(seed)
        self.clock = clock
        self.noise = noise
        self.overhead_s = overhead_ms / 1e3
        self.compile_s = workers * table.exhaustive_s / len(table.medians)
        self.compile_workers = workers  # the driver's hint to the strategy
        self.free_at = [0.0] * workers  # a heap: when each compile worker is next free
        self.done_at: dict[Config, float] = {}
        self.compiled = 0

    def _queue(self, configs: Sequence[Config]) -> None:
        for cfg in configs:
            if cfg not in self.done_at:
                start = max(self.clock.now, heapq.heappop(self.free_at))
                self.done_at[cfg] = start + self.compile_s
                heapq.heappush(self.free_at, self.done_at[cfg])
                self.compiled += 1

    def prefetch(self, configs: Sequence[Config]) -> None:
        self._queue(configs)

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        self._queue(configs)
        for cfg in sorted(configs, key=self.done_at.__getitem__):  # as they finish
            self.clock.now = max(self.clock.now, self.done_at[cfg])
            yield Prepared(cfg)

    def sample(self, config: Config, reps: int) -> list[float]:
        true = self.table.medians[label(config)]
        out = []
        for _ in range(reps):
            self.clock.now += self.overhead_s + true / 1e3
            out.append(true * (1 + self.rng.gauss(0, self.noise)))
        return out

    def close(self) -> None:
        pass


def replay(
    family: ReplayFamily,
    table: Table,
    strategy: str,
    seed: int,
    budget_s: float | None,
    workers: int = 16,
    noise: float = 0.015,
    **options: Any,
) -> tuple[SearchOutcome, float]:
    """One search of ``family`` with ``strategy`` (made with ``options``): its outcome and
    the chosen one's gap."""
    clock = SimClock()
    measurer = ReplayMeasurer(table, seed, clock, workers, noise)
    chooser = make_strategy(strategy, seed=seed, **options)
    out = run_search(family.space(), chooser, measurer, budget_s=budget_s, clock=clock)
    return out, table.gap(out.chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="square,skinny,softmax,splitk")
    parser.add_argument("--strategies", default="auto,model,pattern,random")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--seed-start", type=int, default=0, help="the first seed (held-out runs)")
    parser.add_argument("--budget", type=float, default=None, help="seconds (default: per family)")
    parser.add_argument("--workers", type=int, default=16, help="compile workers (see the module)")
    parser.add_argument("--noise", type=float, default=0.015, help="relative, per sample")
    parser.add_argument("--exhaustive", action="store_true", help="also replay exhaustive (1 seed)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a strategy option (e.g. initial=16), for experiments")  # fmt: skip
    ns = parser.parse_args()
    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in ns.set)}
    print(
        f"replay against the stored H100 tables (simulation, not a GPU measurement): "
        f"{ns.seeds} seeds from {ns.seed_start}, noise {ns.noise:.1%}, "
        f"{ns.workers} compile workers"
    )
    print("| family | strategy | budget s | mean gap | worst gap | within 2% | measured | sim. s "
          "| x exh. |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ns.families.split(","):
        family = FAMILIES[name]
        table = load_table(family)
        budget = ns.budget if ns.budget is not None else family.budget_s
        rows = [(s, budget, ns.seeds) for s in ns.strategies.split(",")]
        if ns.exhaustive:
            rows.append(("exhaustive", None, 1))
        for strategy, b, seeds in rows:
            gaps, measured, elapsed = [], [], []
            for seed in range(ns.seed_start, ns.seed_start + seeds):
                opts = options if strategy != "exhaustive" else {}
                out, gap = replay(family, table, strategy, seed, b, ns.workers, ns.noise, **opts)
                gaps.append(gap)
                measured.append(out.measured)
                elapsed.append(out.elapsed_s)
            within = sum(g <= 0.02 for g in gaps)
            sim = statistics.mean(elapsed)
            print(
                f"| {name} | {strategy} | {b if b is not None else '-'} | "
                f"{statistics.mean(gaps):.1%} | {max(gaps):.1%} | {within}/{seeds} | "
                f"{statistics.mean(measured):.0f} | {sim:.1f} | {sim / table.exhaustive_s:.2f} |"
            )


if __name__ == "__main__":
    main()
