"""Which guards keep compiles from disturbing timing: an A/B of each, on the GPU.

A cold tune compiles (forked workers, a compile thread loading their results) while it
times kernels. tunedsl once had five measures against that one cause:

* ``gate``: the sampling gate (``backends/timers.GATE``): a compile thread's load waits
  while a timer samples, and the other way round;
* ``switch``: the GIL switch interval at 20 µs while a timer samples
  (``timers.SAMPLING_SWITCH_INTERVAL_S``);
* ``retakes``: a sample whose launch was queued after the L2 flush could have ended is
  taken again (``timers.RETAKES_PER_REP``);
* ``nice``: compile workers at nice +10 (``compile_processes.WORKER_NICENESS``);
* ``warmup``: Triton's hash of itself and its CUDA utilities started on background
  threads at the record miss (``triton_compile.warm_up_compiling``).

For the 48-configuration anchor matmul and tutorial 03's 16 configurations (2048^3 fp16),
each row is a fresh process with its own empty caches that cold-tunes with every guard on
(``all on``), with one switched off, or with every one off (``--off all``), by setting
that module constant or attribute in the child before it tunes. Then one process times the configurations with
``triton.testing.do_bench``: every one once (a scan), then the scan's fastest and every
configuration a row chose in ``--rounds`` interleaved rounds. The table gives each row's
tune time, its choice, the choice's re-timed runtime and how far that is from the best.
A guard whose rows match ``all on`` (tune time and choice) over the repeats does not pay.

All five were removed from tunedsl after this A/B on an H100 (16 cores, and 4 under
``taskset``): with every guard off, each row chose what the all-on rows chose (or the
best) in the same tune time. The script remains to re-check that on other hardware, run
against a tunedsl that has the guards; it switches off those present, and says so and
exits when none is left.

    python benchmarks/bench_timing_guards.py [--space anchor,tutorial03] [--repeats 2]
    python benchmarks/bench_timing_guards.py --off all --repeats 3       # all on against all off
    python benchmarks/bench_timing_guards.py --space anchor --json a.json   # one space ...
    python benchmarks/bench_timing_guards.py --table a.json b.json          # ... one table
    TRITON_INTERPRET=1 python benchmarks/bench_timing_guards.py --plumbing   # no GPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

GUARDS = ("gate", "switch", "retakes", "nice", "warmup")


def _homes() -> dict[str, tuple[Any, str]]:
    """Each guard's module and the attribute that holds it."""
    from tunedsl.backends import compile_processes, timers, triton_compile

    return {
        "gate": (timers, "GATE"),
        "switch": (timers, "SAMPLING_SWITCH_INTERVAL_S"),
        "retakes": (timers, "RETAKES_PER_REP"),
        "nice": (compile_processes, "WORKER_NICENESS"),
        "warmup": (triton_compile, "warm_up_compiling"),
    }


def present() -> list[str]:
    """The guards this tunedsl still has (a guard removed since is left out of the rows)."""
    return [g for g, (module, name) in _homes().items() if hasattr(module, name)]


def switch_off(guard: str) -> None:
    """Turn one guard off in this process (before it tunes)."""
    from tunedsl.backends import compile_processes, timers, triton_compile

    if guard == "all":  # every guard this tunedsl has, off in one row
        for one in present():
            switch_off(one)
        return
    if guard != "none" and guard not in present():
        raise SystemExit(f"guard {guard!r} is not in this tunedsl (removed?)")
    if guard == "gate":  # neither side waits for the other: zero patience
        timers.GATE.patience_s = 0.0
        timers.GATE.helper_patience_s = 0.0
    elif guard == "switch":  # the interval in force already: setting it changes nothing
        timers.SAMPLING_SWITCH_INTERVAL_S = sys.getswitchinterval()
    elif guard == "retakes":
        timers.RETAKES_PER_REP = 0
    elif guard == "nice":  # read by each forked worker
        compile_processes.WORKER_NICENESS = 0
    elif guard == "warmup":
        triton_compile.warm_up_compiling = lambda: None
    elif guard != "none":
        raise SystemExit(f"unknown guard {guard!r}; choose from {GUARDS}")


def switched(off: str, in_force: dict[str, float]) -> bool:
    """Whether a row ran with exactly its guard off (``warmup`` cannot be read back)."""
    switch = in_force["switch_interval_s"]
    off_now = {  # None: the guard is gone from tunedsl (nothing to check)
        "gate": in_force["gate_patience_s"] == 0.0,
        "switch": switch is not None and switch >= sys.getswitchinterval(),
        "retakes": in_force["retakes_per_rep"] == 0,
        "nice": in_force["worker_niceness"] == 0,
    }
    gone = {"gate": "gate_patience_s", "switch": "switch_interval_s",
            "retakes": "retakes_per_rep", "nice": "worker_niceness"}  # fmt: skip
    return all(
        value == (off in (guard, "all")) or in_force[gone[guard]] is None
        for guard, value in off_now.items()
    )


