"""What ``isolate=True`` costs: worker start, copying the inputs, and each request's round trip.

Measured side by side in one process (``tunedsl.backends.isolated``):

    worker start + setup   a fresh worker: Python, torch and Triton imports, unpickling the
                           kernel and the copied inputs (paid once per worker; a crash or a
                           hang pays it again)
    copy inputs (pack)     the parent's side of copying every tensor argument's storage
                           (device -> host -> pickle), per tuning, for --mb MiB of inputs
    setup (warm worker)    sending a new tuning's kernel and inputs to a running worker
    sample round trip      one ``sample(config, 1)`` request: pipe, pickle, one launch
    in-process sample      the same launch timed in this process, for scale

    python benchmarks/bench_isolate.py                  # on a GPU
    TRITON_INTERPRET=1 python benchmarks/bench_isolate.py --mb 1   # on a CPU
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

from tunedsl.backends import graph_timing, isolated
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant
from tunedsl.runtime.tuner import TuneRequest


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


def timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=64.0, help="MiB per input tensor (3 tensors)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cuda" if torch.cuda.is_available() and not interp else "cpu"
    if device == "cpu" and not interp:
        print("no GPU: run with TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    n = int(args.mb * 2**20 / 4)
    a = torch.randn(n, device=device)
    b, c = torch.randn_like(a), torch.empty_like(a)
    tile = 1024
    variant = Variant(Config(tile=tile), (a, b, c, n), {"TILE": tile}, (triton.cdiv(n, tile),), {})
    req = TuneRequest(kernel=vadd, variants=[variant])

    rows: dict[str, float] = {}
    rows["copy inputs (pack)"] = timed(lambda: isolated.pack_inputs([variant]), args.repeats)

    def cold() -> None:
        isolated.shutdown_workers()
        m = isolated.IsolatedMeasurer(req, "events")
        m.sample(variant.config, 1)
        m.close()

    rows["worker start + setup + 1 sample"] = timed(cold, max(1, args.repeats // 2))
    measurer = isolated.IsolatedMeasurer(req, "events")
    measurer.sample(variant.config, 1)

    # A new tuning on the warm worker: pickling and sending the kernel and inputs.
    rows["setup (warm worker)"] = timed(
        lambda: isolated.IsolatedMeasurer(req, "events"), args.repeats
    )
    measurer = isolated.IsolatedMeasurer(req, "events")
    rows["sample round trip (1 rep)"] = timed(
        lambda: measurer.sample(variant.config, 1), args.repeats * 4
    )
    timer = graph_timing.make_timer("events")
    run = lambda: vadd[(triton.cdiv(n, tile),)](a, b, c, n, TILE=tile)  # noqa: E731
    run()
    rows["in-process sample (1 rep)"] = timed(
        lambda: timer.sample(run, lambda: None, 1), args.repeats * 4
    )
    measurer.close()
    isolated.shutdown_workers()
    print(
        f"isolate=True costs: 3 x {args.mb:g} MiB fp32 inputs on {device}"
        f"{' (Triton interpreter)' if interp else ''}; median of {args.repeats}"
    )
    for name, ms in rows.items():
        print(f"{name:<36} {ms:>10.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
