"""Search at scale, side by side: budgeted strategies against the exhaustive best.

Three kernel families (``benchmarks/search_families.py``): ``mm``, an fp16 matmul over
BLOCK_M, BLOCK_N, BLOCK_K in 16..256, GROUP_M, warps and stages with a shared-memory and
register constraint (1,636 valid configurations); ``splitk``, the matmul with a SPLIT_K axis
(atomic adds into an fp32 output; 1,020 valid); ``softmax``, a two-pass row softmax over
ROWS per program, BLOCK, warps and stages (600 valid; a memory-bound landscape). Shapes:
``--shape square`` (4096^3, the mm default), ``skinny`` (M=256, N=K=4096, the splitk
default), ``rows`` (8192 x 4096, the softmax default) or the numbers. Every run is a fresh
subprocess with empty caches:

* ``exhaustive``: tunedsl with ``search="exhaustive"`` (every configuration compiled and
  raced, all timed with CUDA events and an L2 flush, as ``do_bench``), then the reference:
  the best ``--ref-leaders`` of its table timed again with ``do_bench``, side by side, in
  up to ``--ref-rounds`` interleaved rounds (at least two; no new round once
  ``--ref-budget`` seconds are spent). The table is kept in ``benchmarks/data/`` per family,
  shape, device and Triton version, and reused by later runs (``--fresh`` re-measures). A
  configuration the race dropped early keeps its race median: it was clearly slower;
* ``auto``, ``pattern``, ``random`` (``--strategies``): tunedsl's first call with ``budget=``;
* ``triton.autotune`` on a random subset of the valid space, its wall time extrapolated to
  the whole space (a full run would take tens of minutes; the table says so).

Reported per system: wall time of the first call, configurations compiled and measured,
and the chosen configuration's reference time over the best. Target: within 2% of the
exhaustive best in at most a tenth of the exhaustive wall time. Cost on the H100: the
reference is dominated by compiling every configuration (about 0.1 s each on 16 cores:
~170 s for mm, ~110 s for splitk, ~60 s for softmax, plus at most ``--ref-budget``).

    python benchmarks/bench_search.py [--family mm|splitk|softmax] [--shape skinny]
                                      [--budget 10] [--fresh]
    TRITON_INTERPRET=1 python benchmarks/bench_search.py --plumbing   # no GPU: API check
    TRITON_INTERPRET=1 python benchmarks/bench_search.py --device cpu --subset 12 \\
        --family splitk --shape 64,64,256 --budget 3 --data-dir /tmp/d   # no GPU: dry run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton
from search_families import FAMILIES, Family, label, make_problem

DATA = Path(__file__).resolve().parent / "data"


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def space_of(family: Family, subset: int) -> list[dict[str, int]]:
    """The valid configurations; with ``subset``, a seeded random few (dry runs only)."""
    pool = family.configs()
    if subset:
        random.Random(0).shuffle(pool)
        pool = pool[:subset]
    return pool


def run_tunedsl(family: Family, shape: str, search: str, budget: float | None, device: str,
                subset: int = 0, timing: str | None = None) -> dict[str, Any]:  # fmt: skip
    from tunedsl import Space, autotune_launch

    prob = make_problem(family, shape, device)
    keep = {label(c) for c in space_of(family, subset)} if subset else None

    def constraint(cfg: Any) -> bool:
        d = cfg.as_dict()
        return family.valid(d) and (keep is None or label(d) in keep)

    sync()
    start = time.perf_counter()
    launch = autotune_launch(
        family.kernel, space=Space(constraint=constraint, **family.axes),
        grid=lambda cfg: prob.grid(cfg.as_dict()), args=prob.args,
        kwargs=lambda cfg: prob.kwargs(cfg.as_dict()),
        reset_to_zero=list(family.reset_to_zero) or None,
        search=search, budget=budget, seed=0, timing=timing,
        name=f"{family.name}-{search}",  # one site per strategy (a process may run several)
    )  # fmt: skip
    sync()
    wall = time.perf_counter() - start
    results = list(launch.timings.values())
    medians = {
        label({k: r.config[k] for k in family.axes}): r.median_ms
        for r in results
        if r.status == "ok" and r.median_ms is not None
    }
    return {
        "medians": medians,
        "first_call_s": wall,
        "chosen": {k: launch.config[k] for k in family.axes},
        "compiled": len(results),
        "measured": sum(1 for r in results if r.status == "ok"),
        "failed": sum(1 for r in results if r.status != "ok"),
        "strategy": getattr(launch.record, "strategy", search) if launch.record else search,
        "rel_err": prob.check(),
    }


def bench(fn: Callable[[], Any]) -> float:
    """One careful timing in ms: ``do_bench``'s median on a GPU, a wall median elsewhere."""
    if torch.cuda.is_available():
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=10, rep=100, return_mode="median"))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_reference(family: Family, shape: str, device: str, ns: argparse.Namespace) -> dict:
    """The exhaustive table: tunedsl's exhaustive search times every configuration (racing
    stops clear losers early; CUDA events, so every entry is timed as ``do_bench`` times),
    then the best ``ref_leaders`` are timed again side by side, in interleaved rounds of
    ``do_bench`` (median of rounds)."""
    out = run_tunedsl(family, shape, "exhaustive", 1e9, device, ns.subset, timing="events")
    medians: dict[str, float] = dict(out.pop("medians"))
    prob = make_problem(family, shape, device)
    by_label = {label(c): c for c in family.configs()}
    leaders = sorted(medians, key=medians.__getitem__)[: ns.ref_leaders]
    chosen = label(out["chosen"])  # the exhaustive search's own choice is always re-timed
    leaders += [chosen] if chosen not in leaders else []
    runs = {}
    for name in leaders:
        cfg = by_label[name]
        hints = {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
        # Timing only: split-K accumulates into the same output launch after launch
        # (an fp32 add takes as long whatever the values), as the race's samples did.
        runs[name] = lambda cfg=cfg, hints=hints: family.kernel[prob.grid(cfg)](
            *prob.args, **prob.kwargs(cfg), **hints
        )
        runs[name]()
    sync()
    samples: dict[str, list[float]] = {k: [] for k in runs}
    start = time.perf_counter()
    rounds = 0
    while rounds < ns.ref_rounds and (rounds < 2 or time.perf_counter() - start < ns.ref_budget):
        for name in leaders if rounds % 2 == 0 else list(reversed(leaders)):
            samples[name].append(bench(runs[name]))
        rounds += 1
    for name in leaders:
        medians[name] = statistics.median(samples[name])
    best = min(leaders, key=medians.__getitem__)
    retime = {"leaders": len(leaders), "rounds": rounds, "seconds": time.perf_counter() - start}
    return {"median_ms": medians, "best": best, "best_ms": medians[best], "retime": retime,
            "exhaustive_first_call_s": out["first_call_s"], "exhaustive": out}  # fmt: skip


def run_triton(family: Family, shape: str, subset: int) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"skipped": "triton.autotune needs a GPU"}
    prob = make_problem(family, shape, "cuda")
    valid = family.configs()
    pool = list(valid)
    random.Random(0).shuffle(pool)
    pool = pool[:subset]
    configs = [
        triton.Config(prob.kwargs(c), num_warps=c["num_warps"], num_stages=c["num_stages"])
        for c in pool
    ]
    zero = list(family.reset_to_zero) or None
    tuned = triton.autotune(configs=configs, key=[], reset_to_zero=zero)(family.kernel)
    sync()
    start = time.perf_counter()
    tuned[lambda meta: prob.grid(meta)](*prob.args)
    sync()
    wall = time.perf_counter() - start
    return {"subset": len(pool), "first_call_s": wall,
            "extrapolated_s": wall * len(valid) / len(pool)}  # fmt: skip


