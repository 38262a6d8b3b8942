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

The floor (GPU only): ``floor: CompiledKernel.run`` calls the compiled kernel's
launcher with every argument precomputed (grid, stream, function, packed metadata, the
arguments), the least any Python launch can cost; ``floor + stream lookup`` also asks the
driver for the current stream per call, as every real launch must. The ``vs floor+stream``
column is the target (tunedsl DSL <= 1.25x). ``--kernel mm`` (or ``both``, the GPU default)
adds the same rows for the anchor's 12-argument matmul (``anchor_mm.mm``, 512^3 fp16).

Where does the DSL call spend its time over the floor? Profile one row on the GPU:

    py-spy record --rate 20000 --native --format speedscope -o dsl.json -- \
        python benchmarks/bench_launch.py --only "tunedsl DSL" --calls 200000 --repeats 1
    python -m cProfile -s tottime benchmarks/bench_launch.py --only "tunedsl DSL" \
        --calls 100000 --repeats 1 | head -40      # per-function totals (inflated by cProfile)

and compare with ``--only "floor + stream lookup"``. The ``fused launch off`` rows time the
same call through the site's generic path (``TUNEDSL_SAFE=fused``, or no C extension). The
DSL call's generic steps, in order: the expanded call (args tuple, kwargs dict, the bind lambda); ``Site.__call__``: the call key
(per tensor: dtype, shape, stride(), data_ptr() % 16), one dict lookup of that tuple;
``bind(cfg)`` (a dict and the grid tuple); ``Launcher.__call__``: the dyn-kwargs
comparison, the launch-hook check, ``get_current_device()``, the ``CompiledKernel`` lookup,
``get_current_stream(device)``, then the floor's ``run``. The ``part:`` rows time those
steps one at a time, side by side with the rest (a profile by parts), and the ``repeat
check off`` rows the same DSL call building its full call key every call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

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

