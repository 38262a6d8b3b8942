"""Tuning on one GPU against every GPU of the host (``tunedsl.backends.multi_device``).

Spaces of the anchor's matmul (``anchor_mm.py``), each searched exhaustively by the engine's
driver through ``MultiDeviceMeasurer``, first with the caller's GPU alone, then with
``--devices`` GPUs (the host compiles every configuration once on all its cores while the
GPUs open the compiled ones; the leaders are raced on the caller's). Each run starts from an
empty Triton cache and a fresh kernel object, so compiling is counted as a user's first
tuning pays it. Printed: wall time, the choice, its time re-measured on the caller's GPU, the
ratio to one GPU (target: at most 0.6x, same choice), and where the time went: the host's
compile wall and CPU seconds, and each GPU's busy seconds (loading and opening).

    anchor-48   the anchor's 48 configurations, M = N = K = 4096, fp16
    large       about 1,100 configurations (BM, BN in 16..256, BK in 16..128, 2 to 8 warps,
                2 to 5 stages) less those whose pipelined tiles exceed the shared memory
    NAME@S      the space NAME searched under a budget of S seconds

    python benchmarks/bench_multi_gpu.py                      # on a host with >= 2 GPUs
    python benchmarks/bench_multi_gpu.py --spaces anchor-48,large@60,large --json out.json
    TRITON_INTERPRET=1 python benchmarks/bench_multi_gpu.py --smoke   # CPU: two interpreters
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchor_mm import MM_SPACE, mm

#: The large space's axes; ``fits`` drops tiles that do not fit in shared memory.
LARGE_SPACE: dict[str, list[int]] = {
    "BM": [16, 32, 64, 128, 256],
    "BN": [16, 32, 64, 128, 256],
    "BK": [16, 32, 64, 128],
    "num_warps": [2, 4, 8],
    "num_stages": [2, 3, 4, 5],
}
SMEM_BYTES = 227 * 1024  # an H100/H200 block's largest dynamic shared memory


def fits(c: dict[str, int], elem: int = 2) -> bool:
    """Tiles of A and B, one per pipeline stage, fit in shared memory (fp16)."""
    return (c["BM"] + c["BN"]) * c["BK"] * elem * c["num_stages"] <= SMEM_BYTES


def space_configs(name: str) -> list[dict[str, int]]:
    axes = MM_SPACE if name == "anchor-48" else LARGE_SPACE
    names = list(axes)
    every = [dict(zip(names, v, strict=True)) for v in itertools.product(*axes.values())]
    return every if name == "anchor-48" else [c for c in every if fits(c)]


def mm_request(size: int, configs: list[dict[str, int]], device: str) -> Any:
    """A TuneRequest for ``mm`` on size x size x size fp16 matrices, one variant a config."""
    import torch

    from tunedsl.model.config import Config
    from tunedsl.model.variant import Variant
    from tunedsl.runtime.tuner import TuneRequest

    dtype = torch.float16 if device != "cpu" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    c = torch.empty(size, size, device=device, dtype=dtype)
    variants = []
    for cfg in configs:
        tiles = {k: cfg[k] for k in ("BM", "BN", "BK")}
        opts = {k: cfg[k] for k in ("num_warps", "num_stages")}
        args = (a, b, c, size, size, size, *a.stride(), *b.stride(), *c.stride())
        grid = (size // cfg["BM"], size // cfg["BN"])
        variants.append(Variant(Config(**cfg), args, tiles, grid, opts))
    return TuneRequest(kernel=mm, variants=variants)


def tune_once(
    req: Any, devices: list[int], chunk: int | None = None, budget_s: float | None = None
) -> dict[str, Any]:
    """One exhaustive search on ``devices`` from an empty Triton cache: wall time and choice."""
    import dataclasses

    import triton

    from tunedsl.backends import isolated, multi_device
    from tunedsl.engine.driver import run_search
    from tunedsl.engine.search import make_strategy
    from tunedsl.model.space import ListSpace

    isolated.shutdown_workers()  # fresh workers read the fresh TRITON_CACHE_DIR
    multi_device.shutdown_workers()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
    # The host stage compiles in this process, whose JIT table still holds the previous
    # run's kernels: empty it (the kernel stays the module's, sent to the workers by
    # reference, as a user's kernel is), or else use a fresh kernel object.
    caches = getattr(req.kernel, "device_caches", None)
    if caches is not None:
        caches.clear()
    else:
        req = dataclasses.replace(req, kernel=triton.jit(getattr(req.kernel, "fn", req.kernel)))
    start = time.perf_counter()
    m = multi_device.MultiDeviceMeasurer(req, devices, caller=devices[0], chunk=chunk)
    try:
        configs = [v.config for v in req.variants]
        out = run_search(ListSpace(configs), make_strategy("exhaustive"), m, budget_s=budget_s)
        wall = time.perf_counter() - start
        chosen_ms = statistics.median(m.sample(out.chosen, 20))  # on the caller's GPU
    finally:
        m.close()
    ok = sum(1 for o in out.observations if o.status == "ok")
    return {
        "devices": devices,
        "wall_s": round(wall, 2),
        "chosen": dict(out.chosen.items()),
        "chosen_ms": round(chosen_ms, 4),
        "ok": ok,
        "configs": len(configs),
        "measured": out.measured,
        "exhausted": out.exhausted,
        "final_on_caller": m.final_from is not None
        and all(slot == 0 for _, slot in m.trace[m.final_from :]),
        "budget_s": budget_s,
        "compile_wall_s": round(m.stats.compile_wall_s, 2),
        "compile_cpu_s": round(m.stats.compile_cpu_s, 2),
        "measure_s": [round(x, 2) for x in m.stats.measure_s],
        "host_compiles": sum(m.compiles.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--spaces",
        default="anchor-48,large@60,large",
        help="NAME or NAME@BUDGET_S, comma-separated",
    )
    parser.add_argument("--devices", type=int, default=2, help="GPUs of the second run")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument(
        "--budget", type=float, help="seconds per search of a space named without @BUDGET"
    )
    parser.add_argument("--two-first", action="store_true", help="run the GPUs' run first")
    parser.add_argument("--smoke", action="store_true", help="CPU: 8 configs, two interpreters")
    args = parser.parse_args()
    import torch

    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"
        device, size = "cpu", 64
        tiny = [
            {"BM": 16, "BN": bn, "BK": 16, "num_warps": w, "num_stages": 2}
            for bn in (16, 32)
            for w in (1, 2, 4, 8)
        ]
        plans = {"smoke-8": (tiny, args.budget)}
        runs = [[0], [0, 0]]
    else:
        count = torch.cuda.device_count()
        if count < 2:
            print(f"needs at least 2 GPUs, found {count}", file=sys.stderr)
            return 2
        device, size = "cuda", args.size
        plans = {}
        for spec in args.spaces.split(","):
            name, _, budget = spec.partition("@")
            plans[spec] = (space_configs(name), float(budget) if budget else args.budget)
        runs = [[0], list(range(min(args.devices, count)))]
        if args.two_first:
            runs.reverse()
        print(f"{torch.cuda.get_device_name(0)} x {count}, M = N = K = {size}", flush=True)
    rows = []
    for name, (configs, budget) in plans.items():
        req = mm_request(size, configs, device)
        for devices in runs:
            row = {"space": name, **tune_once(req, devices, budget_s=budget)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print(f"{'space':14} {'configs':>7} {'measured':>8} {'GPUs':>4} {'wall s':>8} {'x one':>6} "
          f"{'compile s':>9} {'cpu s':>7} {'GPU busy s':>12} {'chosen ms':>9}  same  chosen")  # fmt: skip
    for row in rows:
        one = next(r for r in rows if r["space"] == row["space"] and len(r["devices"]) == 1)
        ratio = row["wall_s"] / one["wall_s"]
        same = "yes" if row["chosen"] == one["chosen"] else "no"
        chosen = " ".join(f"{k}={v}" for k, v in row["chosen"].items())
        busy = "/".join(f"{x:.1f}" for x in row["measure_s"])
        print(f"{row['space']:14} {row['configs']:>7} {row['measured']:>8} {len(row['devices']):>4} "
              f"{row['wall_s']:>8.1f} {ratio:>6.2f} {row['compile_wall_s']:>9.1f} "
              f"{row['compile_cpu_s']:>7.1f} {busy:>12} {row['chosen_ms']:>9.4f}  {same:4}  "
              f"{chosen}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
