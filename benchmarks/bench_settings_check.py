"""What a per-call check of Triton's launch settings would cost the direct launch.

Triton's JIT keys its table of compiled kernels by the call's specialization and options,
and some of those options come from settings rather than from the call (Triton 3.6 to 3.9,
``JITFunction.run`` and the CUDA backend's ``parse_options``):

    plain attributes   the kernel's ``debug`` or ``knobs.runtime.debug``,
                       ``knobs.compilation.instrumentation_mode``,
                       ``knobs.runtime.add_stages_inspection_hook`` (3.9)
    environment-backed ``knobs.compilation.fpsan_homomorphic_casts`` (3.9),
                       ``knobs.runtime.override_arch``, ``knobs.language.default_fp_fusion``
                       and ``force_disable_fp_fusion`` (3.9) (each read is an ``os.getenv``)

The direct launch and the C fused launch keep the ``CompiledKernel`` of a key's first
launch and do not read these (docs/runtime.md, "The hot path and direct launch"). This
times reading them and comparing them with the first launch's, per call, as Python would
do it in ``Launcher.__call__``, beside the check the hot path already makes (the launch-hook
test) and an empty loop, so the cost can be set against a tuned call's overhead over
Triton's own launch (BENCHMARKS.md, "Per-call cost once tuned": 0.29 us for vadd on the
H100). No GPU is needed: nothing is launched.

    python benchmarks/bench_settings_check.py [--calls 1000000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any


def _kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def vadd(a, b, c, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)

    return vadd


def checks() -> dict[str, Callable[[], bool]]:
    """Each check as a closure over what it reads, True while nothing changed."""
    from triton import knobs

    from tunedsl.backends import compat

    jit_fn = _kernel()
    runtime, compilation, language = knobs.runtime, knobs.compilation, knobs.language
    has_stages = hasattr(runtime, "add_stages_inspection_hook")
    has_fpsan = hasattr(compilation, "fpsan_homomorphic_casts")
    has_force = hasattr(language, "force_disable_fp_fusion")  # 3.9

    def plain() -> tuple[Any, ...]:
        return (
            jit_fn.debug or runtime.debug,
            compilation.instrumentation_mode,
            runtime.add_stages_inspection_hook if has_stages else None,
        )

    def env_backed() -> tuple[Any, ...]:
        return (
            compilation.fpsan_homomorphic_casts if has_fpsan else None,
            runtime.override_arch,
            language.default_fp_fusion,
            language.force_disable_fp_fusion if has_force else None,
        )

    plain0, env0 = plain(), env_backed()
    launch_hooked = compat.launch_hooked

    return {
        "empty loop (for scale)": lambda: True,
        "launch-hook test (on the hot path now)": lambda: not launch_hooked(runtime),
        "plain attributes": lambda: plain() == plain0,
        "environment-backed knobs": lambda: env_backed() == env0,
        "both": lambda: plain() == plain0 and env_backed() == env0,
    }


def time_ns(fn: Callable[[], bool], calls: int) -> float:
    loop = range(calls)
    start = time.perf_counter_ns()
    for _ in loop:
        fn()
    return (time.perf_counter_ns() - start) / calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    import platform

    import triton

    found = checks()
    runs: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(args.repeats):  # interleaved: a slow moment of the host hits every row
        for name, fn in found.items():
            runs[name].append(time_ns(fn, args.calls))
    empty = statistics.median(runs["empty loop (for scale)"])
    print(f"Python {platform.python_version()}, Triton {triton.__version__}; "
          f"{args.calls:,} calls, median of {args.repeats} interleaved repeats")  # fmt: skip
    print(f"{'check':<42} {'ns a call':>10} {'over the empty loop':>20}")
    for name, times in runs.items():
        median = statistics.median(times)
        print(f"{name:<42} {median:>10.1f} {median - empty:>20.1f}")


if __name__ == "__main__":
    main()
