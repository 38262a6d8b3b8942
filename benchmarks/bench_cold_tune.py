"""Cold tuning, side by side: tunedsl's first call vs ``triton.autotune``'s (GPU).

Two spaces of an fp16 matmul, 2048^3 by default (``--size N``, or ``--shape M,N,K``, given
once or more: each shape is run in turn and compared at the end; ``--space``):

* ``anchor``: the anchor's 48 configurations (``/work/shared/anchors``, ``anchor_mm.py``);
* ``tutorial03``: the 16 configurations of Triton's tutorial 03 (its
  ``get_cuda_autotune_config()``) with its grouped-order kernel (``tutorial03_mm.py``).

Each measurement runs in a fresh subprocess with its own empty TUNEDSL_CACHE_DIR and
TRITON_CACHE_DIR:

* ``triton``: wall time of ``triton.autotune``'s first call (compiles one configuration
  after another, then benchmarks), and the configuration it chose;
* ``tunedsl``: wall time of ``tunedsl.autotune_launch``'s first call (parallel compile
  pipelined with racing measurement), the configuration it chose, and where its time went
  (``tune_breakdown.py``): waiting for compiles that measuring did not hide, measuring,
  and the rest;
* ``exhaustive``: the slow, careful reference: every configuration compiled (from the
  ``triton`` run's cache: compiling is not timed here), then timed in ``--rounds``
  interleaved rounds of ``do_bench(rep=--rep)`` (median of each, median of rounds).

Each shape also prints its compiles: every tunedsl compile job's seconds (slowest first),
the configurations stopped early over the GPU's shared memory, the compiled kernels in each
run's Triton cache directory (one per configuration compiled in full: a configuration
compiled under two keys would show as two), and Triton's compiles inside each tuning
process (``built`` ran the compiler there; ``loaded`` found it in the cache).

Targets: tunedsl's first call at most 1/6 of triton.autotune's, and the same choice as the
exhaustive reference (within 3%).

    python benchmarks/bench_cold_tune.py [--space anchor|tutorial03] [--rounds 5] [--json]
    python benchmarks/bench_cold_tune.py --space tutorial03 --shape 3000,2000,1000 \
        --shape 4096,4096,4096 --rounds 3 --rep 100
    TRITON_INTERPRET=1 python benchmarks/bench_cold_tune.py --plumbing   # no GPU: API check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import tune_breakdown
from anchor_mm import MM_SPACE, all_configs, mm
from tutorial03_mm import TUTORIAL03_CONFIGS, mm_grouped

HINTS = ("num_warps", "num_stages")
Shape = tuple[int, int, int]  # M, N, K


def as_shape(size: int | tuple[int, ...] | list[int]) -> Shape:
    """``size`` as (M, N, K): an int is a square problem."""
    if isinstance(size, int):
        return (size, size, size)
    m, n, k = (int(x) for x in size)
    return (m, n, k)


def parse_shape(text: str) -> Shape:
    parts = text.replace("x", ",").split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 3) or min(values, default=0) < 1:
        raise argparse.ArgumentTypeError(
            f"--shape {text!r}: write M,N,K with positive integers, e.g. 3000,2000,1000 "
            "(or one N for N^3)"
        )
    return as_shape(values[0] if len(values) == 1 else values)


def shape_text(shape: Shape) -> str:
    m, n, k = shape
    return f"{m}^3" if m == n == k else f"M,N,K={m},{n},{k}"


@dataclass(frozen=True)
class ColdSpace:
    name: str
    kernel: Any
    configs: list[dict[str, int]]
    tunedsl_space: Any  # as autotune_launch gets it: the anchor's axes, the tutorial's list
    grid: Callable[[int, dict[str, int]], tuple[int, ...]]


SPACES = {
    "anchor": ColdSpace(
        "anchor", mm, all_configs(MM_SPACE), MM_SPACE,
        lambda size, cfg: (as_shape(size)[0] // cfg["BM"], as_shape(size)[1] // cfg["BN"]),
    ),
    "tutorial03": ColdSpace(
        "tutorial03", mm_grouped, TUTORIAL03_CONFIGS, TUTORIAL03_CONFIGS,
        lambda size, cfg: (
            triton.cdiv(as_shape(size)[0], cfg["BM"]) * triton.cdiv(as_shape(size)[1], cfg["BN"]),
        ),
    ),
}  # fmt: skip


def constexprs(cfg: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in cfg.items() if k not in HINTS}


def label(cfg: dict) -> str:
    text = "BM={BM} BN={BN} BK={BK} w={num_warps} s={num_stages}".format(**cfg)
    return text + (f" G={cfg['GROUP_M']}" if "GROUP_M" in cfg else "")


def problem(size: int | Shape, device: str):
    m, n, k = as_shape(size)
    a = torch.randn(m, k, device=device, dtype=torch.float16)
    b = torch.randn(k, n, device=device, dtype=torch.float16)
    c = torch.empty(m, n, device=device, dtype=torch.float16)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return a, b, c, (a, b, c, m, n, k, *strides)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_triton(size: int | Shape, space: ColdSpace) -> dict:
    a, b, c, args = problem(size, "cuda")
    tune_breakdown.install_compile_counter()
    configs = [
        triton.Config(constexprs(cfg), num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
        for cfg in space.configs
    ]
    kern = triton.autotune(configs=configs, key=["M", "N", "K"])(space.kernel)
    sync()
    start = time.perf_counter()
    kern[lambda meta: space.grid(size, meta)](*args)
    sync()
    wall = time.perf_counter() - start
    best = kern.best_config
    chosen = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    return {"first_call_s": wall, "chosen": chosen, "rel_err": rel_err(a, b, c),
            "triton_compiles": tune_breakdown.triton_compiles()}  # fmt: skip


def run_tunedsl(
    size: int | Shape, space: ColdSpace, device: str = "cuda", configs: Any = None
) -> dict:
    from tunedsl import autotune_launch

    a, b, c, args = problem(size, device)
    tune_breakdown.install()
    tune_breakdown.reset()
    sync()
    start = time.perf_counter()
    opening = None
    until = os.environ.get("BENCH_SAMPLE_OPENING")  # "1": the main thread until the caches
    if until == "1":  # are warm; else every thread until the span named so has ended
        opening = tune_breakdown.StackSampler(threading.get_ident(), until="warm caches")
    elif until:
        opening = tune_breakdown.StackSampler(None, until=until)
    launch = autotune_launch(
        space.kernel, space=configs if configs is not None else space.tunedsl_space,
        grid=lambda cfg: space.grid(size, cfg.as_dict()), args=args,
        kwargs=lambda cfg: constexprs(cfg.as_dict()), name=space.name,
    )  # fmt: skip
    sync()
    wall = time.perf_counter() - start
    opened = opening.stop() if opening is not None else None
    chosen = {k: launch.config[k] for k in space.configs[0]}
    measured = sum(1 for r in launch.timings.values() if r.status == "ok")
    per_config = {
        label({k: r.config[k] for k in space.configs[0]}): [r.median_ms, r.reps, r.min_ms]
        for r in launch.timings.values()
        if r.status == "ok"
    }
    from tunedsl.backends import compile_processes, process_compile

    timer = launch.record.context.get("timer") if launch.record is not None else None
    return {"first_call_s": wall, "chosen": chosen, "source": launch.source, "timer": timer,
            "measured": measured, "rel_err": rel_err(a, b, c),
            "breakdown": tune_breakdown.report(wall), "timeline": tune_breakdown.timeline(),
            "opening": opened, "per_config": per_config,
            "sample_log": tune_breakdown.sample_log(),
            "compile_log": [[label_of(c, space), s, why] for c, s, why in tune_breakdown.compile_log()],
            "triton_compiles": tune_breakdown.triton_compiles(),
            "processes": {**process_compile.stats, **compile_processes.stats}}  # fmt: skip


def label_of(config: dict, space: ColdSpace) -> str:
    try:
        return label({k: config[k] for k in space.configs[0]})
    except KeyError:
        return repr(config)


def cache_entries(cache_dir: str) -> dict[str, int]:
    """Compiled kernels in a Triton cache directory, by kernel name (one metadata file per
    compiled variant; ``__grp__`` files are Triton's indexes of them)."""
    counts: dict[str, int] = {}
    for _, _, files in os.walk(cache_dir):
        for name in files:
            if name.endswith(".json") and not name.startswith("__grp__"):
                kernel = name[: -len(".json")]
                counts[kernel] = counts.get(kernel, 0) + 1
    return counts


def rel_err(a, b, c) -> float:
    ref = a.float() @ b.float()
    return float((c.float() - ref).norm() / ref.norm())


def bench(fn: Callable[[], Any], rep: int) -> float:
    """``do_bench``'s median in ms on a GPU; a wall median elsewhere (dry runs)."""
    if torch.cuda.is_available():
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=50, rep=rep, return_mode="median"))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_exhaustive(size: int | Shape, space: ColdSpace, rounds: int, rep: int, device: str) -> dict:
    *_, args = problem(size, device)

    def launcher(cfg):
        grid = space.grid(size, cfg)
        return lambda: space.kernel[grid](*args, **cfg)

    runs = {label(cfg): launcher(cfg) for cfg in space.configs}
    failed: dict[str, str] = {}
    for name, fn in list(runs.items()):  # compile (or load from the triton cache), not timed
        try:
            fn()
        except Exception as err:  # e.g. OutOfResources: too much shared memory on this GPU
            failed[name] = f"{type(err).__name__}: {err}"
            del runs[name]
    sync()
    samples: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):  # interleaved rounds: drift hits every configuration alike
        for name, fn in runs.items():
            samples[name].append(bench(fn, rep))
    medians = {k: statistics.median(v) for k, v in samples.items()}
    best = min(medians, key=medians.__getitem__)
    return {"median_ms": medians, "best": best, "best_ms": medians[best], "failed": failed,
            "rounds_ms": samples}  # fmt: skip


