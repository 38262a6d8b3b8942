"""`tunedsl cache` at scale: import, list, export and clear N records, each as a real command.

Writes a bundle of N realistic records (about 1.7 KB of JSON each, like a small site's),
then runs ``tunedsl cache import``, ``ls``, ``export`` and ``clear --all`` in a fresh cache,
one subprocess each, and prints each one's wall time, CPU time and peak resident memory
(from ``wait4``: the child's own). The machine's load average is printed too:
on a shared machine the times vary with it.

    python benchmarks/bench_record_bundles.py [--n 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def record_json(i: int) -> dict:
    """A valid record with four configurations (what `tunedsl cache export` writes)."""
    from tunedsl.store.records import SCHEMA_VERSION

    results = [
        {"config": {"BM": 16 * (c + 1), "BN": 64, "num_warps": 4}, "status": "ok",
         "median_ms": 0.1 + c / 100, "spread": 0.01, "reps": 50, "min_ms": 0.09,
         "options": {"num_warps": 4, "num_stages": 2}, "constexprs": {"BM": 16 * (c + 1)},
         "round": 1}
        for c in range(4)
    ]  # fmt: skip
    return {
        "schema": SCHEMA_VERSION, "site": f"/srv/app/kernels/mm.py:matmul:mm_kernel#{i}",
        "digest": f"{i:064x}", "key": {"args": {"a": {"shape": [i % 4096, 2048],
        "dtype": "float16"}, "b": {"shape": [2048, 2048], "dtype": "float16"}}},
        "chosen": results[0]["config"], "results": results,
        "kernel": {"module": "mm", "qualname": "mm_kernel", "file": "/srv/app/kernels/mm.py",
                   "source_hash": "0" * 64},
        "signature": {"a": "*fp16", "b": "*fp16", "c": "*fp16", "M": "i32"},
        "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "capability": [9, 0]},
        "versions": {"triton": "3.9.0", "torch": "2.13.0", "tunedsl": "0.2.0"},
        "context": {"hints": {}, "env": {}, "timer": "cuda-event"},
        "tuning_s": 12.5, "timestamp": 1.7e9 + i, "effort": "default",
        "location": f"/srv/app/kernels/mm.py:{40 + i % 100}:5",
        "strategy": "auto:exhaustive", "seed": 0, "budget_s": None,
    }  # fmt: skip


def write_bundle(path: Path, n: int) -> int:
    from tunedsl.cli.bundle import HEADER

    with open(path, "w") as fh:
        fh.write(HEADER)
        for i in range(n):
            fh.write(json.dumps(record_json(i), separators=(",", ":")) + "\n")
    return path.stat().st_size


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds (user + system), peak RSS in MiB and the exit status of one
    command. On a loaded machine the CPU time is the steadier number."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        print(f"  {' '.join(argv[3:])} failed ({proc.returncode}): {err[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000, help="number of records")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="tunedsl-bench-bundles-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(work / "cache"), TUNEDSL_QUIET="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    bundle = work / "bundle.jsonl"
    size = write_bundle(bundle, args.n)
    print(f"{args.n} records, bundle {size / 1e6:.1f} MB; load average {os.getloadavg()}")
    cli = [sys.executable, "-m", "tunedsl", "cache"]
    steps = [
        ("import", [*cli, "import", str(bundle)]),
        ("ls", [*cli, "ls"]),
        ("export", [*cli, "export", str(work / "out.jsonl")]),
        ("clear --all", [*cli, "clear", "--all"]),
    ]
    print(f"{'step':<12} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
    for name, argv in steps:
        wall, cpu, rss, code = timed(argv, env)
        print(f"{name:<12} {wall:8.1f} {cpu:8.1f} {rss:13.0f}" + ("" if code == 0 else "  FAILED"))
    print(f"load average after: {os.getloadavg()}")
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