# The same site, its space an instance's own: read on every call and keyed by its value,
# so the call takes the generic path (docs/runtime.md, "Modes").
DSL_SPACE_PER_CALL = """
from tunedsl import autotune, cdiv

class Add:
    def __init__(self):
        self.space = dict(tile=[256, 1024], num_warps=[2, 4])

    def __call__(self, a, b, c, n):
        return autotune(space=self.space, blocks=cdiv(n, $tile), vadd(a, b, c, n, BLOCK=$tile))
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

    # The same DSL site with the repeat check off (TUNEDSL_SAFE=repeat is read when a
    # site first sees its kernel): the call key is built on every call, as before 0.2.
    namespace_off: dict[str, object] = {"vadd": vadd, "__name__": "bench_launch_dsl_off"}
    exec(compile_source(DSL_SOURCE, filename=__file__ + ":off"), namespace_off)
    dsl_add_off = namespace_off["add"]
    with _env("TUNEDSL_SAFE", "repeat"):
        dsl_add_off(a, b, c, n)  # type: ignore[operator]
    # ... and with the C fused launch off (TUNEDSL_SAFE=fused is read at a key's first
    # hit): the generic path, its repeat check, then the entry's launcher.
    namespace_unfused: dict[str, object] = {"vadd": vadd, "__name__": "bench_launch_unfused"}
    exec(compile_source(DSL_SOURCE, filename=__file__ + ":unfused"), namespace_unfused)
    dsl_add_unfused = namespace_unfused["add"]
    with _env("TUNEDSL_SAFE", "fused"):
        for _ in range(3):
            dsl_add_unfused(a, b, c, n)  # type: ignore[operator]
    namespace_per_call: dict[str, object] = {"vadd": vadd, "__name__": "bench_launch_per_call"}
    exec(compile_source(DSL_SPACE_PER_CALL, filename=__file__ + ":per-call"), namespace_per_call)
    dsl_add_per_call = namespace_per_call["Add"]()  # type: ignore[operator]
    sync(device)

    fns: dict[str, Callable[[], object]] = {
        "raw vadd[grid]": lambda: vadd[grid](a, b, c, n, BLOCK=1024),
        "tunedsl DSL": lambda: dsl_add(a, b, c, n),  # type: ignore[operator]
        "tunedsl DSL, repeat check off": lambda: dsl_add_off(a, b, c, n),  # type: ignore[operator]
        "tunedsl DSL, fused launch off": lambda: dsl_add_unfused(a, b, c, n),  # type: ignore[operator]
        "tunedsl DSL, space read per call": lambda: dsl_add_per_call(a, b, c, n),
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
    fns.update(parts(namespace["__tunedsl_site_0__"], (a, b, c, n), bind, device == "cuda"))
    if device == "cuda":  # triton.autotune needs an active GPU driver ("0 active drivers")
        tuned = triton.autotune(
            configs=[triton.Config({"BLOCK": t}, num_warps=w) for t in (256, 1024) for w in (2, 4)],
            key=["n"],
        )(vadd)
        fns["triton.autotune hit"] = lambda: tuned[lambda m: (triton.cdiv(n, m["BLOCK"]),)](
            a, b, c, n
        )
    return fns


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def parts(
    site: Any, args: tuple[object, ...], bind: Callable[[Any], Any], fused: bool
) -> dict[str, Callable[[], object]]:
    """The DSL call's steps timed one by one (a profile by parts; each row is one step
    alone, so a row's time is that step's cost). The site's internals are read at the
    first call, once the warm-up has decided the key."""
    state: dict[str, Any] = {}

    def internals() -> dict[str, Any]:
        if not state:
            key = site._key_fn(args, {}, None)
            entry = site._table[key]
            _holes, dyn, grid = bind(entry.config)
            state.update(
                key_fn=site._key_fn,
                table=site._table,
                entry=entry,
                cfg=entry.config,
                dyn=dyn,
                grid=grid,
                repeat=entry.repeat or (lambda a, k: None),
                fused=entry.fused or (lambda k, a, kw, b: None),
            )
        return state

    def shaped(kernel: object, a: object, k: object, b: object, key: object, lazy: object) -> None:
        return None

    def expansion() -> object:  # the expanded call's own work: a lambda, a tuple, a dict
        n = args[3]
        return shaped(vadd, args, {}, lambda cfg: ((), {"BLOCK": cfg.tile}, (n,)), None, None)

    rows: dict[str, Callable[[], object]] = {
        "part: expanded call, empty site": expansion,
        "part: call key + table lookup": lambda: (s := internals())["table"].get(
            s["key_fn"](args, {}, None)
        ),
        "part: repeat check": lambda: internals()["repeat"](args, {}),
        "part: bind(cfg)": lambda: bind(internals()["cfg"]),
        "part: launcher (incl. launch)": lambda: (s := internals())["entry"].launcher(
            s["grid"], args, {}, s["dyn"], ()
        ),
    }
    if fused:  # the repeat check, bind and the launch in one C call (GPU only)
        rows["part: fused launch (incl. launch)"] = lambda: internals()["fused"](
            vadd, args, {}, bind
        )
    return rows


def floor_fns(
    kernel: object, grid: tuple[int, ...], params: tuple[object, ...], options: dict[str, object]
) -> dict[str, Callable[[], object]]:
    """The floor rows: ``CompiledKernel.run`` with every argument precomputed (GPU only).
    ``params`` are all the kernel's parameters in order (constexprs included), ``options``
    the launch options (num_warps, ...)."""
    from triton.runtime import driver

    names = list(kernel.arg_names)  # type: ignore[attr-defined]
    constexprs = {p.name for p in kernel.params if p.is_constexpr}  # type: ignore[attr-defined]
    positional = [v for n, v in zip(names, params, strict=True) if n not in constexprs]
    keywords = {n: v for n, v in zip(names, params, strict=True) if n in constexprs}
    compiled = kernel[grid](*positional, **keywords, **options)  # type: ignore[index]
    if hasattr(compiled, "result"):
        compiled = compiled.result()
    run, function, packed = compiled.run, compiled.function, compiled.packed_metadata
    device = driver.active.get_current_device()
    get_stream = driver.active.get_current_stream
    stream = get_stream(device)
    gx, gy, gz = (*grid, 1, 1)[:3]
    addresses = tuple(p.data_ptr() if isinstance(p, torch.Tensor) else p for p in params)
    return {
        "floor: CompiledKernel.run": lambda: run(
            gx, gy, gz, stream, function, packed, None, None, None, *params
        ),
        "floor + stream lookup": lambda: run(
            gx, gy, gz, get_stream(device), function, packed, None, None, None, *params
        ),
        # The launcher also takes a pointer as an int (the device address), and then skips
        # the tensor's data_ptr() and the driver's pointer query: tunedsl's fused launch
        # passes the addresses it read for its alignment check. For scale, not the target.
        "floor + stream, pointers as ints": lambda: run(
            gx, gy, gz, get_stream(device), function, packed, None, None, None, *addresses
        ),
        # Below the launcher's Python __call__: the C launch it ends in, as tunedsl's direct
        # launch calls it where compat knows the launcher's form. For scale, not the target.
        "floor + stream, ints, C launch": c_launch(compiled, gx, gy, gz, device, addresses),
    }


def c_launch(
    compiled: Any, gx: int, gy: int, gz: int, device: int, args: tuple[object, ...]
) -> Callable[[], object]:
    from triton.runtime import driver

    from tunedsl.backends import compat

    parts = compat.direct_launch_parts(compiled)
    assert parts is not None
    run, middle, get_stream = parts.run, parts.middle, driver.active.get_current_stream
    print(f"# C launch: {'yes' if run is not compiled.run else 'no (Python __call__)'}")
    if parts.packs_args:
        return lambda: run(gx, gy, gz, get_stream(device), *middle, args)
    return lambda: run(gx, gy, gz, get_stream(device), *middle, *args)


def _dsl_variant(
    source: str, name: str, kernels: dict[str, object], label: str
) -> Callable[..., object]:
    """The DSL function ``name`` of ``source``, at a site of its own (a file name of its own)."""
    namespace: dict[str, object] = {**kernels, "__name__": f"bench_launch_{name}_{label}"}
    exec(compile_source(source, filename=f"{__file__}:{label}"), namespace)
    return namespace[name]  # type: ignore[return-value]


MM_DSL_SOURCE = """
from tunedsl import autotune, cdiv