def ties(ref: dict) -> list[str]:
    """The configurations the reference cannot tell from its best: each one's range over
    the interleaved rounds overlaps the best's (the same rounds, the same process)."""
    rounds = ref.get("rounds_ms") or {}
    if ref["best"] not in rounds:
        return [ref["best"]]
    low = min(rounds[ref["best"]])
    high = max(rounds[ref["best"]])
    return sorted(
        name for name, values in rounds.items() if min(values) <= high and max(values) >= low
    )


def child(ns: argparse.Namespace) -> None:
    space = SPACES[ns.space]
    shape = ns.shape[0] if ns.shape else as_shape(ns.size)
    if ns.child == "triton":
        out = run_triton(shape, space)
    elif ns.child == "tunedsl":
        out = run_tunedsl(shape, space, ns.device)
    else:
        out = run_exhaustive(shape, space, ns.rounds, ns.rep, ns.device)
    print("RESULT " + json.dumps(out))


#: ``--tunedsl``: tunedsl rows, each with its environment: the compile setting
#: (TUNEDSL_COMPILE_PROCESSES) or the timing mode (TUNEDSL_TIMING).
TUNEDSL_MODES: dict[str, dict[str, str]] = {
    "default": {},
    "threads": {"TUNEDSL_COMPILE_PROCESSES": "off"},
    "processes": {"TUNEDSL_COMPILE_PROCESSES": "on"},
    "graph": {"TUNEDSL_TIMING": "graph"},
    "events": {"TUNEDSL_TIMING": "events"},
}