def spaces(plumbing: bool) -> dict[str, Any]:
    """The spaces by name (tiny ones under ``--plumbing``)."""
    from anchor_mm import all_configs
    from bench_cold_tune import SPACES, ColdSpace

    if not plumbing:
        return SPACES
    small = {"BM": [16], "BN": [16, 32], "BK": [16], "num_warps": [4], "num_stages": [2]}
    tiny = {**SPACES["anchor"].__dict__, "tunedsl_space": small, "configs": all_configs(small)}
    t03 = SPACES["tutorial03"]
    return {
        "anchor": ColdSpace(**tiny),
        "tutorial03": ColdSpace(**{**t03.__dict__, "configs": t03.configs[:3]}),
    }


def child_tune(ns: argparse.Namespace) -> dict:
    from bench_cold_tune import label, run_tunedsl

    switch_off(ns.off)
    space = spaces(ns.plumbing)[ns.space]
    configs = space.configs if ns.plumbing and ns.space == "tutorial03" else None
    out = run_tunedsl(ns.size, space, ns.device, configs=configs)
    from tunedsl.backends import compile_processes, timers

    return {
        "first_call_s": out["first_call_s"],
        "chosen": label(out["chosen"]),
        "source": out["source"],
        "timer": out["timer"],
        "measured": out["measured"],
        "compile_wait_s": out["breakdown"]["compile_wait_s"],
        "rel_err": out["rel_err"],
        # what was in force, read back (a guard that did not switch off shows here)
        "in_force": {
            "gate_patience_s": getattr(getattr(timers, "GATE", None), "patience_s", None),
            "switch_interval_s": getattr(timers, "SAMPLING_SWITCH_INTERVAL_S", None),
            "retakes_per_rep": getattr(timers, "RETAKES_PER_REP", None),
            "worker_niceness": getattr(compile_processes, "WORKER_NICENESS", None),
        },
    }


def child_reference(ns: argparse.Namespace) -> dict:
    """Scan every configuration once, then time the scan's top ones and ``--retime`` in
    interleaved rounds of do_bench (median of rounds)."""
    from bench_cold_tune import bench, label, problem

    space = spaces(ns.plumbing)[ns.space]
    *_, args = problem(ns.size, ns.device)
    runs = {}
    failed = {}
    for cfg in space.configs:  # compile (from the all-on row's Triton cache), not timed
        fn = (lambda c: lambda: space.kernel[space.grid(ns.size, c)](*args, **c))(cfg)
        try:
            fn()
            runs[label(cfg)] = fn
        except Exception as err:  # e.g. more shared memory than this GPU has
            failed[label(cfg)] = type(err).__name__
    scan = {name: bench(fn, ns.scan_rep) for name, fn in runs.items()}
    top = sorted(scan, key=scan.__getitem__)[: ns.top]
    retime = list(dict.fromkeys(top + [c for c in json.loads(ns.retime) if c in runs]))
    rounds: dict[str, list[float]] = {name: [] for name in retime}
    for _ in range(ns.rounds):
        for name in retime:
            rounds[name].append(bench(runs[name], ns.rep))
    medians = {name: statistics.median(v) for name, v in rounds.items()}
    best = min(medians, key=medians.__getitem__)
    return {"scan_ms": scan, "median_ms": medians, "best": best, "failed": failed}


