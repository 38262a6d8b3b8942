"""Tuning on one GPU against every GPU of the host (``tunedsl.backends.multi_device``).

Spaces of the anchor's matmul (``anchor_mm.py``), each searched exhaustively by the engine's
driver through the measurer tunedsl picks (``backends/measurers.make_measurer``), with
``TUNEDSL_TUNE_DEVICES=1`` (the caller's GPU alone, measured in this process) and with
``--devices`` GPUs allowed: then ``backends/device_plan.py`` decides whether the GPUs pay for
their workers (the ``used`` column says how many were used). On several GPUs the host
compiles every configuration once on all its cores while the GPUs open the compiled ones; the
leaders are raced on the caller's.

Fair rows: each row runs in its own fresh process with its own empty Triton cache and
tunedsl cache directory (compiling is counted as a user's first tuning pays it), in the
order ``--order`` (default ``1221``: one GPU, two, two, one), and the ratio is taken within
matched pairs (rows 1-2 and 3-4), so neither a warm disk nor a row's position favours one
side. Printed: one JSON line per row, then one table (``multi_gpu_table.py``): each pair's
wall times, configurations measured, GPUs used, the two ratios (wall time and configurations
a second, two over one) and the choices re-measured on the caller's GPU; then a ``RESULT``
line per space against its target (``TARGETS``: the anchor never slower, the large space at
most 0.6x the wall time, under a 20 s budget and in the sweep at least 1.8x the rate).
``--deadline`` skips the rows that cannot finish in the time left (``ROW_S`` says how long
each takes); ``--detail`` adds where each multi-GPU row's time went.

    anchor-48   the anchor's 48 configurations, M = N = K = 4096, fp16
    large       about 1,100 configurations (BM, BN in 16..256, BK in 16..128, 2 to 8 warps,
                2 to 5 stages) less those whose pipelined tiles exceed the shared memory
    NAME@S      the space NAME searched under a budget of S seconds
    sweep-16    ``tunedsl sweep benchmarks/sweep_mm.py --no-ray --gpus G`` over 16 shapes
                (one key each): one GPU in this process against one process per GPU;
                "measured" is the keys tuned, and the rate ratio is keys per second
    SPACE:ORDER this space's row order (default ``--order``), e.g. ``large:12``
    NAME+warm   the space with every configuration already in Triton's cache (what a later
                shape of the same kernel finds: measuring, not compiling, is the work); the
                cache is filled once per space, untimed, and copied for each row

    python benchmarks/bench_multi_gpu.py --deadline 500     # every space, on >= 2 GPUs
    python benchmarks/bench_multi_gpu.py --spaces anchor-48,large@20 --order 1221 --json o.json
    python benchmarks/bench_multi_gpu.py --table a.json b.json     # one table of earlier rows
    TRITON_INTERPRET=1 python benchmarks/bench_multi_gpu.py --smoke   # CPU: two interpreters
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchor_mm import MM_SPACE, mm
from multi_gpu_table import TARGETS, print_tables

#: The large space's axes; ``fits`` drops tiles that do not fit in shared memory.
LARGE_SPACE: dict[str, list[int]] = {
    "BM": [16, 32, 64, 128, 256],
    "BN": [16, 32, 64, 128, 256],
    "BK": [16, 32, 64, 128],
    "num_warps": [2, 4, 8],
    "num_stages": [2, 3, 4, 5],
}
SMEM_BYTES = 227 * 1024  # an H100/H200 block's largest dynamic shared memory


def fits(c: dict[str, int], elem: int = 2) -> bool:
    """Tiles of A and B, one per pipeline stage, fit in shared memory (fp16)."""
    return (c["BM"] + c["BN"]) * c["BK"] * elem * c["num_stages"] <= SMEM_BYTES


def space_configs(name: str) -> list[dict[str, int]]:
    axes = MM_SPACE if name == "anchor-48" else LARGE_SPACE
    names = list(axes)
    every = [dict(zip(names, v, strict=True)) for v in itertools.product(*axes.values())]
    return every if name == "anchor-48" else [c for c in every if fits(c)]


def mm_request(size: int, configs: list[dict[str, int]], device: str) -> Any:
    """A TuneRequest for ``mm`` on size x size x size fp16 matrices, one variant a config."""
    import torch

    from tunedsl.model.config import Config
    from tunedsl.model.variant import Variant
    from tunedsl.runtime.tuner import TuneRequest

    dtype = torch.float16 if device != "cpu" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    c = torch.empty(size, size, device=device, dtype=dtype)
    variants = []
    for cfg in configs:
        tiles = {k: cfg[k] for k in ("BM", "BN", "BK")}
        opts = {k: cfg[k] for k in ("num_warps", "num_stages")}
        args = (a, b, c, size, size, size, *a.stride(), *b.stride(), *c.stride())
        grid = (size // cfg["BM"], size // cfg["BN"])
        variants.append(Variant(Config(**cfg), args, tiles, grid, opts))
    return TuneRequest(kernel=mm, variants=variants)


def tune_once(
    req: Any,
    devices: list[int],
    chunk: int | None = None,
    budget_s: float | None = None,
    local: bool = False,
) -> dict[str, Any]:
    """One exhaustive search on ``devices`` (in a fresh process: empty caches, cold
    workers; ``local``: the caller's GPU in this process): wall time, the choice and where
    the time went."""
    import dataclasses

    from tunedsl.backends import multi_device, process_compile
    from tunedsl.engine.driver import run_search
    from tunedsl.engine.search import make_strategy
    from tunedsl.model.space import ListSpace

    start = time.perf_counter()
    m = multi_device.MultiDeviceMeasurer(req, devices, caller=devices[0], chunk=chunk, local=local)
    try:
        configs = [v.config for v in req.variants]
        out = run_search(ListSpace(configs), make_strategy("exhaustive"), m, budget_s=budget_s)
        wall = time.perf_counter() - start
        chosen_ms = statistics.median(m.sample(out.chosen, 20))  # on the caller's GPU
    finally:
        m.close()
    ok = sum(1 for o in out.observations if o.status == "ok")
    split = m.stats
    return {
        "devices": devices,
        "wall_s": round(wall, 2),
        "chosen": dict(out.chosen.items()),
        "chosen_ms": round(chosen_ms, 4),
        "ok": ok,
        "configs": len(configs),
        "measured": out.measured,
        "exhausted": out.exhausted,
        "final_on_caller": m.final_from is not None
        and all(slot == 0 for _, slot in m.trace[m.final_from :]),
        "budget_s": budget_s,
        "setup_s": round(split.setup_s, 2),
        "first_s": round(split.first_s or 0.0, 2),
        "compile_wall_s": round(split.compile_wall_s, 2),
        "compile_cpu_s": round(split.compile_cpu_s, 2),
        "wait_s": round(split.wait_s, 2),
        "rounds_s": round(split.rounds_s, 2),
        "final_s": round(split.final_s, 2),
        "measure_s": [round(x, 2) for x in split.measure_s],
        "workers": [
            {k: round(v, 2) if isinstance(v, float) else v for k, v in w.items()}
            for w in map(dataclasses.asdict, split.workers)
        ],
        "host_compiles": sum(m.compiles.values()),
        "processes": dict(process_compile.stats),  # host compiles built by forked workers
    }


def tune_as_user(req: Any, budget_s: float | None = None) -> dict[str, Any]:
    """One exhaustive search through the measurer tunedsl picks for ``req``
    (``TUNEDSL_TUNE_DEVICES`` allows one GPU or several; ``device_plan`` decides), in a
    fresh process: wall time, the choice, the GPUs used and where the time went."""
    import dataclasses

    from tunedsl.backends import compile_processes, device_plan
    from tunedsl.backends.measurers import make_measurer
    from tunedsl.backends.multi_device import MultiDeviceMeasurer
    from tunedsl.engine.driver import run_search
    from tunedsl.engine.search import make_strategy
    from tunedsl.model.space import ListSpace

    req.settings = dataclasses.replace(req.settings, budget_s=budget_s)
    variants = {v.config: v for v in req.variants}
    start = time.perf_counter()
    # the plan of how many GPUs weighs the budget this search runs under (None: none)
    m = make_measurer(req, variants.__getitem__, req.variants[0], budget_s=budget_s)
    multi = getattr(m, "inner", None)
    multi = multi if isinstance(multi, MultiDeviceMeasurer) else None
    try:
        configs = [v.config for v in req.variants]
        out = run_search(ListSpace(configs), make_strategy("exhaustive"), m, budget_s=budget_s)
        wall = time.perf_counter() - start
        chosen_ms = statistics.median(m.sample(out.chosen, 20))  # on the caller's GPU
    finally:
        m.close()
    row: dict[str, Any] = {
        "used": len(multi.devices) if multi is not None else 1,
        "wall_s": round(wall, 2),
        "chosen": dict(out.chosen.items()),
        "chosen_ms": round(chosen_ms, 4),
        "ok": sum(1 for o in out.observations if o.status == "ok"),
        "configs": len(configs),
        "measured": out.measured,
        "exhausted": out.exhausted,
        "budget_s": budget_s,
        # what the GPU plan learned in this row (a configuration's measuring seconds)
        "plan_seen": device_plan.observed(),
        "compile_processes": dict(compile_processes.stats),
    }
    if multi is not None:
        split = multi.stats
        row.update(
            setup_s=round(split.setup_s, 2), first_s=round(split.first_s or 0.0, 2),
            compile_wall_s=round(split.compile_wall_s, 2),
            compile_cpu_s=round(split.compile_cpu_s, 2), wait_s=round(split.wait_s, 2),
            rounds_s=round(split.rounds_s, 2), final_s=round(split.final_s, 2),
            most_sampling=multi.most_sampling,
            workers=[{k: round(v, 2) if isinstance(v, float) else v for k, v in w.items()}
                     for w in map(dataclasses.asdict, split.workers)],
        )  # fmt: skip
    return row


def sweep_row(gpus: int, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """``tunedsl sweep`` of 16 shapes without Ray on ``gpus`` GPUs (1: in one process),
    timed from the command's start to its end (processes, compiles, tuning, records)."""
    shapes = scratch / "shapes.json"
    shapes.write_text(json.dumps([{"n": 2048 + 256 * i} for i in range(16)]))
    script = Path(__file__).resolve().parent / "sweep_mm.py"
    command = [sys.executable, "-m", "tunedsl", "sweep", str(script), "--shapes", str(shapes),
               "--no-ray", "--gpus", str(gpus)]  # fmt: skip
    # each process tunes on its own GPU (the one-GPU row: on GPU 0 alone)
    env = dict(os.environ, TRITON_CACHE_DIR=str(scratch / "triton"), PYTHONUNBUFFERED="1",
               TUNEDSL_CACHE_DIR=str(scratch / "tunedsl"), NCCL_NVLS_ENABLE="0",
               TUNEDSL_TUNE_DEVICES="1")  # fmt: skip
    start = time.perf_counter()
    # The progress lines (a line per finished task) are stamped as they come: the time to
    # the first record (processes, imports, compiles) and the rate after it. One stream for
    # both outputs, so neither pipe can fill while the other is read.
    stamps: list[float] = []
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    timer = threading.Timer(args.row_timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if " tasks: " in line:
                stamps.append(time.perf_counter() - start)
        proc.wait()
    finally:
        timed_out = not timer.is_alive()
        timer.cancel()
    wall = time.perf_counter() - start
    if timed_out:
        return {"space": "sweep-16", "gpus": gpus, "error": f"timeout after {args.row_timeout} s"}
    done = [line for line in lines if line.startswith("sweep: ")]
    if proc.returncode != 0 or not done:
        tail = "".join(lines)[-800:]
        return {"space": "sweep-16", "gpus": gpus, "error": f"rc {proc.returncode}: {tail}"}
    written = int(
        done[-1].split(",")[1].split()[0]
    )  # "sweep: 16 tasks, 16 records written, 0 failed"
    return {"space": "sweep-16", "gpus": gpus, "used": gpus, "wall_s": round(wall, 2),
            "chosen": {"records": written}, "chosen_ms": 0.0, "ok": written, "configs": 16,
            "measured": 16, "exhausted": True, "budget_s": None,
            "first_record_s": round(stamps[0], 2) if stamps else None,
            "after_first_s": round(stamps[-1] - stamps[0], 2) if len(stamps) > 1 else None}  # fmt: skip


def parse_space(space: str) -> tuple[str, float | None, bool]:
    """``NAME[@BUDGET][+warm][:ORDER]`` -> (name, budget seconds or None, warm)."""
    body, plus, flag = space.split(":")[0].partition("+")
    if plus and flag != "warm":
        raise SystemExit(f"space {space!r}: the only suffix is +warm")
    name, _, limit = body.partition("@")
    return name, float(limit) if limit else None, bool(plus)


def fill_cache(space: str, size: int) -> dict[str, Any]:
    """Compile every configuration of ``space`` into Triton's cache (this process's
    TRITON_CACHE_DIR), on all cores, for GPU 0; untimed by the rows."""
    import torch

    from tunedsl.backends.compile_pool import CompileJob, compile_stream
    from tunedsl.backends.process_compile import variant_compiler

    name, _, _ = parse_space(space)
    torch.cuda.set_device(0)
    req = mm_request(size, space_configs(name), "cuda")
    start = time.perf_counter()
    compile_v = variant_compiler(req.kernel, len(req.variants))
    jobs = [
        CompileJob(v.config, lambda v=v: compile_v(v.args, v.kwargs, v.options))
        for v in req.variants
    ]
    failed = sum(isinstance(r, BaseException) for _, r in compile_stream(jobs))
    from tunedsl.backends import process_compile

    return {"fill_s": round(time.perf_counter() - start, 1), "failed": failed,
            "processes": process_compile.stats}  # fmt: skip


def run_row(space: str, gpus: int, size: int, smoke: bool) -> dict[str, Any]:
    """The row, in this (fresh) process."""
    import torch

    if smoke:
        device, devices = "cpu", [0] * gpus  # N interpreter workers
        configs = SMOKE_CONFIGS
        budget = None
    else:
        device, devices = "cuda", list(range(gpus))
        name, budget, _ = parse_space(space)
        configs = space_configs(name)
        torch.cuda.set_device(0)
    req = mm_request(size, configs, device)
    if smoke:  # the caller's "GPU" in this process, as a tuning measures (local)
        return {
            "space": space,
            "used": gpus,
            **tune_once(req, devices, budget_s=budget, local=True),
        }
    return {"space": space, **tune_as_user(req, budget_s=budget)}


SMOKE_CONFIGS = [
    {"BM": 16, "BN": bn, "BK": 16, "num_warps": w, "num_stages": 2}
    for bn in (16, 32)
    for w in (1, 2, 4, 8)
]


#: Each space's row on a host of two H100s or H200s and 32 cores, seconds: (expected, at most).
#: A row is a fresh process (~5 s: Python, torch, CUDA, the inputs) and its tuning: the anchor
#: ~3 s; the large space unbudgeted is bound by compiling 1,104 configurations cold (about
#: 230 s with two H100s, 274 s with one); under a 20 s budget, the budget; the sweep ~1 s a
#: key on one GPU.
ROW_S: dict[str, tuple[float, float]] = {
    "anchor-48": (10.0, 60.0),
    "large": (230.0, 330.0),
    "large@20": (28.0, 60.0),
    "sweep-16": (20.0, 90.0),
}

_warm_caches: dict[str, Path] = {}  # space -> a Triton cache holding all its configurations


def warm_cache(space: str, args: argparse.Namespace) -> Path:
    """The filled Triton cache of ``space`` (filled on first use, in a child process)."""
    name, _, _ = parse_space(space)
    if name not in _warm_caches:
        cache = Path(tempfile.mkdtemp(prefix="bench-multi-gpu-warm-")) / "triton"
        env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
        env["TUNEDSL_CACHE_DIR"] = str(cache.parent / "tunedsl")
        command = [sys.executable, __file__, "--fill", space, "--size", str(args.size)]
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("FILL ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"filling the cache of {space} failed:\n{proc.stderr[-2000:]}")
        print(f"{space}: cache filled, untimed: {lines[-1][5:]}", flush=True)
        _warm_caches[name] = cache
    return _warm_caches[name]


def spawn_row(space: str, gpus: int, args: argparse.Namespace) -> dict[str, Any]:
    """One row in a child process with its own Triton and tunedsl caches: empty, or for a
    ``+warm`` space a copy of the filled Triton cache."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-multi-gpu-"))
    if parse_space(space)[0] == "sweep-16":
        try:
            return sweep_row(gpus, args, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    if parse_space(space)[2] and not args.smoke:
        shutil.copytree(warm_cache(space, args), scratch / "triton")
    env = dict(os.environ)
    env.update(
        TRITON_CACHE_DIR=str(scratch / "triton"),
        TUNEDSL_CACHE_DIR=str(scratch / "tunedsl"),
        PYTHONUNBUFFERED="1",
        NCCL_NVLS_ENABLE="0",
        TUNEDSL_TUNE_DEVICES=str(gpus),  # 1: the caller's GPU only; N: up to N, if they pay
    )
    if args.smoke:
        env["TRITON_INTERPRET"] = "1"
    command = [sys.executable, __file__, "--row", space, "--gpus", str(gpus)]
    command += ["--size", str(args.size)] + (["--smoke"] if args.smoke else [])
    try:
        proc = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=args.row_timeout
        )
    except subprocess.TimeoutExpired:
        return {"space": space, "gpus": gpus, "error": f"timeout after {args.row_timeout} s"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("ROW "):
            return {"gpus": gpus, **json.loads(line[4:])}
    return {"space": space, "gpus": gpus, "error": f"rc {proc.returncode}: {proc.stderr[-800:]}"}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--spaces", default=",".join(TARGETS), help="NAME or NAME@BUDGET_S, comma-separated"
    )
    parser.add_argument("--devices", type=int, default=2, help="GPUs of the multi-GPU rows")
    parser.add_argument(
        "--order",
        help="row order per space: 1 = one GPU, 2 = --devices (default 1221; --smoke: 12)",
    )
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--row-timeout", type=float, help="seconds per row (default: ROW_S's)")
    parser.add_argument(
        "--deadline",
        type=float,
        help="seconds for every row: later rows that "
        "cannot finish in what is left are skipped; the table is printed",
    )
    parser.add_argument("--detail", action="store_true", help="where each row's time went")
    parser.add_argument("--smoke", action="store_true", help="CPU: 8 configs, interpreters")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # internal: run one row here
    parser.add_argument("--gpus", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--fill", help=argparse.SUPPRESS)  # internal: fill the cache here
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print one table of these")
    args = parser.parse_args()
    if args.table:
        rows = [row for path in args.table if Path(path).exists()
                for row in json.loads(Path(path).read_text())]  # fmt: skip
        missing = [path for path in args.table if not Path(path).exists()]
        for path in missing:
            print(f"{path}: missing (its step did not finish)")
        print_tables(rows, args.detail)
        return 0 if rows and not missing and all("error" not in r for r in rows) else 1
    if args.fill:
        print("FILL " + json.dumps(fill_cache(args.fill, args.size)))
        return 0
    if args.smoke:
        args.size = 64 if args.size == 4096 else args.size
    if args.row:
        print("ROW " + json.dumps(run_row(args.row, args.gpus, args.size, args.smoke)))
        return 0
    if args.smoke:
        spaces = ["smoke-8"]
        many = 2
    else:
        import torch

        count = torch.cuda.device_count()
        if count < 2:
            print(f"needs at least 2 GPUs, found {count}", file=sys.stderr)
            return 2
        spaces = args.spaces.split(",")
        many = min(args.devices, count)
        print(f"{torch.cuda.get_device_name(0)} x {count}, M = N = K = {args.size}", flush=True)
    args.order = args.order or ("12" if args.smoke else "1221")
    if set(args.order) - {"1", "2"}:
        parser.error("--order: a string of 1 and 2, like 1221")
    rows = []
    began, limit = time.perf_counter(), args.row_timeout
    for entry in spaces:
        space, _, order = entry.partition(":")
        if set(order or args.order) - {"1", "2"}:
            parser.error(f"{entry}: the order is a string of 1 and 2, like 1221")
        expected, most = ROW_S.get(space.split("+")[0], (60.0, 240.0))
        for ch in order or args.order:
            gpus = 1 if ch == "1" else many
            args.row_timeout = limit or most
            if args.deadline is not None:
                left = args.deadline - (time.perf_counter() - began)
                args.row_timeout = min(args.row_timeout, left)
                if left < expected:
                    row = {"space": space, "gpus": gpus,
                           "error": f"skipped: {left:.0f} s left, the row takes ~{expected:.0f} s"}  # fmt: skip
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
            row = spawn_row(space, gpus, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:  # after each row: a step cut short keeps what it finished
                Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"rows took {time.perf_counter() - began:.0f} s")
    print_tables(rows, args.detail)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
