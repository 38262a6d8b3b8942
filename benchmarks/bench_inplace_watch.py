"""What finding in-place writes costs a tuning (``backends/inplace.py``): target under 5%.

A cold tune of a vector add (an output kernel: the watch copies every tensor argument once,
compares twice, then restores nothing) is run ``--runs`` times with the watch on and off,
alternating, each under a fresh site name in a fresh cache directory. Reported: the median
tune wall time of each, their ratio, and the watch's own time (its copies and comparisons,
timed directly: wall, and its thread's CPU time) as a share of the tune with it on.

On a GPU the tensors live on the device; without one, run it under the interpreter:

    python benchmarks/bench_inplace_watch.py [--n 16777216] [--runs 7] [--json]
    TRITON_INTERPRET=1 python benchmarks/bench_inplace_watch.py --n 65536 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SPACE = {"TILE": [256, 512, 1024, 2048], "num_warps": [4, 8]}


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


class WatchClock:
    """Seconds spent inside the watch (its copies and comparisons): wall time, and the
    calling thread's CPU time (on a loaded machine the wall time includes waiting)."""

    def __init__(self) -> None:
        from tunedsl.backends import inplace

        self.seconds = 0.0
        self.cpu_seconds = 0.0
        cls = inplace.InPlaceWatch
        for name in ("__init__", "before_launch", "finish"):
            setattr(cls, name, self._timed(getattr(cls, name)))

    def _timed(self, fn):
        def timed(*args, **kwargs):
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.cpu_seconds += time.thread_time() - cpu

        return timed


def tune_once(n: int, device: str, name: str) -> float:
    from tunedsl import autotune_launch, cdiv
    from tunedsl.backends.triton import synchronize

    a, b = torch.randn(n, device=device), torch.randn(n, device=device)
    c = torch.empty_like(a)
    synchronize()
    start = time.perf_counter()
    autotune_launch(
        vadd,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.TILE),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.TILE},
        name=name,
    )
    synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="elements (default 2^24, 2^16 CPU)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if not interp and not torch.cuda.is_available():
        sys.exit("no GPU: run with TRITON_INTERPRET=1")
    device = "cpu" if interp else "cuda"
    n = opts.n or (1 << 16 if interp else 1 << 24)
    os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inplace-")
    os.environ.setdefault("TUNEDSL_QUIET", "1")

    from tunedsl.backends import inprocess

    clock = WatchClock()
    tune_once(n, device, "warm-up")  # imports, the interpreter's first run, compile caches
    times: dict[bool, list[float]] = {True: [], False: []}
    watch_s: list[float] = []
    watch_cpu_s: list[float] = []
    for i in range(opts.runs):
        for on in (True, False) if i % 2 == 0 else (False, True):
            inprocess.WATCH_IN_PLACE = on
            before, before_cpu = clock.seconds, clock.cpu_seconds
            times[on].append(tune_once(n, device, f"run-{i}-{on}"))
            if on:
                watch_s.append(clock.seconds - before)
                watch_cpu_s.append(clock.cpu_seconds - before_cpu)
    on_s, off_s = statistics.median(times[True]), statistics.median(times[False])
    share = statistics.median(w / t for w, t in zip(watch_s, times[True], strict=True))
    cpu_share = statistics.median(w / t for w, t in zip(watch_cpu_s, times[True], strict=True))
    result = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)",
        "n": n,
        "configurations": len(SPACE["TILE"]) * len(SPACE["num_warps"]),
        "runs": opts.runs,
        "tune_s_watch_on": round(on_s, 4),
        "tune_s_watch_off": round(off_s, 4),
        "ratio_on_off": round(on_s / off_s, 4),
        "watch_share_of_tune": round(share, 5),
        "watch_cpu_share_of_tune": round(cpu_share, 5),
    }
    if opts.json:
        print(json.dumps(result))
        return
    for k, v in result.items():
        print(f"{k:>24}: {v}")


if __name__ == "__main__":
    main()