def spawn(
    mode: str,
    ns: argparse.Namespace,
    tmp: str,
    setting: str = "default",
    shape: Shape | None = None,
) -> dict:
    shape = shape or as_shape(ns.size)
    where = "x".join(map(str, shape))
    # The reference compiles from the triton run's cache: its compiling is not measured.
    cache = os.path.join(tmp, where, "triton" if mode == "exhaustive" else f"{mode}-{setting}")
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(cache, "triton"),
               TUNEDSL_CACHE_DIR=os.path.join(tmp, where, f"{mode}-{setting}", "tunedsl"))  # fmt: skip
    env.update(TUNEDSL_MODES.get(setting, {}))
    cmd = [sys.executable, __file__, "--child", mode, "--space", ns.space, "--shape",
           ",".join(map(str, shape)), "--rounds", str(ns.rounds), "--rep", str(ns.rep),
           "--device", ns.device]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode} failed:\n{proc.stdout}\n{proc.stderr}")
    out: dict = json.loads(lines[-1][len("RESULT ") :])
    if mode != "exhaustive":  # what this run left compiled in its own Triton cache
        out["cache_entries"] = cache_entries(os.path.join(cache, "triton"))
    return out


def plumbing() -> None:
    """No GPU: the tunedsl path (and its time breakdown) under the interpreter, both spaces
    on tiny problems (tutorial 03 also at a shape of no multiple of 16), and the exhaustive
    reference's loop with a wall-clock timer."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("--plumbing needs TRITON_INTERPRET=1 set before Python starts")
    # a fresh record store: a decision stored by an earlier run would skip the tuning
    os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="tunedsl-plumbing-")
    small = {"BM": [16], "BN": [16, 32], "BK": [16], "num_warps": [4], "num_stages": [2]}
    tiny = {**SPACES["anchor"].__dict__, "tunedsl_space": small, "configs": all_configs(small)}
    t03 = SPACES["tutorial03"]
    for space, shape in (
        (ColdSpace(**tiny), as_shape(32)),
        (t03, as_shape(64)),
        (t03, (100, 60, 40)),
    ):
        configs = space.configs[:4]
        out = run_tunedsl(shape, space, device="cpu", configs=configs)
        assert out["rel_err"] < 1e-2 and out["measured"] == len(configs), out
        assert out["breakdown"]["measure_s"] > 0 and out["breakdown"]["samples"] > 0, out
        ref = run_exhaustive(
            shape, ColdSpace(**{**space.__dict__, "configs": configs}), 1, 1, "cpu"
        )
        assert label(out["chosen"]) in ref["median_ms"], (out, ref)
        print("plumbing ok:", space.name, shape_text(shape), json.dumps(out))
        # the table as the GPU run prints it, tunedsl's result standing in for triton's row
        print("\n".join(table(shape, space, out, out, ref, "the CPU interpreter")))
        print("\n".join(compiles(space, out, out)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", choices=sorted(SPACES), default="anchor")
    parser.add_argument("--size", type=int, default=2048, help="N for an N^3 problem")
    parser.add_argument(
        "--shape", type=parse_shape, action="append",
        help="M,N,K of the problem (instead of --size); given more than once, each shape is "
        "run in turn (triton.autotune, tunedsl, the reference) and the shapes compared",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5, help="exhaustive timing rounds")
    parser.add_argument("--rep", type=int, default=300, help="exhaustive do_bench rep, ms")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--tunedsl", default="default",
        help="tunedsl rows, comma-separated: default, threads (TUNEDSL_COMPILE_PROCESSES=off), "
        "processes (=on), graph (TUNEDSL_TIMING=graph), events (=events); each in its own "
        "fresh process and caches",
    )  # fmt: skip
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--plumbing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.plumbing:
        return plumbing()
    if ns.child:
        return child(ns)
    if not torch.cuda.is_available():
        raise SystemExit("bench_cold_tune needs a CUDA GPU (try --plumbing without one)")
    space = SPACES[ns.space]
    shapes = ns.shape or [as_shape(ns.size)]
    if ns.space == "anchor" and any(d % 256 for shape in shapes for d in shape):
        raise SystemExit("--space anchor: its kernel has no masks; every dimension of --shape "
                         "or --size must be a multiple of 256 (tutorial03 takes any shape)")  # fmt: skip
    settings = [m.strip() for m in ns.tunedsl.split(",") if m.strip()]
    unknown = sorted(set(settings) - set(TUNEDSL_MODES))
    if unknown or not settings:
        raise SystemExit(f"--tunedsl: unknown {unknown}; choose from {sorted(TUNEDSL_MODES)}")
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            tri = spawn("triton", ns, tmp, shape=shape)
            rows = {setting: spawn("tunedsl", ns, tmp, setting, shape) for setting in settings}
            ref = spawn("exhaustive", ns, tmp, shape=shape)
            summary += report_shape(ns, space, shape, tri, rows, ref, torch.cuda.get_device_name())
    if len(shapes) > 1:
        print("== the shapes side by side")
        print(f"{'shape':<24}{'row':<9}{'triton s':>9}{'tunedsl s':>10}{'ratio':>7}"
              f"{'compile wait':>13}{'measure':>8}{'other':>7}{'slowest job':>12}"
              f"{'full compiles':>14}{'over smem':>10}")  # fmt: skip
        print("\n".join(summary))


def report_shape(ns: argparse.Namespace, space: ColdSpace, shape: Shape, tri: dict,
                 rows: dict[str, dict], ref: dict, device: str) -> list[str]:  # fmt: skip
    """Print one shape's tables; return its lines for the side-by-side summary."""
    summary = []
    for setting, tds in rows.items():
        if len(rows) > 1:
            print(f"-- tunedsl row: {setting} (timer {tds.get('timer')}; processes: "
                  f"{tds.get('processes')})")  # fmt: skip
        for line in table(shape, space, tri, tds, ref, device):
            print(line)
        for line in compiles(space, tri, tds):
            print(line)
        print("tunedsl timeline: " + stages(tds.get("timeline", [])))
        for line in beside_reference(tds, ref):
            print(line)
        if tds.get("opening"):
            print("tunedsl's first call's opening, ms on the stack: "
                  + json.dumps(tds["opening"]))  # fmt: skip
        ratio = tds["first_call_s"] / tri["first_call_s"]
        if ns.json:
            print(json.dumps({"shape": shape, "triton": tri, "tunedsl": tds, "setting": setting,
                              "exhaustive": ref, "ratio": ratio}))  # fmt: skip
        bd, jobs = tds["breakdown"], tds.get("compile_log", [])
        slowest = max((s for _, s, _ in jobs), default=0.0)
        full = sum(1 for _, _, why in jobs if why is None)
        over = tds.get("processes", {}).get("over_shared", 0)
        summary.append(
            f"{shape_text(shape):<24}{setting:<9}{tri['first_call_s']:>9.2f}"
            f"{tds['first_call_s']:>10.2f}{ratio:>7.2f}{bd['compile_wait_s']:>13.2f}"
            f"{bd['measure_s']:>8.2f}{bd['other_s']:>7.2f}{slowest:>12.2f}{full:>14}{over:>10}"
        )
        sys.stdout.flush()
    return summary


