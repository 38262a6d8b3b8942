"""The one table of ``bench_multi_gpu.py``: matched pairs of rows (one GPU, two allowed), each
space's geometric mean and whether it met its target."""

from __future__ import annotations

import math
import statistics
from typing import Any


def pairs(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(one GPU, more) matched pairs of one space, in run order (rows 1-2, 3-4, ...); a pair
    with a failed or skipped row is left out."""
    out = []
    for i in range(0, len(rows) - 1, 2):
        a, b = rows[i], rows[i + 1]
        if "error" in a or "error" in b:
            continue
        one, more = (a, b) if a["gpus"] == 1 else (b, a)
        if one["gpus"] == 1 and more["gpus"] > 1:
            out.append((one, more))
    return out


#: What each space must show, two GPUs allowed over one: (what is compared, at most or at
#: least, the bound).
TARGETS: dict[str, tuple[str, str, float]] = {
    "anchor-48": ("wall", "<=", 1.05),  # never slower (5% for noise between processes)
    "large": ("wall", "<=", 0.6),
    "large@20": ("rate", ">=", 1.8),
    "sweep-16": ("rate", ">=", 1.8),
}


def print_tables(rows: list[dict[str, Any]], detail: bool = False) -> None:
    """One table: each matched pair (one GPU, two allowed) of each space, then each space's
    geometric mean against its target. ``wall``: two GPUs' wall time over one's; ``rate``:
    configurations (sweep: keys) measured a second, two over one."""
    good = [r for r in rows if "error" not in r]
    # the rows allowed several GPUs (--devices): two unless asked otherwise
    n = max((r["gpus"] for r in good if r["gpus"] > 1), default=2)
    many = "two" if n == 2 else str(n)
    for row in rows:
        if "error" in row:
            print(f"{row['space']} {row['gpus']} GPU(s): FAILED {row['error']}")
    print()
    print("pair: rows in run order (1 2 2 1: pairs 1-2 and 3-4); wall s and measured (configs,")
    print(f"sweep: keys) of the one-GPU row / the row allowed {many}; used: GPUs tunedsl chose;")
    print(f"wall, rate: {many} over one; chosen ms: the choice re-measured on GPU 0 (one / {many})")
    print(f"{'space':10} {'pair':>4} {'wall s':>13} {'measured':>11} {'used':>4} {'wall':>6} "
          f"{'rate':>6} {'chosen ms':>15} {'same':>4}  chosen ({many} GPUs)")  # fmt: skip
    verdicts = []
    for space in dict.fromkeys(r["space"] for r in good):
        mine = pairs([r for r in rows if r["space"] == space])
        walls, rates, same, used = [], [], [], set()
        for n, (one, more) in enumerate(mine, 1):
            walls.append(more["wall_s"] / one["wall_s"])
            rates.append((more["measured"] / more["wall_s"]) / (one["measured"] / one["wall_s"]))
            same.append(more["chosen"] == one["chosen"])
            used.add(more.get("used", more["gpus"]))
            chosen = " ".join(f"{k}={v}" for k, v in more["chosen"].items())
            print(f"{space:10} {n:>4} {one['wall_s']:>6.2f}/{more['wall_s']:<6.2f} "
                  f"{one['measured']:>5}/{more['measured']:<5} {more.get('used', 0):>4} "
                  f"{walls[-1]:>5.2f}x {rates[-1]:>5.2f}x "
                  f"{one['chosen_ms']:>7.4f}/{more['chosen_ms']:<7.4f} "
                  f"{'yes' if same[-1] else 'no':>4}  {chosen}")  # fmt: skip
        if not mine:
            verdicts.append(f"RESULT {space}: no complete pair")
            continue
        wall, rate = geomean(walls), geomean(rates)
        # a space without a target: never slower, or under a budget never fewer measured
        default = ("rate", ">=", 1.0) if "@" in space else ("wall", "<=", 1.05)
        kind, sense, bound = TARGETS.get(space, default)
        value = wall if kind == "wall" else rate
        met = value <= bound if sense == "<=" else value >= bound
        verdicts.append(
            f"RESULT {space}: {kind} {value:.2f}x (target {sense} {bound}x: "
            f"{'MET' if met else 'MISSED'}); wall {wall:.2f}x, rate {rate:.2f}x over "
            f"{len(mine)} pair(s); GPUs used {sorted(used)}; same choice "
            f"{sum(same)}/{len(same)}" + after_first_record(mine)
        )
    print()
    for line in verdicts:
        print(line)
    if detail:
        print_detail(good)


def after_first_record(mine: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """A sweep's pairs: the keys a second after each row's first record, two over one (the
    processes' start, imports and first compiles left out), and the first record's time."""
    timed = [
        (one, more) for one, more in mine if one.get("after_first_s") and more.get("after_first_s")
    ]
    if not timed:
        return ""
    steady = geomean(one["after_first_s"] / more["after_first_s"] for one, more in timed)
    firsts = ", ".join(f"{one['first_record_s']}/{more['first_record_s']} s" for one, more in timed)
    return f"; rate after the first record {steady:.2f}x; first record (one/several) {firsts}"


def print_detail(good: list[dict[str, Any]]) -> None:
    """Where each multi-GPU row's time went: the caller's phases and each worker's."""
    print("\ndetail (s): setup first compile cpu wait rounds final | per worker: device start "
          "idle load time ipc race opened")  # fmt: skip
    for row in good:
        if "workers" not in row:
            continue
        print(f"{row['space']:10} {row['gpus']} GPUs: {row['setup_s']:.2f} {row['first_s']:.2f} "
              f"{row['compile_wall_s']:.2f} {row['compile_cpu_s']:.1f} {row['wait_s']:.2f} "
              f"{row['rounds_s']:.2f} {row['final_s']:.2f} | " + "; ".join(
                  f"{w['device']} {w['start_s']:.2f} {w['idle_s']:.2f} {w['load_s']:.2f} "
                  f"{w['time_s']:.2f} {w['ipc_s']:.2f} {w['race_s']:.2f} {w['opened']}"
                  for w in row["workers"]))  # fmt: skip


def geomean(values: Any) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in values))
