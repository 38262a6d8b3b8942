"""Rules on shapes never swept: how a rule's picks do against each shape's exhaustive best.

For each kernel family, every configuration is timed on every size (``do_bench``, median,
cold L2): the swept sizes (powers of two and midpoints) build the rule, and held-out sizes
(odd, never a power of two) are judged against their own measured best: every configuration
timed in 3 interleaved rounds, the best the lowest median. Side by side:

    rule              tunedsl's rule (model/rule_build.py), as `tunedsl rules build` makes it
    nearest key       the swept size nearest in log2 and its own best (the lookup vLLM ships)
    single best       the one configuration with the best geomean over the swept sizes
    exhaustive, once  each held-out size's best in the first round alone: what tuning that
                      size would pick, judged like the others (the floor the timing noise
                      sets: the lowest of noisy times is biased low)

Families: tutorial 03's matmul over M (two N, K pairs), a row softmax and a layer norm over the
row length. Then, with a real site: the cost of a miss a rule decides (new sizes, each a
miss), and CUDA graphs captured at 32 batch sizes none of which was swept (failures, tunes).

    python benchmarks/bench_rules.py                       # on a GPU, about 5 minutes
    python benchmarks/bench_rules.py --only matmul --json out.json
    TRITON_INTERPRET=1 python benchmarks/bench_rules.py --plumbing   # a CPU run of the plumbing
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
import triton
import triton.language as tl

from tunedsl.model.config import Config
from tunedsl.model.rule import Rule
from tunedsl.model.rule_build import SweptKey, build


def swept_sizes(lo: int, hi: int) -> list[int]:
    """Powers of two from lo to hi and the midpoints between them (1.5 x)."""
    out, p = [], lo
    while p <= hi:
        out.append(p)
        if p * 3 // 2 < hi:
            out.append(p * 3 // 2)
        p *= 2
    return sorted(set(out))


def held_out_sizes(lo: int, hi: int, count: int, swept: list[int]) -> list[int]:
    """``count`` odd sizes, log-spaced strictly inside (lo, hi), none of them swept."""
    out: list[int] = []
    for i in range(count):
        v = int(lo * (hi / lo) ** ((i + 0.5) / count)) | 1
        while v in swept or v in out or v & (v - 1) == 0:
            v += 2
        out.append(min(v, hi - 1))
    return out


# -- kernels ---------------------------------------------------------------------------------


@triton.jit
def softmax_rows(y, x, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * stride + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y + row * stride + cols, (e / tl.sum(e, axis=0)).to(y.dtype.element_ty), mask=cols < n)


@triton.jit
def layer_norm_rows(y, x, w, b, n, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    v = tl.load(x + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(v, axis=0) / n
    d = tl.where(mask, v - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    out = d * rstd * tl.load(w + cols, mask=mask) + tl.load(b + cols, mask=mask)
    tl.store(y + row * stride + cols, out.to(y.dtype.element_ty), mask=mask)


def matmul_family(n: int, k: int, device: str) -> tuple[list[Config], Callable]:
    from tutorial03_mm import TUTORIAL03_CONFIGS, mm_grouped

    configs = [Config(c) for c in TUTORIAL03_CONFIGS]
    b = torch.randn(k, n, device=device, dtype=torch.float16)

    def case(m: int) -> tuple[dict, Callable[[Config], Callable[[], Any]]]:
        a = torch.randn(m, k, device=device, dtype=torch.float16)
        c = torch.empty(m, n, device=device, dtype=torch.float16)
        readable = {
            "args": {
                "a": {"dtype": "float16", "shape": [m, k], "stride": "s1"},
                "b": {"dtype": "float16", "shape": [k, n], "stride": "s1"},
                "c": {"dtype": "float16", "shape": [m, n], "stride": "s1"},
                "M": "i16" if m % 16 == 0 else "i",
            }
        }

        def launcher(cfg: Config) -> Callable[[], Any]:
            grid = (triton.cdiv(m, cfg.BM) * triton.cdiv(n, cfg.BN),)
            fields = cfg.to_json()
            hints = {h: fields.pop(h) for h in ("num_warps", "num_stages") if h in fields}
            return lambda: mm_grouped[grid](
                a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1), **fields, **hints,
            )  # fmt: skip

        return readable, launcher

    return configs, case


def rows_family(kernel: str, rows: int, device: str) -> tuple[list[Config], Callable]:
    configs = [Config(num_warps=w, num_stages=s) for w in (1, 2, 4, 8, 16, 32) for s in (1, 2)]

    def case(n: int) -> tuple[dict, Callable[[Config], Callable[[], Any]]]:
        x = torch.randn(rows, n, device=device, dtype=torch.float16)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n)
        int_class = "i16" if n % 16 == 0 else "i"  # as the site's key has n and the stride
        readable = {
            "args": {
                "x": {"dtype": "float16", "shape": [rows, n], "stride": "s1"},
                "y": {"dtype": "float16", "shape": [rows, n], "stride": "s1"},
                "n": int_class,
                "stride": int_class,
                "BLOCK": {"constexpr": block},
            }
        }
        w = torch.randn(n, device=device, dtype=torch.float16)
        bias = torch.randn(n, device=device, dtype=torch.float16)

        def launcher(cfg: Config) -> Callable[[], Any]:
            hints = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
            if kernel == "softmax":
                return lambda: softmax_rows[(rows,)](y, x, n, x.stride(0), BLOCK=block, **hints)
            return lambda: layer_norm_rows[(rows,)](
                y, x, w, bias, n, x.stride(0), 1e-5, BLOCK=block, **hints
            )

        return readable, launcher

    return configs, case


# -- measuring and judging -------------------------------------------------------------------


def time_all(configs: list[Config], case: Callable, size: int, rep: int) -> tuple[dict, dict]:
    readable, launcher = case(size)
    times: dict[Config, float | None] = {}
    for cfg in configs:
        fn = launcher(cfg)
        try:
            fn()
            times[cfg] = _median_ms(fn, rep)
        except Exception as err:  # over the GPU's shared memory, or a resource limit
            if not isinstance(err, triton.runtime.errors.OutOfResources):
                print(f"  {cfg} at size {size}: {type(err).__name__}: {err}"[:300])
            times[cfg] = None
    return readable, times


def _median_ms(fn: Callable[[], Any], rep: int) -> float:
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return float(triton.testing.do_bench(fn, warmup=5, rep=rep, return_mode="median"))
    samples = []  # the interpreter (--plumbing): wall time of a few launches
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def held_out_rounds(
    configs: list[Config], case: Callable, sizes: list[int], rep: int, rounds: int
) -> tuple[list[SweptKey], list[SweptKey]]:
    """Every configuration on every held-out size in ``rounds`` interleaved rounds: each
    size judged by its configurations' medians over the rounds, and by the first round
    alone (what one exhaustive tune of that size would have seen)."""
    timed = [[time_all(configs, case, size, rep) for size in sizes] for _ in range(rounds)]
    medians, first = [], []
    for i in range(len(sizes)):
        readable = timed[0][i][0]
        per_round = [timed[r][i][1] for r in range(rounds)]
        times = {}
        for cfg in configs:
            samples = [t[cfg] for t in per_round]
            times[cfg] = None if None in samples else statistics.median(samples)  # type: ignore[type-var]
        medians.append(SweptKey(readable, times))
        first.append(SweptKey(readable, per_round[0]))
    return medians, first


def judge(
    swept: list[SweptKey], held: list[SweptKey], held_once: list[SweptKey] | None = None
) -> dict[str, dict[str, float]]:
    """Each picker's regret on the held-out sizes (their configurations' medians over the
    rounds). ``held_once``: the same sizes timed in one round; its best per size, judged on
    the medians, is what an exhaustive tune of each size scores (the timing noise's floor:
    the best of noisy times is itself biased low)."""
    built = build(swept)
    rule = Rule("bench", {}, None, None, {}, {}, built.configs, built.families, {})
    all_configs = sorted({c for k in swept for c in k.times}, key=str)

    def logm(k: SweptKey) -> list[float]:
        return [math.log2(v) for v in _sizes(k.readable)]

    def nearest_key(k: SweptKey) -> Config:
        near = min(
            swept, key=lambda s: sum((a - b) ** 2 for a, b in zip(logm(s), logm(k), strict=True))
        )
        return min((c for c, t in near.times.items() if t is not None), key=lambda c: near.times[c])  # type: ignore[arg-type, return-value]

    single = min(all_configs, key=lambda c: sum(math.log(k.regret(c) or 4.0) for k in swept))
    picks: dict[str, Callable[[SweptKey], Config]] = {
        "rule": lambda k: rule.decide(k.readable)[0],
        "nearest key": nearest_key,
        "single best": lambda k: single,
    }
    if held_once is not None:
        once = {id(k): min((c for c, t in o.times.items() if t is not None),
                           key=lambda c: o.times[c])  # type: ignore[arg-type, return-value]
                for k, o in zip(held, held_once, strict=True)}  # fmt: skip
        picks["exhaustive, once"] = lambda k: once[id(k)]
    out = {}
    for name, pick in picks.items():
        regrets = sorted(k.regret(pick(k)) or math.inf for k in held)
        out[name] = {
            "geomean": math.exp(statistics.fmean(math.log(r) for r in regrets)),
            "p95": regrets[min(len(regrets) - 1, math.ceil(0.95 * len(regrets)) - 1)],
            "max": regrets[-1],
        }
    out["rule"]["configs"] = len(built.configs)
    out["rule"]["loo_geomean"] = built.validation["geomean"]  # type: ignore[assignment]
    return out


def _sizes(readable: dict) -> list[int]:
    return [v["shape"][0] if "M" in readable["args"] else v["shape"][1]
            for k, v in sorted(readable["args"].items()) if k in ("a", "x")]  # fmt: skip


def family_rows(
    name: str,
    configs,
    case,
    sizes: tuple[list[int], list[int]],
    rep: int,
    odd: tuple[int, ...] = (),
    rounds: int = 3,
) -> dict:
    """``odd``: more swept sizes, not multiples of 16 (a row kernel's stride is its length:
    such rows load without vectors); the rule built without them is shown beside. The
    held-out sizes are timed in ``rounds`` interleaved rounds (``held_out_rounds``)."""
    swept, held = sizes
    t0 = time.perf_counter()
    swept_keys = [SweptKey(*time_all(configs, case, s, rep)) for s in swept]
    odd_keys = [SweptKey(*time_all(configs, case, s, rep)) for s in odd]
    held_keys, held_once = held_out_rounds(configs, case, held, rep, rounds)
    result = judge(swept_keys + odd_keys, held_keys, held_once)
    if odd_keys:
        result["rule, aligned"] = judge(swept_keys, held_keys)["rule"]
    # The timings themselves (--json): a rule builder can be judged again on them offline.
    result["timings"] = {  # type: ignore[assignment]
        part: [{"key": k.readable, "ms": {json.dumps(c.to_json(), sort_keys=True): t
                                          for c, t in k.times.items()}} for k in ks]
        for part, ks in (("swept", swept_keys + odd_keys), ("held_out", held_keys),
                         ("held_out_once", held_once))
    }  # fmt: skip
    print(f"\n{name}: {len(swept) + len(odd)} swept sizes ({len(odd)} not multiples of 16), "
          f"{len(held)} held out (judged on medians of {rounds} rounds), "
          f"{len(configs)} configurations, timed in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    print(f"  {'picker':<17} {'geomean':>8} {'p95':>7} {'max':>7}")
    for picker, r in result.items():
        if picker == "timings":
            continue
        print(f"  {picker:<17} {r['geomean']:>7.3f}x {r['p95']:>6.3f}x {r['max']:>6.3f}x")
    for picker in ("rule", "rule, aligned"):
        if picker in result:
            print(f"  {picker}: {result[picker]['configs']} configurations, leave-one-key-out "
                  f"geomean {result[picker]['loo_geomean']:.3f}x on its swept sizes")  # fmt: skip
    return result


# -- a real site: the miss a rule decides, and capture ----------------------------------------


DSL = """
from tunedsl import autotune, cdiv