def compiles(space: ColdSpace, tri: dict, tds: dict) -> list[str]:
    """Where tunedsl's compiles went, and how many kernels each run compiled."""
    jobs = sorted(tds.get("compile_log", []), key=lambda job: -job[1])
    name = getattr(space.kernel, "__name__", "")
    over = tds.get("processes", {}).get("over_shared", 0)
    lines = [
        f"tunedsl compile jobs, slowest first ({len(jobs)}; {over} stopped early over the "
        "GPU's shared memory): "
        + "; ".join(f"{cfg} {sec:.2f}s" + (" FAILED" if why else "") for cfg, sec, why in jobs),
        f"compiled kernels in each run's Triton cache: triton.autotune "
        f"{tri.get('cache_entries', {}).get(name, '-')}, tunedsl "
        f"{tds.get('cache_entries', {}).get(name, '-')} (tunedsl: one per configuration "
        "compiled in full; more means a configuration compiled under two keys)",
        f"Triton compiles inside the tuning process: triton.autotune "
        f"{tri.get('triton_compiles')}, tunedsl {tds.get('triton_compiles')} (tunedsl builds "
        "in forked workers: 'built' here means a compile its workers did not serve; 'loaded' "
        "beyond its compile jobs means a JIT table miss served from the cache)",
        f"tunedsl compile processes: {tds.get('processes')}",
    ]
    return lines


