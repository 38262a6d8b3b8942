"""Warm start: the first call of a new process when a tuning result is already stored.

For each system, in fresh subprocesses with their own TRITON_CACHE_DIR and
TUNEDSL_CACHE_DIR:

1. a cold process tunes the 48-configuration fp16 matmul of
   ``shared/anchors/triton_autotune_baseline.py`` (2048^3) and stores its result
   (tunedsl: a record; triton.autotune: ``cache_results=True``);
2. a new process calls the same kernel once; we time that first call (to synchronize).

tunedsl's warm process must run no benchmark (its LaunchResult says ``source="disk"``)
and load only the chosen variant: from tunedsl's stored binary (no ``triton.compile``,
so no ``triton_key()`` hash of Triton's sources), else compiled by the JIT. The
``binary`` column says which. Target: at most half of triton.autotune's warm first call.

    python benchmarks/bench_warm_start.py                  # on a GPU
    TRITON_INTERPRET=1 python benchmarks/bench_warm_start.py --quick   # CPU: tunedsl only
    python benchmarks/bench_warm_start.py --profile 40     # + where tunedsl's warm call goes

``--profile N`` runs tunedsl's warm process a second time under cProfile and prints its
first call's N costliest functions (cumulative), imports included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

QUICK_SPACE = {"BM": [16, 32], "BN": [16, 32], "BK": [16], "num_warps": [4], "num_stages": [2]}


def child(system: str, quick: bool, profile: int = 0) -> None:
    """One process: build inputs, time the first call, print one JSON line."""
    import torch
    import triton
    from anchor_mm import MM_SPACE, mm

    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
    size = 64 if quick else 2048
    M = N = K = size
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    c = torch.empty(M, N, device=device, dtype=torch.float16)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    space = QUICK_SPACE if quick else MM_SPACE

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    sync()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    if system == "tunedsl":
        from tunedsl import autotune_launch

        res = autotune_launch(
            mm,
            space=space,
            grid=lambda cfg: (M // cfg.BM, N // cfg.BN),
            args=(a, b, c, M, N, K, *strides),
            kwargs=lambda cfg: {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK},
            name="bench_warm_start_mm",
        )
        from tunedsl.backends import triton_binaries

        source, chosen = res.source, str(res.config)
        stats = triton_binaries.stats
        binary = "loaded" if stats["loaded"] else "stored" if stats["stored"] else "compiled"
        binary = "-" if device == "cpu" else binary  # the interpreter compiles nothing
    else:
        configs = [
            triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
            for bm in space["BM"] for bn in space["BN"] for bk in space["BK"]
            for w in space["num_warps"] for s in space["num_stages"]
        ]  # fmt: skip
        kern = triton.autotune(configs=configs, key=["M", "N", "K"], cache_results=True)(mm)
        kern[lambda m: (M // m["BM"], N // m["BN"])](a, b, c, M, N, K, *strides)
        source, chosen, binary = "triton", str(kern.best_config), "-"
    sync()
    elapsed = time.perf_counter() - start
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(profile)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).norm() / ref.norm()).item()
    print(json.dumps({"system": system, "first_call_s": elapsed, "source": source,
                      "chosen": chosen, "rel_err": err, "binary": binary}))  # fmt: skip


def run_child(system: str, quick: bool, env: dict[str, str], profile: int = 0) -> dict:
    argv = [sys.executable, __file__, "--child", system] + (["--quick"] if quick else [])
    argv += ["--profile", str(profile)] if profile else []
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{system} child failed:\n{out.stderr[-4000:]}")
    if profile:
        print(f"cProfile of {system}'s warm first call (a third process):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small matmul, 4 configurations (CPU)")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N",
        help="profile tunedsl's warm first call once more; print its N costliest functions",
    )  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.quick, args.profile)
        return 0
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    systems = ["tunedsl"] if interp else ["tunedsl", "triton"]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="warm-start-") as tmp:
        for system in systems:
            env = dict(
                os.environ,
                TRITON_CACHE_DIR=os.path.join(tmp, system, "triton"),
                TUNEDSL_CACHE_DIR=os.path.join(tmp, system, "tunedsl"),
            )
            cold = run_child(system, args.quick, env)
            warm = run_child(system, args.quick, env)
            rows[system] = (cold, warm)
            if args.profile and system == "tunedsl":
                run_child(system, args.quick, env, args.profile)
    print(
        f"warm start: first call of a new process with a stored tuning result"
        f"{' (Triton interpreter, tunedsl only)' if interp else ''}"
    )
    print(f"{'system':<16} {'cold first call s':>18} {'warm first call s':>18}  "
          f"warm source   binary    chosen")  # fmt: skip
    for system, (cold, warm) in rows.items():
        print(f"{system:<16} {cold['first_call_s']:>18.3f} {warm['first_call_s']:>18.3f}  "
              f"{warm['source']:<12}  {warm['binary']:<8}  {warm['chosen']}")  # fmt: skip
    if "triton" in rows:
        ratio = rows["tunedsl"][1]["first_call_s"] / rows["triton"][1]["first_call_s"]
        print(f"tunedsl warm / triton.autotune warm: {ratio:.2f}x (target <= 0.5)")
    if rows["tunedsl"][1]["source"] != "disk":
        print("WARNING: tunedsl's warm process did not use the stored record", file=sys.stderr)
        return 1
    if not interp and rows["tunedsl"][1]["binary"] != "loaded":
        print(
            "WARNING: tunedsl's warm process compiled the chosen variant instead of loading "
            "its stored binary (no dist-info RECORD for Triton? TUNEDSL_SAFE=binaries?)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
