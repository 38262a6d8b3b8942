"""A process's next keys: tuning new sizes of a kernel whose variants it compiled (GPU).

Tutorial 03's 16 configurations (5 of them over an H100's shared memory) at sizes of one
Triton specialization (every dimension a multiple of 16), called in turn in one process;
each tuner in its own fresh process with empty caches:

* ``triton``: ``triton.autotune`` keyed on M, N, K (a new size benchmarks again, its
  variants already compiled in the process);
* ``tunedsl``: ``autotune_launch`` of one site;
* ``tunedsl-forgetting``: the same, but forgetting after each size which compiles its
  workers stopped over shared memory (in memory and in the cache's ``stopped/``), as
  tunedsl did before it remembered them;
* ``tunedsl-hashing``: the same, but hashing Triton's sources in each process instead of
  taking the key an earlier process kept (``backends/triton_key_cache.py``), as before.

The first size is the cold call; the next ones compile nothing that fits the GPU. Then each
row runs again in a next process with the first one's caches, at other sizes of the same
specialization (``--next-shapes``): Triton's cache holds every variant that fits, as after
``tunedsl precompile``. Prints each call's seconds, the ratio to ``triton.autotune``'s in
the same position, and the rows' choices.

    python benchmarks/bench_next_key.py [--shapes 4096,4096,4096 4096,4096,2048 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton
from bench_cold_tune import SPACES, Shape, constexprs, label, parse_shape, problem, sync

ROWS = ("triton", "tunedsl-forgetting", "tunedsl-hashing", "tunedsl")
DEFAULT_SHAPES = ["4096,4096,4096", "4096,4096,2048", "2048,4096,4096", "8192,4096,1024"]
DEFAULT_NEXT_SHAPES = ["4096,4096,3072", "3072,4096,4096"]


def forget() -> None:
    """Forget the stopped compiles, in memory and in the cache (the code before)."""
    import shutil

    from tunedsl.backends import stopped_compiles
    from tunedsl.store import paths

    stopped_compiles._known.clear()
    shutil.rmtree(paths.stopped_compiles_dir(), ignore_errors=True)


def child(row: str, shapes: list[Shape]) -> dict:
    space = SPACES["tutorial03"]
    calls, chosen = [], []
    if row == "tunedsl-forgetting":
        forget()
    if row == "tunedsl-hashing":  # the process before Triton's key was kept
        from tunedsl.backends import triton_key_cache

        triton_key_cache.use_stored = lambda: False
        triton_key_cache.store = lambda: None
    if row == "triton":
        configs = [
            triton.Config(constexprs(c), num_warps=c["num_warps"], num_stages=c["num_stages"])
            for c in space.configs
        ]
        kern = triton.autotune(configs=configs, key=["M", "N", "K"])(space.kernel)
    for shape in shapes:
        *_, args = problem(shape, "cuda")
        sync()
        start = time.perf_counter()
        if row == "triton":
            kern[lambda meta, shape=shape: space.grid(shape, meta)](*args)
            best = kern.best_config
            pick = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
        else:
            from tunedsl import autotune_launch

            launch = autotune_launch(
                space.kernel, space=space.tunedsl_space, args=args, name="next-key",
                grid=lambda cfg, shape=shape: space.grid(shape, cfg.as_dict()),
                kwargs=lambda cfg: constexprs(cfg.as_dict()),
            )  # fmt: skip
            pick = {k: launch.config[k] for k in space.configs[0]}
        sync()
        calls.append(time.perf_counter() - start)
        chosen.append(label(pick))
        if row == "tunedsl-forgetting":
            forget()
    out: dict = {"calls_s": calls, "chosen": chosen}
    if row != "triton":
        from tunedsl.backends import process_compile

        out["stats"] = dict(process_compile.stats)
    return out


def spawn(row: str, shapes: list[str], tmp: str) -> dict:
    """``row`` over ``shapes`` in a fresh process with the row's caches under ``tmp``."""
    env = dict(
        os.environ,
        TRITON_CACHE_DIR=os.path.join(tmp, row, "triton"),
        TUNEDSL_CACHE_DIR=os.path.join(tmp, row, "tunedsl"),
    )
    cmd = [sys.executable, __file__, "--child", row, "--shapes", *shapes]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{row} failed:\n{proc.stdout}\n{proc.stderr}")
    result: dict = json.loads(lines[-1][len("RESULT ") :])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES, help="M,N,K each")
    parser.add_argument(
        "--next-shapes", nargs="+", default=DEFAULT_NEXT_SHAPES,
        help="M,N,K each: the next process's sizes (one specialization with --shapes)",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the rows")
    parser.add_argument("--child", choices=ROWS, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    shapes = [parse_shape(s) for s in ns.shapes]
    if ns.child:
        print("RESULT " + json.dumps(child(ns.child, shapes)))
        return
    if not torch.cuda.is_available():
        raise SystemExit("bench_next_key needs a CUDA GPU")
    print(f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPUs; torch {torch.__version__}, "
          f"triton {triton.__version__}; tutorial 03's 16 configurations")  # fmt: skip
    for r in range(ns.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            first = {row: spawn(row, ns.shapes, tmp) for row in ROWS}
            then = {row: spawn(row, ns.next_shapes, tmp) for row in ROWS}
        for what, shapes_run, results in (
            ("first process", ns.shapes, first),
            ("next process", ns.next_shapes, then),
        ):
            print(f"round {r + 1}, {what}: " + ", ".join(shapes_run))
            base = results["triton"]["calls_s"]
            for row in ROWS:
                cells = [
                    f"{s:.2f} s" + ("" if row == "triton" else f" {s / b:.3f}x")
                    for s, b in zip(results[row]["calls_s"], base, strict=True)
                ]
                print(f"  {row:<20}" + "".join(f"{c:>16}" for c in cells))
            for row in ROWS:
                print(f"  {row} chose: {results[row]['chosen']}; {results[row].get('stats', '')}")


if __name__ == "__main__":
    main()
