"""Which library should ``search='model'`` fit its surrogate with? (issue 12)

Runs the model strategy with each backend (scikit-learn extra trees, LightGBM, XGBoost) over
the synthetic landscape of the engine's unit tests (144,000 points, 2% noise, a simulated
clock: the search budget is simulated seconds, so compile and timing costs are the same for
every backend) and reports, over several seeds: how often the known best was chosen, the mean
chosen cost over the best, configurations measured, and the real CPU time the strategy
spent proposing (fitting and scoring), which is the surrogate's own overhead.

    .venv/bin/python benchmarks/bench_search_surrogate.py [budget_s] [seeds]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "engine"))

from landscape import BEST, LandscapeMeasurer, SimClock, cost_ms, make_space

from tunedsl.engine.driver import run_search
from tunedsl.engine.search import ModelSearch, make_strategy


def main() -> None:
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
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
