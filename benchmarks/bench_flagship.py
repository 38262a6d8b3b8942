"""Flagship kernels on the GPU: the gallery's persistent TMA matmul and fused attention,
tuned cold by tunedsl and by ``triton.autotune`` on the same space, beside cuBLAS and SDPA.

Rows (``--full``; the default leaves out the two skinny matmul shapes to fit 9 minutes):

* matmul, fp16 and bf16: 4096^3, 8192^3, 512x8192x8192, 8192x512x8192 (M x N x K);
* attention forward, fp16, B4 H32 N4096: head dim 64 and 128, full and causal.

The kernels, spaces, prunes and tuned calls are the gallery's own (``examples/
persistent_matmul.py``, ``examples/fused_attention.py``), imported as modules. The optional
features (warp specialization, 2-CTA clusters) are probed once, here, by each example's own
``--probe`` run; both tuners then get the same space.

Each tuner runs in its own process with empty caches (``TRITON_CACHE_DIR``,
``TUNEDSL_CACHE_DIR``), one process per group of rows: a dtype of the matmul, a head dim of
attention. The group's first row is the cold first call; a later row's first call reuses
what the process already has, as in a program that calls the kernel at several shapes
(matmul shapes that are all multiples of 16 share their compiled kernels; attention's full
and causal variants are different kernels, so each compiles). In every row:

* ``first call``: wall time of the first call, to synchronization (tunedsl: the DSL site;
  ``triton.autotune``: its decorator over the same configurations, with the same prune);
* ``TFLOP/s``: the tuned call re-timed with ``triton.testing.do_bench`` (median, cold L2),
  in ``--rounds`` rounds interleaved with the reference (``torch.matmul``: cuBLAS;
  ``scaled_dot_product_attention``), in the tunedsl process;
* attention only, ``best``: every configuration that survives the prune, re-timed in
  ``--rounds`` interleaved rounds in the tunedsl process after tuning; the gap of each
  tuner's choice to the best, and the best's own spread over the rounds.

It prints one table at the end, with whatever rows finished within ``--budget`` seconds.

    python benchmarks/bench_flagship.py            # two matmul shapes, within --budget (510 s)
    python benchmarks/bench_flagship.py --full     # all four matmul shapes
    TRITON_INTERPRET=1 python benchmarks/bench_flagship.py --plumbing   # no GPU: tiny rows
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flagship_rows import ATTENTION, EXAMPLES, MATMUL, child_main, label

MATMUL_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (512, 8192, 8192), (8192, 512, 8192)]
QUICK_MATMUL_SHAPES = MATMUL_SHAPES[:2]
ATTENTION_SIZE = (4, 32, 4096)  # batch, heads, sequence
HEAD_DIMS = (64, 128)
# --plumbing (the interpreter): shapes the CPU spaces tile, in seconds.
PLUMBING_MATMUL_SHAPES = [(72, 48, 40), (64, 32, 32)]
PLUMBING_ATTENTION_SIZE = (1, 2, 64)
#: A group is not started with fewer seconds than this left of the budget.
MIN_GROUP_S = 45


# -- the parent: probe, spawn, tabulate ------------------------------------------------------


def probe_features(example: str) -> list[str]:
    """Run the example's own ``--probe``; the features it found to work on this GPU."""
    cmd = [sys.executable, "-m", "tunedsl", "run", str(EXAMPLES / f"{example}.py"), "--probe"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        print(f"[probe {example}] hung: no optional feature", file=sys.stderr)
        return []
    found = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "feature":
            print(f"[probe {example}] {line}", file=sys.stderr)
            if parts[2] == "yes":
                found.append(parts[1])
    return found


def spawn(args: list[str], tmp: str, tag: str, timeout: float) -> tuple[list[dict], str]:
    """Run a child in its own session with empty caches; its rows, and a note if it did not
    finish (the rows it printed before still count)."""
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, tag, "triton"),
               TUNEDSL_CACHE_DIR=os.path.join(tmp, tag, "tunedsl"))  # fmt: skip
    cmd = [sys.executable, __file__, *args]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    note = ""
    try:
        stdout, stderr = proc.communicate(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and its compile workers
        stdout, stderr = proc.communicate()
        note = f"{tag}: stopped at the budget ({timeout:.0f} s)"
    rows = [json.loads(line[4:]) for line in stdout.splitlines() if line.startswith("ROW ")]
    if proc.returncode not in (0, None) and not note:
        tail = " | ".join(stderr.strip().splitlines()[-3:])[:400]
        note = f"{tag}: exit {proc.returncode}: {tail}"
    return rows, note


def groups(ns: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(name, child arguments) of each group, in the order they run."""
    if ns.plumbing:
        shapes, size, dtypes = PLUMBING_MATMUL_SHAPES, PLUMBING_ATTENTION_SIZE, ["float16"]
    else:
        shapes = MATMUL_SHAPES if ns.full else QUICK_MATMUL_SHAPES
        size, dtypes = ATTENTION_SIZE, ["float16", "bfloat16"]
    out = []
    for dtype in dtypes:
        out.append((f"matmul {dtype}", ["--kernel", "matmul", "--dtype", dtype,
                                        "--shapes", json.dumps(shapes)]))  # fmt: skip
    for head_dim in HEAD_DIMS:
        out.append((f"attention d{head_dim}", ["--kernel", "attention", "--head-dim",
                                               str(head_dim), "--size", json.dumps(size)]))  # fmt: skip
    return out


def fmt_tflops(row: dict | None) -> str:
    if not row or not row.get("ours_ms"):
        return "-"
    return f"{row['flops'] / row['ours_ms'] / 1e9:.0f}"


def table(results: dict[str, dict[str, list[dict]]], notes: list[str], header: str) -> list[str]:
    cols = ("row", "tunedsl TFLOP/s", "ref TFLOP/s", "vs ref", "tunedsl 1st s",
            "autotune 1st s", "ratio", "autotune TFLOP/s", "gap to best", "tunedsl's choice")  # fmt: skip
    lines = [header, "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    matmul_ratios = []
    for name, by_tuner in results.items():
        ours_rows, theirs_rows = by_tuner.get("tunedsl", []), by_tuner.get("triton", [])
        count = max(len(ours_rows), len(theirs_rows))
        for i in range(count):
            ours = ours_rows[i] if i < len(ours_rows) else None
            theirs = theirs_rows[i] if i < len(theirs_rows) else None
            any_row = ours or theirs or {}
            if "shape" in any_row:
                what = f"{name} {'x'.join(map(str, any_row['shape']))}"
            else:
                what = f"{name} {'causal' if any_row.get('causal') else 'full'}"
            what += " (cold)" if i == 0 else ""
            ref = "-"
            vs = "-"
            if ours:
                ref = f"{ours['flops'] / ours['ref_ms'] / 1e9:.0f}"
                ratio = ours["ref_ms"] / ours["ours_ms"]
                vs = f"{ratio:.3f}x"
                if ours.get("flash_ms"):  # attention: also SDPA's FlashAttention-2 backend
                    ref += f" (FA2 {ours['flops'] / ours['flash_ms'] / 1e9:.0f})"
                    vs += f" (FA2 {ours['flash_ms'] / ours['ours_ms']:.3f}x)"
                if "shape" in ours:
                    matmul_ratios.append(ratio)
            first_ours = f"{ours['first_call_s']:.2f}" if ours else "-"
            first_theirs = f"{theirs['first_call_s']:.2f}" if theirs else "-"
            first_ratio = (
                f"{ours['first_call_s'] / theirs['first_call_s']:.3f}" if ours and theirs else "-"
            )
            gap = "-"
            ex_ = (ours or {}).get("exhaustive")
            if ex_ and ex_["best_ms"]:
                parts = []
                for row in (ours, theirs):
                    if row is None:
                        parts.append("-")
                        continue
                    ms = ex_["median_ms"].get(label(row["chosen"]))
                    parts.append(f"{(ms / ex_['best_ms'] - 1) * 100:.1f}%" if ms else "n/a")
                gap = " / ".join(parts) + f" (best's spread {ex_['best_spread'] * 100:.1f}%)"
            chosen = label(ours["chosen"]) if ours else "-"
            cells = (what, fmt_tflops(ours), ref, vs, first_ours, first_theirs, first_ratio,
                     fmt_tflops(theirs), gap, chosen)  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    if matmul_ratios:
        geo = math.exp(sum(math.log(r) for r in matmul_ratios) / len(matmul_ratios))
        lines.append(
            f"matmul vs cuBLAS: geomean {geo:.3f}x over {len(matmul_ratios)} rows, "
            f"lowest {min(matmul_ratios):.3f}x (targets: >= 1.00x, none under 0.97x)"
        )
    lines.append(
        "ratio: tunedsl's first call over triton.autotune's (target <= 0.167); gap to best: "
        "tunedsl / triton.autotune choice against every configuration re-timed (attention); "
        "attention's ref: SDPA as it chooses (cuDNN's kernel on the H100), in brackets its "
        "FlashAttention-2 backend (sdpa_kernel(FLASH_ATTENTION))"
    )
    for row_name, by_tuner in results.items():
        for tuner, rows in by_tuner.items():
            for row in rows:
                if row.get("rel_err", 0) > 2e-2:
                    notes.append(f"{row_name} {tuner}: relative error {row['rel_err']:.3g}")
                failed = (row.get("exhaustive") or {}).get("failed")
                if failed:
                    notes.append(f"{row_name}: {len(failed)} configurations did not run: "
                                 f"{sorted(set(failed.values()))[0]}")  # fmt: skip
    lines += [f"note: {n}" for n in notes]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="all four matmul shapes")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved do_bench rounds")
    parser.add_argument("--rep", type=int, default=100, help="do_bench rep, ms")
    parser.add_argument("--budget", type=float, default=510, help="seconds for the whole run")
    parser.add_argument("--json", help="also write every row here")
    parser.add_argument("--plumbing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=["tunedsl", "triton"], help=argparse.SUPPRESS)
    parser.add_argument("--kernel", choices=["matmul", "attention"], help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="float16", help=argparse.SUPPRESS)
    parser.add_argument("--shapes", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--head-dim", type=int, default=64, help=argparse.SUPPRESS)
    parser.add_argument("--features", nargs="*", default=[], help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        return child_main(ns)
    import torch
    import triton

    if ns.plumbing:
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise SystemExit("--plumbing needs TRITON_INTERPRET=1 set before Python starts")
        ns.rounds, ns.rep = 1, 1
        device = "the CPU interpreter"
    elif not torch.cuda.is_available():
        raise SystemExit("bench_flagship needs a CUDA GPU (try --plumbing without one)")
    else:
        device = torch.cuda.get_device_name()
    start = time.monotonic()
    features = {}
    if not ns.plumbing:
        features = {MATMUL: probe_features(MATMUL), ATTENTION: probe_features(ATTENTION)}
    results: dict[str, dict[str, list[dict]]] = {}
    notes: list[str] = []
    common = ["--rounds", str(ns.rounds), "--rep", str(ns.rep)]
    planned = groups(ns)
    spawns_left = 2 * len(planned)
    with tempfile.TemporaryDirectory(prefix="bench-flagship-") as tmp:
        for name, args in planned:
            example = MATMUL if name.startswith("matmul") else ATTENTION
            feats = ["--features", *features.get(example, [])]
            results[name] = {}
            for tuner in ("triton", "tunedsl"):
                left = ns.budget - (time.monotonic() - start)
                spawns_left -= 1
                if left < MIN_GROUP_S and not ns.plumbing:
                    notes.append(f"{name} {tuner}: skipped, {left:.0f} s left of the budget")
                    continue
                # what is left, less the least each later child needs
                limit = max(MIN_GROUP_S, left - MIN_GROUP_S * spawns_left)
                tag = f"{name.replace(' ', '-')}-{tuner}"
                rows, note = spawn(["--child", tuner, *args, *common, *feats], tmp, tag, limit)
                results[name][tuner] = rows
                if note:
                    notes.append(note)
                print(f"[{time.monotonic() - start:.0f} s] {name} {tuner}: {len(rows)} rows",
                      file=sys.stderr, flush=True)  # fmt: skip
    header = (
        f"flagship kernels on {device} (triton {triton.__version__}, torch {torch.__version__}, "
        f"{os.cpu_count()} CPUs; features: {json.dumps(features)}; rounds {ns.rounds}, "
        f"rep {ns.rep} ms; {time.monotonic() - start:.0f} s)"
    )
    print("\n".join(table(results, notes, header)))
    if ns.json:
        Path(ns.json).write_text(json.dumps({"header": header, "results": results}, indent=1))


if __name__ == "__main__":
    main()
