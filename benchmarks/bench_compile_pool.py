"""Speed-up of tunedsl's compile pool over a serial compile (cross-compiled cubins, no GPU).

Compiles the 48 configurations of the anchor's fp16 matmul (``/work/shared/anchors``) for
``--target`` (default cuda:90), each way in a fresh process with an empty Triton cache
(imports done before the clock starts): serially; on tunedsl's thread pool
(``compile_stream``); on a pool of spawned processes, counting their start-up (what a
one-shot tuning with process workers would pay: each imports Triton and gets the kernel
by pickle); on a pre-started, pre-imported process pool (the best case for processes); on tunedsl's
forked workers (``TUNEDSL_COMPILE_PROCESSES=on``: one fork of this process, counted);
then the thread pool again on the now-warm cache.

    python benchmarks/bench_compile_pool.py [--workers N] [--configs 48] [--target cuda:90]

Prints a table; ``--json`` adds one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import triton
from anchor_mm import all_configs, mm


def configs(n: int) -> list[dict[str, int]]:
    return all_configs()[:n]


def _args() -> tuple:
    import torch

    a = torch.empty(2048, 2048, dtype=torch.float16)
    return (a, a, a, 2048, 2048, 2048, 2048, 1, 2048, 1, 2048, 1)


def compile_one(cfg: dict[str, int], target: str) -> str:
    from tunedsl.backends.triton_compile import compile_variant

    kwargs = {k: cfg[k] for k in ("BM", "BN", "BK")}
    options = {k: cfg[k] for k in ("num_warps", "num_stages")}
    return compile_variant(mm, _args(), kwargs, options, target=target).hash


def _warm_imports() -> None:
    import torch  # noqa: F401  (imports are not what we measure)

    from tunedsl.backends import (
        compile_pool,  # noqa: F401
        triton_compile,  # noqa: F401
    )


def _cpu_s() -> float:
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_mode(mode: str, n: int, workers: int, target: str) -> dict[str, object]:
    cfgs = configs(n)
    _warm_imports()
    pool_ready = None
    if mode == "processes-prestarted":
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool_ready = ProcessPoolExecutor(
            workers, mp_context=mp.get_context("spawn"), initializer=_warm_imports
        )
        list(pool_ready.map(time.sleep, [0.5] * workers))  # every worker started and warm
    cpu0 = _cpu_s()
    start = time.perf_counter()
    failed = 0
    if pool_ready is not None:
        with pool_ready as ex:
            futures = [ex.submit(compile_one, c, target) for c in cfgs]
            failed = sum(f.exception() is not None for f in futures)
    elif mode in ("serial", "threads", "threads-warm"):
        from tunedsl.backends.compile_pool import CompileJob, compile_stream

        jobs = [CompileJob(c, lambda c=c: compile_one(c, target)) for c in cfgs]
        pool = 1 if mode == "serial" else workers
        failed = sum(isinstance(r, BaseException) for _, r in compile_stream(jobs, workers=pool))
    elif mode == "forked":  # tunedsl's forked workers (TUNEDSL_COMPILE_PROCESSES=on)
        from tunedsl.backends.compile_pool import CompileJob, compile_stream
        from tunedsl.backends.process_compile import variant_compiler

        os.environ["TUNEDSL_COMPILE_PROCESSES"] = "on"
        compile_v = variant_compiler(mm, len(cfgs), target=target, workers=workers)

        def forked_one(cfg: dict[str, int]) -> str:
            kwargs = {k: cfg[k] for k in ("BM", "BN", "BK")}
            options = {k: cfg[k] for k in ("num_warps", "num_stages")}
            return compile_v(_args(), kwargs, options).hash

        jobs = [CompileJob(c, lambda c=c: forked_one(c)) for c in cfgs]
        failed = sum(isinstance(r, BaseException) for _, r in compile_stream(jobs, workers=workers))
    elif mode == "processes":
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            futures = [ex.submit(compile_one, c, target) for c in cfgs]
            failed = sum(f.exception() is not None for f in futures)
    else:
        raise SystemExit(f"unknown mode {mode}")
    wall = time.perf_counter() - start
    return {"mode": mode, "configs": n, "workers": 1 if mode == "serial" else workers,
            "wall_s": round(wall, 3), "cpu_s": round(_cpu_s() - cpu0, 3),
            "failed": failed}  # fmt: skip


def gil_probe(target: str, n: int = 6) -> None:
    """Does each compile stage release the GIL? A Python thread spins while we compile;
    its progress during a stage that holds the GIL is ~0, during one that releases it
    about what it gets during ``ptxas`` (a subprocess: certainly released)."""
    import bisect
    import threading

    from triton.backends.nvidia import compiler as nv

    _warm_imports()
    triton.knobs.compilation.always_compile = True
    spans: dict[str, list[tuple[float, float]]] = {}
    for name in ("make_ttir", "make_ttgir", "make_llir", "make_ptx", "make_cubin"):
        raw = nv.CUDABackend.__dict__[name]
        orig = getattr(nv.CUDABackend, name)

        def timed(*a, _orig=orig, _name=name, **k):
            t0 = time.perf_counter()
            try:
                return _orig(*a, **k)
            finally:
                spans.setdefault(_name, []).append((t0, time.perf_counter()))

        setattr(
            nv.CUDABackend, name, staticmethod(timed) if isinstance(raw, staticmethod) else timed
        )
    compile_one(configs(1)[0], target)  # warm up, not probed
    spans.clear()
    stamps: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            if i % 2000 == 0:
                stamps.append(time.perf_counter())

    spinner = threading.Thread(target=spin)
    spinner.start()
    for cfg in configs(n + 1)[1:]:
        compile_one(cfg, target)
    stop.set()
    spinner.join()

    def progress(a: float, b: float) -> float:  # share of [a, b] with stamps < 5 ms apart
        pts = [a, *stamps[bisect.bisect_left(stamps, a) : bisect.bisect_right(stamps, b)], b]
        return sum(y - x for x, y in itertools.pairwise(pts) if y - x < 0.005) / (b - a)

    print(f"GIL probe, {n} compiles for {target}: a spinning Python thread's progress per stage")
    print(f"{'stage':<12}{'seconds':>9}{'progress':>10}")
    for name, sp in spans.items():
        total = sum(b - a for a, b in sp)
        share = sum(progress(a, b) * (b - a) for a, b in sp) / total
        print(f"{name:<12}{total:>9.2f}{share * 100:>9.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--configs", type=int, default=48)
    parser.add_argument("--target", default="cuda:90")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--mode", help=argparse.SUPPRESS)  # child process
    parser.add_argument("--gil-probe", action="store_true", help="which stages release the GIL")
    args = parser.parse_args()
    if args.gil_probe:
        return gil_probe(args.target)
    if args.mode:
        print(json.dumps(run_mode(args.mode, args.configs, args.workers, args.target)))
        return
    rows = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for mode, cache in [("serial", "s"), ("threads", "t"), ("forked", "f"),
                            ("processes", "p"), ("processes-prestarted", "q"),
                            ("threads-warm", "t")]:  # fmt: skip
            env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, cache),
                       TUNEDSL_CACHE_DIR=os.path.join(tmp, "tunedsl-" + cache),
                       TRITON_DEFAULT_FP_FUSION=os.environ.get("TRITON_DEFAULT_FP_FUSION", "1"))  # fmt: skip
            env.pop("TRITON_INTERPRET", None)
            out = subprocess.run(
                [sys.executable, __file__, "--mode", mode, "--configs", str(args.configs),
                 "--workers", str(args.workers), "--target", args.target],
                env=env, capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            rows.append(json.loads(out.strip().splitlines()[-1]))
    serial = rows[0]["wall_s"]
    print(f"compile {args.configs} matmul configurations for {args.target} "
          f"(triton {triton.__version__}, {len(os.sched_getaffinity(0))} CPUs)")  # fmt: skip
    print(f"load average before: {load0:.1f}, after: {os.getloadavg()[0]:.1f} "
          "(a busy machine makes wall times noisy; cpu s is the work done)")  # fmt: skip
    print(f"{'mode':<22}{'workers':>8}{'wall s':>9}{'cpu s':>8}{'speed-up':>10}{'failed':>8}")
    for r in rows:
        speedup = serial / r["wall_s"] if r["wall_s"] else float("inf")
        print(f"{r['mode']:<22}{r['workers']:>8}{r['wall_s']:>9.2f}{r['cpu_s']:>8.2f}"
              f"{speedup:>9.2f}x{r['failed']:>8}")  # fmt: skip
    if args.json:
        for r in rows:
            print(json.dumps({"triton": triton.__version__, "target": args.target, **r}))


if __name__ == "__main__":
    main()
