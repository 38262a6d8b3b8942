"""Per-call cost of a compiled model's step whose kernel is a plain DSL site, against the same
step with a raw Triton launch (which Inductor traces as a user-defined Triton kernel).

    python benchmarks/bench_compile_site.py              # on a GPU: 4096 fp32, 5 repeats
    python benchmarks/bench_compile_site.py --n 1048576  # a larger step

Rows (each a ``torch.compile(fullgraph=True)`` of ``(kernel(x, y) * 2).relu()``, Inductor):

    raw Triton          vadd[grid](x, y, out, n, TILE=1024) inside the compiled function
    DSL site            autotune(space=..., blocks=cdiv(n, $tile), vadd(...)): one
                        ``tunedsl::site_call`` operator whose body is the site's eager call
    DSL site (graphs)   the same under mode="reduce-overhead" (CUDA graphs: replays)
    raw (graphs)        the raw launch under mode="reduce-overhead"

Median of the repeats; the ratio column is per-call time / raw Triton per-call time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

DSL_SOURCE = b"""\
from tunedsl import autotune, cdiv
from bench_compile_site_kernels import vadd


def add(a, b, c, n):
    autotune(space=dict(tile=[256, 1024], num_warps=[2, 4]), blocks=cdiv(n, $tile),
             vadd(a, b, c, n, TILE=$tile))
"""

KERNELS = """\
import triton
import triton.language as tl


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import tempfile

    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from tunedsl.frontend.compile import compile_source

    tmp = Path(tempfile.mkdtemp(prefix="bench-compile-site-"))
    (tmp / "bench_compile_site_kernels.py").write_text(KERNELS)
    sys.path.insert(0, str(tmp))
    from bench_compile_site_kernels import vadd  # type: ignore[import-not-found]

    path = tmp / "bench_compile_site_dsl.py"
    path.write_bytes(DSL_SOURCE)
    module = types.ModuleType("bench_compile_site_dsl")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    exec(compile_source(DSL_SOURCE, str(path)), module.__dict__)

    def dsl_step(x: Any, y: Any) -> Any:
        out = torch.empty_like(x)
        module.add(x, y, out, x.numel())
        return (out * 2).relu()

    def raw_step(x: Any, y: Any) -> Any:
        out = torch.empty_like(x)
        n = x.numel()
        vadd[((n + 1023) // 1024,)](x, y, out, n, TILE=1024)
        return (out * 2).relu()

    x, y = torch.randn(args.n, device="cuda"), torch.randn(args.n, device="cuda")
    rows: dict[str, Any] = {
        "raw Triton": torch.compile(raw_step, fullgraph=True),
        "DSL site": torch.compile(dsl_step, fullgraph=True),
        "raw (graphs)": torch.compile(raw_step, fullgraph=True, mode="reduce-overhead"),
        "DSL site (graphs)": torch.compile(dsl_step, fullgraph=True, mode="reduce-overhead"),
    }
    for fn in rows.values():  # compile, tune, warm up, record graphs
        for _ in range(5):
            fn(x, y)
        torch.testing.assert_close(fn(x, y), ((x + y) * 2).relu())
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):  # interleaved repeats
        for name, fn in rows.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.calls):
                fn(x, y)
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) / args.calls * 1e6)
    raw = statistics.median(times["raw Triton"])
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | n={args.n}")
    print(f"{'row':<20} {'us/call':>10} {'ratio':>8}")
    for name, ts in times.items():
        median = statistics.median(ts)
        print(f"{name:<20} {median:>10.2f} {median / raw:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
