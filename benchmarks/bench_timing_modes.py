"""Timing modes for microsecond kernels: event timing against CUDA-graph timing.

A kernel of a few microseconds is tuned three times, each in a fresh process with empty
caches: ``timing="events"`` (one launch between two events, launch overhead included),
``timing="graph"`` (N launches captured in a graph, replay time / N) and ``timing="auto"``.
The reference is exhaustive and graph-timed: every configuration through
``triton.testing.do_bench_cudagraph``, in three interleaved rounds (median). Reported: each
mode's choice and its reference time over the best.

    python benchmarks/bench_timing_modes.py [--n 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm(x, w, y, n_cols, stride, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    for r in range(ROWS):
        row = tl.program_id(0) * ROWS + r
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        rms = tl.sqrt(tl.sum(v * v, axis=0) / n_cols + eps)
        g = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y + row * stride + cols, (v / rms * g).to(tl.float16), mask=mask)


SPACE = {"ROWS": [1, 2, 4], "num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2]}


def label(cfg: dict) -> str:
    return " ".join(f"{k}={cfg[k]}" for k in sorted(cfg))


def problem(rows: int, cols: int):
    torch.manual_seed(0)
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    w = torch.randn(cols, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    return (x, w, y, cols, x.stride(0), 1e-6), triton.next_power_of_2(cols)


def tune(mode: str, rows: int, cols: int) -> dict:
    from tunedsl import autotune_launch

    args, block = problem(rows, cols)
    r = autotune_launch(
        rmsnorm, space=SPACE, grid=lambda cfg: (rows // cfg.ROWS,), args=args,
        kwargs=lambda cfg: {"BLOCK": block, "ROWS": cfg.ROWS}, timing=mode, name=f"rms-{mode}",
    )  # fmt: skip
    torch.cuda.synchronize()
    timer = r.record.context.get("timer") if r.record else None
    return {"chosen": {k: r.config[k] for k in SPACE}, "timer": timer}


def reference(rows: int, cols: int) -> dict:
    import itertools

    from triton.testing import do_bench_cudagraph

    args, block = problem(rows, cols)
    configs = [dict(zip(SPACE, v, strict=True)) for v in itertools.product(*SPACE.values())]
    runs = {}
    for cfg in configs:

        def fn(cfg=cfg):
            rmsnorm[(rows // cfg["ROWS"],)](*args, BLOCK=block, ROWS=cfg["ROWS"],
                                            num_warps=cfg["num_warps"],
                                            num_stages=cfg["num_stages"])  # fmt: skip

        fn()
        runs[label(cfg)] = fn
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {k: [] for k in runs}
    for rnd in range(3):
        for name in runs if rnd % 2 == 0 else list(reversed(runs)):
            samples[name].append(do_bench_cudagraph(runs[name], rep=50))
    med = {k: statistics.median(v) for k, v in samples.items()}
    best = min(med, key=med.__getitem__)
    return {"median_ms": med, "best": best, "best_ms": med[best]}


def spawn(mode: str, rows: int, cols: int, tmp: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, mode, "t"),
               TUNEDSL_CACHE_DIR=os.path.join(tmp, mode, "d"), TUNEDSL_QUIET="1")  # fmt: skip
    proc = subprocess.run([sys.executable, __file__, "--child", mode, "--rows", str(rows),
                           "--cols", str(cols)], env=env, capture_output=True, text=True)  # fmt: skip
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][7:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--child")
    ns = p.parse_args()
    if ns.child:
        out = reference(ns.rows, ns.cols) if ns.child == "ref" else tune(ns.child, ns.rows, ns.cols)
        print("RESULT " + json.dumps(out))
        return
    with tempfile.TemporaryDirectory() as tmp:
        ref = spawn("ref", ns.rows, ns.cols, tmp)
        rows = {m: spawn(m, ns.rows, ns.cols, tmp) for m in ("events", "graph", "auto")}
    best = ref["best_ms"]
    print(f"timing modes: rmsnorm {ns.rows}x{ns.cols} fp16 on {torch.cuda.get_device_name()} "
          f"(triton {triton.__version__}); graph-timed exhaustive best {best * 1e3:.2f} us: "
          f"{ref['best']}")  # fmt: skip
    print(f"{'mode':<8}{'timer':>14}{'chosen (graph-timed us)':>26}{'vs best':>9}  chosen")
    for mode, r in rows.items():
        t = ref["median_ms"][label(r["chosen"])]
        print(f"{mode:<8}{r['timer']!s:>14}{t * 1e3:>26.2f}{(t / best - 1) * 100:>8.1f}%  "
              f"{label(r['chosen'])}")  # fmt: skip


if __name__ == "__main__":
    main()