def mm_call(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn):
    return autotune(space=dict(BM=[64, 128], BN=[64], BK=[32], num_warps=[4]),
                    blocks=(cdiv(M, $BM), cdiv(N, $BN)),
                    mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM=$BM, BN=$BN, BK=$BK))
"""
# The strides are passed in, computed once, as the raw and floor rows have them: the rows
# then differ only by what each launcher does.


def build_mm(size: int, device: str) -> dict[str, Callable[[], object]]:
    """The 12-argument matmul launch (plus 3 constexprs): raw, DSL, floor rows."""
    from anchor_mm import mm

    dtype = torch.float16 if device == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    c = torch.empty(size, size, device=device, dtype=torch.float16)
    namespace: dict[str, object] = {"mm": mm, "__name__": "bench_launch_mm_dsl"}
    exec(compile_source(MM_DSL_SOURCE, filename=__file__), namespace)
    mm_call = namespace["mm_call"]
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    namespace_off: dict[str, object] = {"mm": mm, "__name__": "bench_launch_mm_dsl_off"}
    exec(compile_source(MM_DSL_SOURCE, filename=__file__ + ":off"), namespace_off)
    mm_call_off = namespace_off["mm_call"]
    with _env("TUNEDSL_SAFE", "repeat"):
        mm_call_off(a, b, c, size, size, size, *strides)  # type: ignore[operator]
    namespace_unfused: dict[str, object] = {"mm": mm, "__name__": "bench_launch_mm_unfused"}
    exec(compile_source(MM_DSL_SOURCE, filename=__file__ + ":unfused"), namespace_unfused)
    mm_call_unfused = namespace_unfused["mm_call"]
    with _env("TUNEDSL_SAFE", "fused"):
        for _ in range(3):
            mm_call_unfused(a, b, c, size, size, size, *strides)  # type: ignore[operator]
    grid = (triton.cdiv(size, 64), triton.cdiv(size, 64))
    fns: dict[str, Callable[[], object]] = {
        "mm raw mm[grid]": lambda: mm[grid](
            a, b, c, size, size, size, *strides, BM=64, BN=64, BK=32, num_warps=4
        ),
        "mm tunedsl DSL": lambda: mm_call(a, b, c, size, size, size, *strides),  # type: ignore[operator]
        "mm tunedsl DSL, repeat check off": lambda: mm_call_off(  # type: ignore[operator]
            a, b, c, size, size, size, *strides
        ),
        "mm tunedsl DSL, fused launch off": lambda: mm_call_unfused(  # type: ignore[operator]
            a, b, c, size, size, size, *strides
        ),
    }
    if device == "cuda":
        params = (a, b, c, size, size, size, *strides, 64, 64, 32)
        for name, fn in floor_fns(mm, grid, params, {"num_warps": 4}).items():
            fns["mm " + name] = fn
    return fns


@triton.jit
def softmax_rows(y, x, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * stride + offs, mask=offs < n, other=-float("inf"))
    e = tl.exp(v - tl.max(v, 0))
    tl.store(y + row * stride + offs, e / tl.sum(e, 0), mask=offs < n)


SOFTMAX_DSL_SOURCE = """
import triton
from tunedsl import autotune

def softmax(y, x):
    rows, n = x.shape
    return autotune(space=dict(num_warps=[2, 4, 8]), blocks=rows,
                    softmax_rows(y, x, x.stride(0), n, BLOCK=triton.next_power_of_2(n)))