def child(ns: argparse.Namespace) -> None:
    family = FAMILIES[ns.family]
    if ns.child == "reference":
        out = run_reference(family, ns.shape, ns.device, ns)
    elif ns.child == "triton":
        out = run_triton(family, ns.shape, ns.triton_subset)
    else:
        # exhaustive: every configuration, however long (a site's default budget would stop it)
        budget = 1e9 if ns.child == "exhaustive" else ns.budget
        out = run_tunedsl(family, ns.shape, ns.child, budget, ns.device, ns.subset)
    print("RESULT " + json.dumps(out))


PASSED = ("family", "shape", "budget", "triton_subset", "device", "subset", "ref_leaders",
          "ref_rounds", "ref_budget")  # fmt: skip


def spawn(ns: argparse.Namespace, mode: str, tmp: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, mode, "triton"),
               TUNEDSL_CACHE_DIR=os.path.join(tmp, mode, "tunedsl"), TUNEDSL_QUIET="1")  # fmt: skip
    cmd = [sys.executable, __file__, "--child", mode]
    for name in PASSED:
        cmd += ["--" + name.replace("_", "-"), str(getattr(ns, name))]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        # The whole tail goes to stderr (the table keeps one line): whether the child died
        # while tuning or after its RESULT, at exit, is in it.
        print(
            f"--- {mode} exited {proc.returncode}; RESULT printed: {bool(lines)}", file=sys.stderr
        )
        print((proc.stderr or proc.stdout)[-4000:], file=sys.stderr)
        return {"error": (proc.stderr or proc.stdout)[-2000:]}
    return json.loads(lines[-1][len("RESULT ") :])


def reference_path(ns: argparse.Namespace) -> Path:
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu-interpreter"
    subset = f"_subset{ns.subset}" if ns.subset else ""
    name = f"search_{ns.family}_{ns.shape.replace(',', 'x')}{subset}_{dev.replace(' ', '_')}"
    return Path(ns.data_dir) / f"{name}_triton{triton.__version__}.json"


