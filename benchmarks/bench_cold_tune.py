"""Cold tuning, side by side: tunedsl's first call vs ``triton.autotune``'s (GPU).

The anchor's 48-configuration fp16 matmul, 2048^3 (``/work/shared/anchors``). Each
measurement runs in a fresh subprocess with its own empty TRITON_CACHE_DIR and
TUNEDSL_CACHE_DIR:

* ``triton``: wall time of ``triton.autotune``'s first call (compiles one configuration
  after another, then benchmarks), and the configuration it chose;
* ``tunedsl``: wall time of ``tunedsl.autotune_launch``'s first call (parallel compile
  pipelined with measurement), and the configuration it chose;
* ``exhaustive``: the slow, careful reference: every configuration compiled, then timed
  in ``--rounds`` interleaved rounds of ``do_bench`` (median of each, median of rounds).

Targets (issue): tunedsl's first call at most 1/4 of triton.autotune's, and its choice
within 3% of the exhaustive best.

    python benchmarks/bench_cold_tune.py [--rounds 5] [--json]
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
import time

import torch
import triton
from anchor_mm import MM_SPACE, all_configs, mm

SPACE = MM_SPACE


def label(cfg: dict) -> str:
    return "BM={BM} BN={BN} BK={BK} w={num_warps} s={num_stages}".format(**cfg)


def problem(size: int, device: str):
    a = torch.randn(size, size, device=device, dtype=torch.float16)
    b = torch.randn(size, size, device=device, dtype=torch.float16)
    c = torch.empty(size, size, device=device, dtype=torch.float16)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return a, b, c, (a, b, c, size, size, size, *strides)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_triton(size: int, space: dict) -> dict:
    a, b, c, args = problem(size, "cuda")
    configs = [
        triton.Config({k: cfg[k] for k in ("BM", "BN", "BK")}, num_warps=cfg["num_warps"],
                      num_stages=cfg["num_stages"])
        for cfg in all_configs(space)
    ]  # fmt: skip
    kern = triton.autotune(configs=configs, key=["M", "N", "K"])(mm)
    sync()
    start = time.perf_counter()
    kern[lambda m: (size // m["BM"], size // m["BN"])](*args)
    sync()
    wall = time.perf_counter() - start
    best = kern.best_config
    chosen = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    return {"first_call_s": wall, "chosen": chosen, "rel_err": rel_err(a, b, c)}


def run_tunedsl(size: int, space: dict, device: str = "cuda") -> dict:
    from tunedsl import autotune_launch

    a, b, c, args = problem(size, device)
    sync()
    start = time.perf_counter()
    launch = autotune_launch(
        mm, space=space, grid=lambda cfg: (size // cfg.BM, size // cfg.BN), args=args,
        kwargs=lambda cfg: {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK},
    )  # fmt: skip
    sync()
    wall = time.perf_counter() - start
    chosen = {k: launch.config[k] for k in space}
    measured = sum(1 for r in launch.timings.values() if r.status == "ok")
    return {"first_call_s": wall, "chosen": chosen, "source": launch.source,
            "measured": measured, "rel_err": rel_err(a, b, c)}  # fmt: skip


def rel_err(a, b, c) -> float:
    ref = a.float() @ b.float()
    return float((c.float() - ref).norm() / ref.norm())


def run_exhaustive(size: int, space: dict, rounds: int) -> dict:
    from triton.testing import do_bench

    *_, args = problem(size, "cuda")
    configs = all_configs(space)

    def launcher(cfg):
        grid = (size // cfg["BM"], size // cfg["BN"])
        kw = {k: cfg[k] for k in ("BM", "BN", "BK", "num_warps", "num_stages")}
        return lambda: mm[grid](*args, **kw)

    runs = {label(cfg): launcher(cfg) for cfg in configs}
    samples: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():  # compile everything first (not timed)
        fn()
    sync()
    for _ in range(rounds):  # interleaved rounds: drift hits every configuration alike
        for name, fn in runs.items():
            samples[name].append(do_bench(fn, warmup=50, rep=300, return_mode="median"))
    medians = {k: statistics.median(v) for k, v in samples.items()}
    best = min(medians, key=medians.__getitem__)
    return {"median_ms": medians, "best": best, "best_ms": medians[best]}


def child(mode: str, size: int, rounds: int) -> None:
    if mode == "triton":
        out = run_triton(size, SPACE)
    elif mode == "tunedsl":
        out = run_tunedsl(size, SPACE)
    else:
        out = run_exhaustive(size, SPACE, rounds)
    print("RESULT " + json.dumps(out))


def spawn(mode: str, size: int, rounds: int, tmp: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, mode, "triton"),
               TUNEDSL_CACHE_DIR=os.path.join(tmp, mode, "tunedsl"))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--size", str(size), "--rounds", str(rounds)],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(lines[-1][len("RESULT ") :])


def plumbing() -> None:
    """No GPU: run the tunedsl path under the interpreter on a tiny problem (API check)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("--plumbing needs TRITON_INTERPRET=1 set before Python starts")
    small = {"BM": [16], "BN": [16, 32], "BK": [16], "num_warps": [4], "num_stages": [2]}
    out = run_tunedsl(32, small, device="cpu")
    assert out["rel_err"] < 1e-2, out
    print("plumbing ok:", json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5, help="exhaustive timing rounds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plumbing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plumbing:
        return plumbing()
    if args.child:
        return child(args.child, args.size, args.rounds)
    if not torch.cuda.is_available():
        raise SystemExit("bench_cold_tune needs a CUDA GPU (try --plumbing without one)")
    with tempfile.TemporaryDirectory() as tmp:
        tri = spawn("triton", args.size, args.rounds, tmp)
        tds = spawn("tunedsl", args.size, args.rounds, tmp)
        ref = spawn("exhaustive", args.size, args.rounds, tmp)
    best_ms = ref["best_ms"]

    def quality(chosen: dict) -> float:
        return ref["median_ms"][label(chosen)] / best_ms

    n = len(all_configs(SPACE))
    print(f"cold tuning, {n}-config fp16 matmul {args.size}^3 on {torch.cuda.get_device_name()}"
          f" (triton {triton.__version__}, {os.cpu_count()} CPUs, compile workers "
          f"{os.environ.get('TUNEDSL_COMPILE_WORKERS', 'default')})")  # fmt: skip
    print(f"{'':<18}{'first call s':>13}{'chosen configuration':>32}{'vs best':>9}")
    for name, r in (("triton.autotune", tri), ("tunedsl", tds)):
        print(f"{name:<18}{r['first_call_s']:>13.2f}{label(r['chosen']):>32}"
              f"{(quality(r['chosen']) - 1) * 100:>8.1f}%")  # fmt: skip
    print(f"{'exhaustive best':<18}{'':>13}{ref['best']:>32}{best_ms:>8.4f}ms")
    ratio = tds["first_call_s"] / tri["first_call_s"]
    print(f"tunedsl / triton.autotune first call: {ratio:.2f} (target <= 0.25); "
          f"tunedsl choice {quality(tds['chosen']):.3f}x best (target <= 1.03)")  # fmt: skip
    if args.json:
        print(json.dumps({"triton": tri, "tunedsl": tds, "exhaustive": ref, "ratio": ratio}))


if __name__ == "__main__":
    main()
