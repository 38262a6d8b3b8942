"""Which library should ``search='model'`` fit its surrogate with? (issue 12)

Runs the model strategy with each backend (scikit-learn extra trees, LightGBM, XGBoost) over
the synthetic landscape of the engine's unit tests (144,000 points, 2% noise, a simulated
clock: the search budget is simulated seconds, so compile and timing costs are the same for
every backend) and reports, over several seeds: how often the known best was chosen, the mean
chosen cost over the best, configurations measured, and the real CPU time the strategy
spent proposing (fitting and scoring), which is the surrogate's own overhead.

    .venv/bin/python benchmarks/bench_search_surrogate.py [budget_s] [seeds] [two-basins]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "engine"))

import landscape
from landscape import BEST, LandscapeMeasurer, SimClock, make_space

from tunedsl.engine.driver import run_search
from tunedsl.engine.search import ModelSearch, make_strategy

# A deceptive variant: a second basin (small tiles, one warp, 2 stages) whose floor is 4%
# above the best and which is wider, so a climb from a random start often ends there.
SECOND = BEST.replace(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, num_warps=1, num_stages=2)


def two_basins(c: object) -> float:
    from tunedsl.model.config import Config

    assert isinstance(c, Config)
    if c == BEST:
        return 1.0
    near_best = landscape.one_basin(c)
    moved = c.replace(
        BLOCK_M=c.BLOCK_M * 4, BLOCK_N=c.BLOCK_N * 4, BLOCK_K=c.BLOCK_K * 2,
        num_warps=c.num_warps * 4, num_stages=c.num_stages + 2,
    )  # fmt: skip
    near_second = 0.04 + 0.5 * (landscape.one_basin(moved) - 1.0) + 1.0
    return min(near_best, near_second)


def main() -> None:
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    if len(sys.argv) > 3 and sys.argv[3] == "two-basins":
        landscape.cost_ms = two_basins  # type: ignore[assignment]
    cost_ms = landscape.cost_ms
    space = make_space()
    print(f"budget {budget} simulated s, {seeds} seeds, space of {space.size_hint()} points")
    print("| strategy | best found | mean chosen/best | measured | propose CPU s/run |")
    print("|---|---|---|---|---|")
    rows: list[tuple[str, dict[str, object]]] = [
        (f"model ({b})", {"backend": b}) for b in ("sklearn", "lightgbm", "xgboost")
    ]
    rows += [("pattern", {}), ("random", {})]
    for label, opts in rows:
        hits, costs, measured, cpu = 0, [], [], []
        for seed in range(seeds):
            clock = SimClock()
            m = LandscapeMeasurer(seed=seed, clock=clock)
            if opts:
                strategy = ModelSearch(seed=seed, **opts)  # type: ignore[arg-type]
            else:
                strategy = make_strategy(label, seed=seed)
            inner = strategy.propose
            spent = [0.0]

            def timed(*a: object, inner=inner, spent=spent) -> object:  # type: ignore[no-untyped-def]
                t = time.process_time()
                try:
                    return inner(*a)
                finally:
                    spent[0] += time.process_time() - t

            strategy.propose = timed  # type: ignore[method-assign]
            out = run_search(space, strategy, m, budget_s=budget, clock=clock)
            hits += out.chosen == BEST
            costs.append(cost_ms(out.chosen))
            measured.append(out.measured)
            cpu.append(spent[0])
        print(
            f"| {label} | {hits}/{seeds} | {statistics.mean(costs):.4f} | "
            f"{statistics.mean(measured):.0f} | {statistics.mean(cpu):.2f} |"
        )


if __name__ == "__main__":
    main()