"""
# A keyword argument computed on every call from the arguments (not from the configuration):
# the form of the row softmax and layer norm that real code takes.


def build_softmax(rows: int, cols: int, device: str) -> dict[str, Callable[[], object]]:
    """The row softmax, whose BLOCK is computed per call: raw, DSL, triton.autotune, floor."""
    x = torch.randn(rows, cols, device=device)
    y = torch.empty_like(x)
    sm = _dsl_variant(SOFTMAX_DSL_SOURCE, "softmax", {"softmax_rows": softmax_rows}, "softmax")
    sm_unfused = _dsl_variant(
        SOFTMAX_DSL_SOURCE, "softmax", {"softmax_rows": softmax_rows}, "softmax_unfused"
    )
    with _env("TUNEDSL_SAFE", "fused"):
        for _ in range(3):
            sm_unfused(y, x)

    def raw() -> object:
        r, n = x.shape
        return softmax_rows[(r,)](y, x, x.stride(0), n, BLOCK=triton.next_power_of_2(n))

    fns: dict[str, Callable[[], object]] = {
        "sm raw softmax[grid]": raw,
        "sm tunedsl DSL": lambda: sm(y, x),
        "sm tunedsl DSL, fused launch off": lambda: sm_unfused(y, x),
    }
    if device == "cuda":
        tuned = triton.autotune(
            configs=[triton.Config({}, num_warps=w) for w in (2, 4, 8)], key=["n"]
        )(softmax_rows)

        def autotuned() -> object:
            r, n = x.shape
            return tuned[(r,)](y, x, x.stride(0), n, BLOCK=triton.next_power_of_2(n))

        fns["sm triton.autotune hit"] = autotuned
        params = (y, x, x.stride(0), cols, triton.next_power_of_2(cols))
        for name, fn in floor_fns(softmax_rows, (rows,), params, {"num_warps": 4}).items():
            fns["sm " + name] = fn
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
    parser.add_argument(
        "--kernel",
        choices=("vadd", "mm", "softmax", "both", "all"),
        default=None,
        help="which launches: both = vadd and mm, all = vadd, mm and the row softmax "
        "(default: all on a GPU, vadd under the interpreter)",
    )
    parser.add_argument(
        "--only", action="append", default=None, help="run only this row (repeatable)"
    )
    parser.add_argument("--mm-size", type=int, default=512)
    args = parser.parse_args()
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cuda" if torch.cuda.is_available() and not interp else "cpu"
    if device == "cpu" and not interp:
        print("no GPU: run with TRITON_INTERPRET=1 (and --quick)", file=sys.stderr)
        return 2
    calls = args.calls or (50 if args.quick else 20000)
    kernel = args.kernel or ("all" if device == "cuda" else "vadd")
    fns: dict[str, Callable[[], object]] = {}
    if kernel in ("vadd", "both", "all"):
        fns.update(build(args.n, device))
        if device == "cuda":
            a = torch.randn(args.n, device=device)
            b, c = torch.randn_like(a), torch.empty_like(a)
            grid = (triton.cdiv(args.n, 1024),)
            fns.update(floor_fns(vadd, grid, (a, b, c, args.n, 1024), {}))
    if kernel in ("mm", "both", "all"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        fns.update(build_mm(args.mm_size if device == "cuda" else 128, device))
    if kernel in ("softmax", "all"):
        fns.update(build_softmax(*((4096, 1000) if device == "cuda" else (8, 100)), device))
    if args.only:
        missing = [name for name in args.only if name not in fns]
        if missing:
            print(f"--only: no row {missing}; rows: {list(fns)}", file=sys.stderr)
            return 2
        fns = {name: fns[name] for name in args.only}
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
    raw = medians.get("raw vadd[grid]") or next(iter(medians.values()))
    floors = {
        "": medians.get("floor + stream lookup"),
        "mm ": medians.get("mm floor + stream lookup"),
        "sm ": medians.get("sm floor + stream lookup"),
    }
    raws = {
        "": raw,
        "mm ": medians.get("mm raw mm[grid]") or raw,
        "sm ": medians.get("sm raw softmax[grid]") or raw,
    }
    print(
        f"launch overhead: vadd {args.n} fp32 on {device}"
        f"{' (Triton interpreter: real launches on the CPU, not a GPU figure)' if interp else ''}; "
        f"triton {triton.__version__}, torch {torch.__version__}; "
        f"{calls} calls x median of {args.repeats}"
    )
    print(f"{'launcher':<30} {'us/call':>10} {'vs raw':>8} {'vs floor+stream':>16}")
    for name, us in medians.items():
        group = name[:3] if name[:3] in ("mm ", "sm ") else ""
        floor = floors[group]
        versus = f"{us / floor:>15.3f}x" if floor else f"{'-':>16}"
        print(f"{name:<30} {us:>10.2f} {us / raws[group]:>7.3f}x {versus}")
    if args.json:
        print(
            json.dumps(
                {"device": device, "interpreter": interp, "calls": calls, "us_per_call": medians}
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