def plumbing(ns: argparse.Namespace) -> None:
    """No GPU: each strategy runs end to end under the interpreter on a tiny softmax and a
    tiny split-K matmul (its output zeroed before every measured launch)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("--plumbing needs TRITON_INTERPRET=1 set before Python starts")
    # a fresh record store: a decision stored by an earlier run would skip the tuning
    os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="tunedsl-plumbing-")
    for family, shape in (("softmax", "8,16"), ("splitk", "16,32,64")):
        for search in ("exhaustive", "random", "pattern", "auto"):
            out = run_tunedsl(FAMILIES[family], shape, search, 2.0, "cpu", subset=24)
            assert out["rel_err"] < 1e-2, out
            out.pop("medians")
            print("plumbing ok:", family, search, json.dumps(out))
    print(triton_row({"subset": 24, "first_call_s": 14.1, "extrapolated_s": 959.0}))


def row(name: str, r: dict, ref: dict) -> str:
    if "error" in r:
        return f"{name:<22} failed: {r['error'].splitlines()[-1] if r['error'] else '?'}"
    q = ref["median_ms"].get(label(r["chosen"]), float("nan")) / ref["best_ms"]
    return (f"{name:<22}{r['first_call_s']:>13.2f}{r['compiled']:>10}{r['measured']:>10}"
            f"{(q - 1) * 100:>8.1f}%{r['first_call_s'] / ref['exhaustive_first_call_s']:>13.2f}x"
            f"  {label(r['chosen'])}  (rel. err {r.get('rel_err', float('nan')):.1e})")  # fmt: skip


def triton_row(tri: dict) -> str:
    if "first_call_s" in tri:
        return (f"{'triton.autotune':<22}{tri['extrapolated_s']:>13.1f}  (extrapolated from "
                f"{tri['subset']} random valid configurations: {tri['first_call_s']:.1f} s)")  # fmt: skip
    return f"{'triton.autotune':<22} {tri.get('skipped') or tri.get('error', '?')[-300:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=sorted(FAMILIES), default="mm")
    parser.add_argument("--shape", default=None,
                        help="a preset (square, skinny, rows) or M,N,K / rows,cols")  # fmt: skip
    parser.add_argument("--budget", type=float, default=10.0, help="seconds, for the budgeted")
    parser.add_argument("--strategies", default="auto,pattern,random")
    parser.add_argument("--triton-subset", type=int, default=24, help="0: no triton row")
    parser.add_argument("--fresh", action="store_true", help="re-measure the reference")
    parser.add_argument("--ref-leaders", type=int, default=24, help="re-timed leaders")
    parser.add_argument("--ref-rounds", type=int, default=5, help="re-timing rounds, at most")
    parser.add_argument("--ref-budget", type=float, default=30.0,
                        help="no new re-timing round after this many seconds (2 rounds at least)")  # fmt: skip
    parser.add_argument("--data-dir", default=str(DATA), help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--subset", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--plumbing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    family = FAMILIES[ns.family]
    ns.shape = family.shape(ns.shape)
    if ns.plumbing:
        return plumbing(ns)
    if ns.child:
        return child(ns)
    if ns.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_search needs a CUDA GPU (try --plumbing without one)")
    if ns.device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("--device cpu needs TRITON_INTERPRET=1 set before Python starts")
    valid = len(space_of(family, ns.subset))
    path = reference_path(ns)
    with tempfile.TemporaryDirectory() as tmp:
        if path.exists() and not ns.fresh:
            ref = json.loads(path.read_text())
            print(f"reference: {path.name} (reused; --fresh re-measures)")
        else:
            print(f"reference: measuring {path.name} (every configuration; kept for later runs)")
            ref = spawn(ns, "reference", tmp)
            if "error" in ref:
                raise SystemExit("reference failed:\n" + ref["error"])
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".tmp")  # never a half-written table a later run trusts
            partial.write_text(json.dumps(ref, indent=1, sort_keys=True))
            partial.replace(path)
        rows = {"exhaustive": ref["exhaustive"]}
        for s in ns.strategies.split(","):
            rows[s] = spawn(ns, s, tmp)
        tri = (spawn(ns, "triton", tmp) if ns.triton_subset > 0
               else {"skipped": "not run (--triton-subset 0)"})  # fmt: skip
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "the CPU interpreter"
    print(f"search at scale: {ns.family} {ns.shape} on {dev}, {valid} valid configurations, "
          f"budget {ns.budget:g} s (triton {triton.__version__})")  # fmt: skip
    print(f"{'system':<22}{'first call s':>13}{'compiled':>10}{'measured':>10}{'vs best':>9}"
          f"{'vs exh. wall':>14}  chosen")  # fmt: skip
    for name, r in rows.items():
        print(row(name, r, ref))
    print(triton_row(tri))
    retime = ref.get("retime", {})
    print(f"exhaustive best {ref['best_ms']:.4f} ms: {ref['best']} (best {retime.get('leaders', 24)}"
          f" re-timed in {retime.get('rounds', 5)} interleaved rounds)")  # fmt: skip


if __name__ == "__main__":
    main()