def beside_reference(tds: dict, ref: dict, top: int = 6) -> list[str]:
    """The reference's fastest configurations and tunedsl's choice: each one's time in the
    reference and in tunedsl's race, then every sample tunedsl took, in order (seconds into
    the call, the run's number, the values in µs)."""
    mine = tds.get("per_config", {})
    ranked = sorted(ref["median_ms"], key=ref["median_ms"].__getitem__)
    shown = ranked[:top] + [c for c in mine if c not in ranked[:top] and c == label(tds["chosen"])]
    lines = [f"{'configuration':<38}{'reference ms':>13}{'tunedsl ms':>11}{'reps':>5}"]
    for name in shown:
        median, reps, _ = mine.get(name, [float("nan"), 0, None])
        lines.append(f"{name:<38}{ref['median_ms'][name]:>13.4f}{median:>11.4f}{reps:>5}")
    log = tds.get("sample_log", [])
    if log:
        lines.append("tunedsl samples (s: run, µs): " + "; ".join(
            f"{at:.2f}: r{run} " + " ".join(f"{v * 1e3:.1f}" for v in values)
            for at, run, values in log))  # fmt: skip
    return lines


def stages(timeline: list) -> str:
    """Each stage's first start and last end, in seconds into the first call."""
    spans: dict[str, list[float]] = {}
    for start, end, what in timeline:
        name = "sample" if what.startswith("sample") else what
        first, last, count = spans.get(name, [start, end, 0])
        spans[name] = [min(first, start), max(last, end), count + 1]
    return "; ".join(f"{n} x{c:.0f} {a:.2f}-{b:.2f}" for n, (a, b, c) in spans.items())