def spawn(ns: argparse.Namespace, mode: str, space: str, env: dict[str, str], *extra: str) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--space", space, "--size", str(ns.size),
           "--device", ns.device, "--rounds", str(ns.rounds), "--rep", str(ns.rep),
           "--scan-rep", str(ns.scan_rep), "--top", str(ns.top), *extra]  # fmt: skip
    cmd += ["--plumbing"] if ns.plumbing else []
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode} {space} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--space", default="anchor,tutorial03")
    parser.add_argument("--off", default=",".join(GUARDS), help="guards to switch off, one a row")
    parser.add_argument("--repeats", type=int, default=2, help="rows per setting (round-robin)")
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5, help="re-timing rounds")
    parser.add_argument("--rep", type=int, default=100, help="re-timing do_bench rep, ms")
    parser.add_argument("--scan-rep", type=int, default=25, help="the scan's do_bench rep, ms")
    parser.add_argument("--top", type=int, default=6, help="the scan's fastest, re-timed")
    parser.add_argument("--json", help="write every row and reference here")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="one table of --json files")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--plumbing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--retime", default="[]", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.plumbing:  # no GPU: tiny spaces under the interpreter, one repeat
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise SystemExit("--plumbing needs TRITON_INTERPRET=1 set before Python starts")
        ns.size, ns.device, ns.repeats, ns.rounds = 32, "cpu", 1, 1
    if ns.child:
        out = child_tune(ns) if ns.child == "tune" else child_reference(ns)
        print("RESULT " + json.dumps(out))
        return 0
    if ns.table:
        found = [path for path in ns.table if os.path.exists(path)]
        for path in sorted(set(ns.table) - set(found)):
            print(f"{path}: missing (its step did not finish); the table has the others")
        runs = [json.load(open(path)) for path in found]
        if not runs:
            raise SystemExit("no --table file to show")
        rows = [row for run in runs for row in run["rows"]]
        refs = {k: v for run in runs for k, v in run["references"].items()}
        ns = argparse.Namespace(**{**vars(ns), **runs[0]["settings"]})
        report(rows, refs, ns, sum(run["elapsed_s"] for run in runs))
        return 0
    names = [s.strip() for s in ns.space.split(",") if s.strip()]
    settings = ["none"] + [g.strip() for g in ns.off.split(",") if g.strip()]
    unknown = sorted(set(settings) - {"none", "all", *GUARDS})
    unknown += sorted(set(names) - set(spaces(False)))
    if unknown:
        raise SystemExit(f"unknown {unknown}: guards {GUARDS}, spaces anchor, tutorial03")
    for guard in [g for g in settings[1:] if g != "all" and g not in present()]:
        print(f"guard {guard}: not in this tunedsl (removed); no row")
        settings.remove(guard)
    if not present():  # an all-off row would tune exactly as the all-on row
        print("no timing guard is left in this tunedsl: nothing to switch off, no rows")
        return 0
    import torch

    if not ns.plumbing and not torch.cuda.is_available():
        raise SystemExit("bench_timing_guards needs a CUDA GPU (try --plumbing without one)")
    start = time.perf_counter()
    rows: list[dict] = []
    refs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="timing-guards-") as tmp:
        for space in names:
            first_cache = None
            for repeat in range(ns.repeats):  # round-robin: drift hits every setting alike
                for setting in settings:
                    where = os.path.join(tmp, f"{space}-{setting}-{repeat}")
                    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(where, "triton"),
                               TUNEDSL_CACHE_DIR=os.path.join(where, "tunedsl"))  # fmt: skip
                    first_cache = first_cache or env["TRITON_CACHE_DIR"]
                    row = spawn(ns, "tune", space, env, "--off", setting)
                    rows.append({"space": space, "off": setting, "repeat": repeat, **row})
            chosen = sorted({r["chosen"] for r in rows if r["space"] == space})
            env = dict(os.environ, TRITON_CACHE_DIR=first_cache)  # compiled by the first row
            refs[space] = spawn(ns, "reference", space, env, "--retime", json.dumps(chosen))
    elapsed = time.perf_counter() - start
    if ns.json:
        settings = {k: getattr(ns, k) for k in ("size", "repeats", "rounds", "rep")}
        with open(ns.json, "w") as fh:
            json.dump({"rows": rows, "references": refs, "settings": settings,
                       "elapsed_s": elapsed}, fh, indent=1)  # fmt: skip
    report(rows, refs, ns, elapsed)
    return 0


def report(rows: list[dict], refs: dict[str, dict], ns: argparse.Namespace, elapsed: float) -> None:
    for line in table(rows, refs, ns, elapsed):
        print(line)
    for r in rows:  # each guard read back in its row: one still on would void the A/B
        if not switched(r["off"], r["in_force"]):
            print(f"WARNING: {r['space']} row {r['off']} {r['repeat'] + 1}: {r['in_force']}")


def table(rows: list[dict], refs: dict[str, dict], ns: argparse.Namespace, elapsed: float):
    import torch
    import triton

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "the interpreter"
    yield (
        f"timing guards, each switched off in turn: cold tunes of {ns.size}^3 fp16 matmuls on "
        f"{device} (triton {triton.__version__}, {os.cpu_count()} CPUs), {ns.repeats} "
        f"repeat(s); re-timed with do_bench, {ns.rounds} rounds of rep={ns.rep} ms"
    )
    yield (
        f"{'space':<11}{'off':<9}{'run':>4}{'tune s':>8}  {'chosen':<34}{'chosen ms':>10}"
        f"{'vs best':>9}  timer"
    )
    for r in rows:
        ref = refs[r["space"]]
        ms = ref["median_ms"].get(r["chosen"])
        best = ref["median_ms"][ref["best"]]
        off = "all on" if r["off"] == "none" else r["off"]
        vs = f"{(ms / best - 1) * 100:>8.1f}%" if ms is not None else f"{'n/a':>9}"
        shown = f"{ms:>10.4f}" if ms is not None else f"{'n/a':>10}"
        yield (
            f"{r['space']:<11}{off:<9}{r['repeat'] + 1:>4}{r['first_call_s']:>8.2f}  "
            f"{r['chosen']:<34}{shown}{vs}  {r['timer']}"
        )
    yield "per setting (median tune s, worst choice vs best):"
    for space, ref in refs.items():
        best = ref["median_ms"][ref["best"]]
        parts = []
        for off in dict.fromkeys(r["off"] for r in rows if r["space"] == space):
            mine = [r for r in rows if r["space"] == space and r["off"] == off]
            tune = statistics.median(r["first_call_s"] for r in mine)
            worst = max(ref["median_ms"].get(r["chosen"], float("nan")) for r in mine)
            name = "all on" if off == "none" else f"{off} off"
            parts.append(f"{name} {tune:.2f} s {(worst / best - 1) * 100:+.1f}%")
        yield f"  {space} (best {ref['best']}, {best:.4f} ms): " + "; ".join(parts)
    yield f"total {elapsed:.0f} s"


if __name__ == "__main__":
    sys.exit(main())