def scale(x, y, n):
    return autotune(space=dict(tile=[128, 256, 512, 1024], num_warps=[2, 4, 8]),
                    blocks=cdiv(n, $tile), name="bench_rules_scale",
                    scaled(x, y, n, TILE=$tile))
"""


@triton.jit
def scaled(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def capture_sizes(count: int, swept: list[int], top: int = 512) -> list[int]:
    """``count`` batch sizes from 2 to ``top``, none of them swept, spread evenly in log
    space (where rounding makes two alike, the closest pair loses one)."""
    k, sizes = count, set()
    while len(sizes) < count:
        sizes = {round(2 * (top / 2) ** (i / (k - 1))) for i in range(k)} - set(swept)
        k += 1
    out = sorted(sizes)
    while len(out) > count:
        closest = min(range(1, len(out) - 1), key=lambda i: out[i] / out[i - 1])
        del out[closest]
    return out


def site_rows(
    device: str, captures: int, hidden: int = 4096, profile: str | None = None
) -> dict[str, Any]:
    """``profile``: write cProfile's statistics of the misses there (and print the top)."""
    from tunedsl.frontend.compile import compile_source
    from tunedsl.runtime import tuner
    from tunedsl.runtime.entry import Entry
    from tunedsl.store import rules as rule_store

    os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp()  # the sweep's own records only
    tunes: list[Any] = []
    real = tuner.tune
    tuner.tune = lambda req: (tunes.append(req), real(req))[1]  # count tunes
    ns: dict[str, Any] = {"scaled": scaled, "__name__": "bench_rules_site"}
    exec(compile_source(DSL, filename=__file__), ns)
    scale = ns["scale"]
    swept = [1, 3, 9, 27, 81, 243, 729]
    for b in swept:
        x = torch.randn(b, hidden, device=device)
        scale(x, torch.empty_like(x), x.numel())
    out = Path(tempfile.mkdtemp()) / "rules"
    from tunedsl.cli import main as cli

    assert cli(["rules", "build", "--site", "bench_rules_scale", "--out", str(out)]) == 0
    os.environ["TUNEDSL_RECORDS_PATH"] = str(out)
    os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp()
    rule_store.forget_loaded()
    ns["__tunedsl_site_0__"].clear()
    tuned_before = len(tunes)
    # The cost of a miss a rule decides: each call a size never seen (hits are timed beside).
    fresh = [b for b in range(2, 729) if b not in swept][:200]
    inputs = [torch.randn(b, hidden, device=device) for b in fresh]
    outs = [torch.empty_like(x) for x in inputs]
    if device == "cuda":
        torch.cuda.synchronize()
    # A miss is split where the site hands the new entry its first launch (Entry.launch; in
    # this loop every call is a miss): before it, the decision (key, record stores, rule,
    # entry, launcher); in it, the first launch (Triton's binder for the new key, the pick's
    # binary loaded or shared, the launch itself, asynchronous on a GPU).
    marks: list[int] = []
    real_launch = Entry.launch

    def marked_launch(entry: Any, *args: Any) -> None:
        marks.append(time.perf_counter_ns())
        real_launch(entry, *args)
        marks.append(time.perf_counter_ns())

    Entry.launch = marked_launch  # type: ignore[method-assign]
    sources, each_us, decision_us, launch_us = [], [], [], []
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    try:
        for x, y in zip(inputs, outs, strict=True):
            marks.clear()
            t1 = time.perf_counter_ns()
            sources.append(scale(x, y, x.numel()).source)
            t2 = time.perf_counter_ns()
            each_us.append((t2 - t1) / 1e3)
            if len(marks) == 2:
                decision_us.append((marks[0] - t1) / 1e3)
                launch_us.append((marks[1] - marks[0]) / 1e3)
    finally:
        Entry.launch = real_launch  # type: ignore[method-assign]
    miss_us = (time.perf_counter() - t0) / len(inputs) * 1e6
    if profiler is not None and profile:
        import pstats

        profiler.disable()
        profiler.dump_stats(profile)
        print(f"\nthe misses under cProfile (their times inflated by it): {profile}")
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    hits = []
    for _ in range(2):  # the first hit of a key builds its repeat check and fused launch
        t0 = time.perf_counter()
        for x, y in zip(inputs, outs, strict=True):
            scale(x, y, x.numel())
        hits.append((time.perf_counter() - t0) / len(inputs) * 1e6)
    hit_us, hit_again_us = hits
    for x, y in zip(inputs, outs, strict=True):
        torch.testing.assert_close(y, x * 2)
    row: dict[str, Any] = {
        "miss_us": miss_us,
        # The first miss of a process loads (or compiles and stores) the pick's binary; the
        # median is what a miss costs once that is done.
        "miss_first_us": each_us[0],
        "miss_median_us": statistics.median(each_us),
        # The median miss, split: call to the launcher's call, and the first launch.
        "miss_decision_median_us": statistics.median(decision_us[1:] or decision_us),
        "miss_first_launch_median_us": statistics.median(launch_us[1:] or launch_us),
        "hit_us": hit_us,  # each key's first hit
        "hit_again_us": hit_again_us,
        "misses_by_rule": sources.count("rule"),
        "tunes": len(tunes) - tuned_before,
    }
    print(f"\nsite: {len(inputs)} misses on sizes never swept: {row['misses_by_rule']} decided by "
          f"the rule, {row['tunes']} tuned; a miss {miss_us:.1f} us (median "
          f"{row['miss_median_us']:.1f} us: the decision {row['miss_decision_median_us']:.1f} us, "
          f"the first launch {row['miss_first_launch_median_us']:.1f} us; the first miss "
          f"{each_us[0]:.0f} us), then a first hit {hit_us:.1f} us, a hit {hit_again_us:.1f} us")  # fmt: skip
    if device == "cuda" and captures:
        sizes = capture_sizes(captures, swept)
        ns["__tunedsl_site_0__"].clear()  # each capture's key is a miss, as in a new process
        failures, before, by_rule = 0, len(tunes), 0
        for b in sizes:
            x = torch.randn(b, hidden, device=device)
            y = torch.empty_like(x)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    by_rule += scale(x, y, x.numel()).source == "rule"
                graph.replay()
                torch.cuda.synchronize()
                torch.testing.assert_close(y, x * 2)
            except Exception as err:
                failures += 1
                print(f"  capture at batch {b} failed: {type(err).__name__}: {err}")
        row.update(
            captures=len(sizes),
            capture_failures=failures,
            capture_tunes=len(tunes) - before,
            captures_decided_by_rule=by_rule,
        )
        print(f"capture: {len(sizes)} batch sizes from {sizes[0]} to {sizes[-1]}, none swept, "
              f"each a miss: {by_rule} decided by the rule, {failures} failures, "
              f"{row['capture_tunes']} tunes")  # fmt: skip
    tuner.tune = real
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only", choices=("matmul", "softmax", "layer_norm", "site"), action="append"
    )
    parser.add_argument("--held-out", type=int, default=20)
    parser.add_argument("--rep", type=int, default=40, help="do_bench rep, ms")
    parser.add_argument("--captures", type=int, default=32)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--plumbing", action="store_true", help="tiny sizes (a CPU check)")
    parser.add_argument("--profile", help="write cProfile's statistics of the site's misses here")
    args = parser.parse_args()
    device = (
        "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
    )
    if device == "cpu" and not args.plumbing:
        print("no GPU: run with TRITON_INTERPRET=1 --plumbing", file=sys.stderr)
        return 2
    only = set(args.only or ("matmul", "softmax", "layer_norm", "site"))
    print(f"bench_rules on {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}; "
          f"triton {triton.__version__}, torch {torch.__version__}")  # fmt: skip
    results: dict[str, Any] = {}
    small = args.plumbing
    held = 3 if small else args.held_out
    if "matmul" in only:
        pairs = [(64, 64)] if small else [(4096, 4096), (8192, 2048)]
        lo, hi = (16, 64) if small else (16, 8192)
        sw = swept_sizes(lo, hi)
        for n, k in pairs:
            configs, case = matmul_family(n, k, device)
            if small:
                configs = [c for c in configs if c.BM <= 64 and c.BN <= 64][:3] or configs[:2]
            results[f"matmul N={n} K={k}"] = family_rows(
                f"tutorial 03 matmul over M, N={n} K={k}", configs, case,
                (sw, held_out_sizes(lo, hi, held, sw)), args.rep,
            )  # fmt: skip
    for name in ("softmax", "layer_norm"):
        if name in only:
            lo, hi = (32, 128) if small else (64, 16384)
            sw = swept_sizes(lo, hi)
            configs, case = rows_family(name, 8 if small else 4096, device)
            if small:
                configs = configs[:2]
            # The held-out lengths are odd: sweep odd lengths too (one past each swept one).
            odd = [s + 1 for s in sw if s + 1 < hi]
            results[name] = family_rows(
                f"row {name} over the row length", configs, case,
                (sw, held_out_sizes(lo, hi, held, sw + odd)), args.rep, tuple(odd),
            )  # fmt: skip
    if "site" in only:
        # (--plumbing: short rows, or the interpreter's launches take minutes)
        results["site"] = site_rows(
            device, 0 if small else args.captures, 16 if small else 4096, args.profile
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