def table(shape: Shape, space: ColdSpace, tri: dict, tds: dict, ref: dict,
          device: str) -> list[str]:  # fmt: skip
    best_ms = ref["best_ms"]

    def quality(chosen: dict) -> float:
        return ref["median_ms"][label(chosen)] / best_ms

    bd = tds["breakdown"]
    ratio = tds["first_call_s"] / tri["first_call_s"]
    tied = ties(ref)
    return [
        f"cold tuning, {len(space.configs)}-config fp16 matmul ({space.name}) {shape_text(shape)} on "
        f"{device} (triton {triton.__version__}, {os.cpu_count()} CPUs, compile workers "
        f"{os.environ.get('TUNEDSL_COMPILE_WORKERS', 'default')})",
        f"{'':<18}{'first call s':>13}{'compile wait':>13}{'measure':>9}{'other':>7}"
        f"{'chosen configuration':>38}{'vs best':>9}",
        f"{'triton.autotune':<18}{tri['first_call_s']:>13.2f}{'-':>13}{'-':>9}{'-':>7}"
        f"{label(tri['chosen']):>38}{(quality(tri['chosen']) - 1) * 100:>8.1f}%",
        f"{'tunedsl':<18}{tds['first_call_s']:>13.2f}{bd['compile_wait_s']:>13.2f}"
        f"{bd['measure_s']:>9.2f}{bd['other_s']:>7.2f}{label(tds['chosen']):>38}"
        f"{(quality(tds['chosen']) - 1) * 100:>8.1f}%",
        f"{'exhaustive best':<18}{'':>42}{ref['best']:>38}{best_ms:>8.4f} ms",
        f"exhaustive: {len(ref['median_ms'])} configurations run, "
        f"{len(ref.get('failed', {}))} do not run on this GPU "
        f"({'; '.join(sorted(set(ref.get('failed', {}).values())))[:160] or 'none'})",
        f"tunedsl: {bd['compiles']:.0f} compiles, {bd['compile_thread_s']:.2f} s on compile "
        f"threads (beside measuring); {bd['samples']:.0f} launches timed; "
        f"{tds['measured']} configurations measured",
        f"tunedsl / triton.autotune first call: {ratio:.2f} (target <= 0.17); tunedsl choice "
        f"{quality(tds['chosen']):.3f}x best (target: the best, <= 1.03)",
        f"the reference's ties with its best (round ranges overlap): {len(tied)}; tunedsl's "
        f"choice {'is' if label(tds['chosen']) in tied else 'is not'} one, "
        f"triton.autotune's {'is' if label(tri['chosen']) in tied else 'is not'}",
    ]


if __name__ == "__main__":
    main()
