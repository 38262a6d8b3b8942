"""Per-call launch overhead once tuned: tunedsl's hot path against a raw Triton launch.

Side by side in one run, interleaved repeats, median of the repeats:

    raw             vadd[grid](a, b, c, n, BLOCK=1024)
    tunedsl DSL     autotune(space=..., blocks=cdiv(n, $tile), vadd(a, b, c, n, BLOCK=$tile))
    tunedsl site    the same site called directly, as expanded code calls it
    autotune_launch the plain-Python API (pays for its own argument handling)
    triton.autotune a cache hit of triton.autotune over the same 4 configurations
    torch.add       torch.add(a, b, out=c), for scale

The tuned launchers all use the same 4-configuration space (BLOCK 256/1024 x 2/4 warps);
the ratio column is per-call time / raw per-call time (target for tunedsl: <= 1.05).

    python benchmarks/bench_launch.py                 # on a GPU: 4096 fp32, 20k calls, 5 repeats
    TRITON_INTERPRET=1 python benchmarks/bench_launch.py --quick   # on a CPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv
from tunedsl.frontend.compile import compile_source
from tunedsl.runtime import dsl


@triton.jit
def vadd(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


SPACE = {"tile": [256, 1024], "num_warps": [2, 4]}

DSL_SOURCE = """
from tunedsl import autotune, cdiv

def add(a, b, c, n):
    return autotune(space=dict(tile=[256, 1024], num_warps=[2, 4]), blocks=cdiv(n, $tile),
                    vadd(a, b, c, n, BLOCK=$tile))
"""


def build(n: int, device: str) -> dict[str, Callable[[], object]]:
    a = torch.randn(n, device=device)
    b = torch.randn(n, device=device)
    c = torch.empty_like(a)
    grid = (triton.cdiv(n, 1024),)

    namespace: dict[str, object] = {"vadd": vadd, "__name__": "bench_launch_dsl"}
    exec(compile_source(DSL_SOURCE, filename=__file__), namespace)
    dsl_add = namespace["add"]

    site = dsl.make_site(
        filename=__file__,
        line=1,
        col=0,
        kernel_text="vadd",
        space=SPACE,
        static_hints={},
        options={"name": "bench_launch_site"},
        placeholders=(),
        has_key=False,
    )

    def bind(cfg):  # what the expander generates for blocks=cdiv(n, $tile), BLOCK=$tile
        return (), {"BLOCK": cfg.tile}, (cdiv(n, cfg.tile),)

    fns: dict[str, Callable[[], object]] = {
        "raw vadd[grid]": lambda: vadd[grid](a, b, c, n, BLOCK=1024),
        "tunedsl DSL": lambda: dsl_add(a, b, c, n),  # type: ignore[operator]
        "tunedsl site": lambda: site(vadd, (a, b, c, n), {}, bind, None, None),
        "autotune_launch": lambda: autotune_launch(
            vadd,
            space=SPACE,
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(a, b, c, n),
            kwargs=lambda cfg: {"BLOCK": cfg.tile},
            name="bench_launch_api",
        ),
        "torch.add(out=)": lambda: torch.add(a, b, out=c),
    }
    if device == "cuda":  # triton.autotune needs an active GPU driver ("0 active drivers")
        tuned = triton.autotune(
            configs=[triton.Config({"BLOCK": t}, num_warps=w) for t in (256, 1024) for w in (2, 4)],
            key=["n"],
        )(vadd)
        fns["triton.autotune hit"] = lambda: tuned[lambda m: (triton.cdiv(n, m["BLOCK"]),)](
            a, b, c, n
        )
    return fns


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="few calls (for a CPU under TRITON_INTERPRET=1)"
    )
    parser.add_argument(
        "--calls", type=int, default=None, help="calls per repeat (default 20000; --quick 50)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    args = parser.parse_args()
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cuda" if torch.cuda.is_available() and not interp else "cpu"
    if device == "cpu" and not interp:
        print("no GPU: run with TRITON_INTERPRET=1 (and --quick)", file=sys.stderr)
        return 2
    calls = args.calls or (50 if args.quick else 20000)
    fns = build(args.n, device)
    for fn in fns.values():  # tune every tuned launcher, compile, warm up
        for _ in range(3 if args.quick else 200):
            fn()
    sync(device)
    per_call: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.repeats):
        for name, fn in fns.items():  # interleaved: drift hits every row alike
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync(device)
            per_call[name].append((time.perf_counter() - start) / calls * 1e6)
    medians = {name: statistics.median(v) for name, v in per_call.items()}
    raw = medians["raw vadd[grid]"]
    print(
        f"launch overhead: vadd {args.n} fp32 on {device}"
        f"{' (Triton interpreter: real launches on the CPU, not a GPU figure)' if interp else ''}; "
        f"triton {triton.__version__}, torch {torch.__version__}; "
        f"{calls} calls x median of {args.repeats}"
    )
    print(f"{'launcher':<22} {'us/call':>10} {'vs raw':>8}")
    for name, us in medians.items():
        print(f"{name:<22} {us:>10.2f} {us / raw:>7.3f}x")
    if args.json:
        print(
            json.dumps(
                {"device": device, "interpreter": interp, "calls": calls, "us_per_call": medians}
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
