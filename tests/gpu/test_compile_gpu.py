"""Compiling on a real CUDA GPU: the JIT table is filled outside-in, in parallel, safely.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from shared_kernels import mm, vadd  # noqa: E402

from tunedsl.backends.compile_pool import CompileJob, compile_stream  # noqa: E402
from tunedsl.backends.triton_compile import compile_variant  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "integration" / "precompile_fixtures"


def _kernel_cache(kernel):
    device = torch.cuda.current_device()
    return kernel.device_caches[device][0]


def _vectors(n=5000):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    return a, b, torch.empty_like(a), n


def test_compile_variant_fills_the_jit_table_that_the_launch_uses() -> None:
    a, b, c, n = _vectors()
    handle = compile_variant(vadd, (a, b, c, n), {"TILE": 256}, {"num_warps": 2})
    assert handle.metadata.num_warps == 2
    table = _kernel_cache(vadd)
    assert handle in table.values()
    size = len(table)
    vadd[(triton.cdiv(n, 256),)](a, b, c, n, TILE=256, num_warps=2)
    torch.cuda.synchronize()
    assert len(table) == size  # the launch found the compiled kernel: no new compile
    torch.testing.assert_close(c, a + b)
    # A second compile of the same variant is a table hit returning the same kernel.
    assert compile_variant(vadd, (a, b, c, n), {"TILE": 256}, {"num_warps": 2}) is handle


def test_parallel_compiles_on_the_gpu_all_launch_correctly() -> None:
    a, b, c, n = _vectors()
    configs = [(block, warps) for block in (64, 128, 512, 1024) for warps in (1, 2, 4, 8)]

    def job(block, warps):
        return CompileJob(
            (block, warps),
            lambda: compile_variant(vadd, (a, b, c, n), {"TILE": block}, {"num_warps": warps}),
        )

    results = list(compile_stream([job(*cfg) for cfg in configs], workers=8))
    assert len(results) == len(configs)
    hashes = set()
    for job_done, kernel in results:
        assert not isinstance(kernel, BaseException), kernel
        hashes.add(kernel.hash)
        block, warps = job_done.config
        c.zero_()
        vadd[(triton.cdiv(n, block),)](a, b, c, n, TILE=block, num_warps=warps)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b)
    assert len(hashes) == len(configs)


def test_too_much_shared_memory_is_a_failed_configuration_not_a_crash() -> None:
    a = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    args = (a, a, a, 1024, 1024, 1024, 1024, 1, 1024, 1, 1024, 1)
    huge = CompileJob(
        "huge",
        lambda: compile_variant(
            mm, args, {"BM": 256, "BN": 256, "BK": 256}, {"num_warps": 8, "num_stages": 6}
        ),
    )
    fine = CompileJob(
        "fine",
        lambda: compile_variant(
            mm, args, {"BM": 64, "BN": 64, "BK": 32}, {"num_warps": 4, "num_stages": 3}
        ),
    )
    results = dict((j.config, r) for j, r in compile_stream([huge, fine], workers=2))
    assert isinstance(results["huge"], triton.runtime.errors.OutOfResources)
    assert not isinstance(results["fine"], BaseException)


def test_forked_workers_stop_a_kernel_over_shared_memory_with_the_loaders_error(
    monkeypatch, tmp_path
) -> None:
    """With compile workers, a configuration over the GPU's shared memory stops in the worker
    before code generation and fails with the error loading it reports, Triton's numbers."""
    from tunedsl.backends import compile_processes, process_compile

    # Workers forked now, into an empty Triton cache (one that held the kernel would
    # answer from it), and none left behind that writes where later tests do not look.
    compile_processes.shutdown()
    monkeypatch.setenv("TUNEDSL_COMPILE_PROCESSES", "on")
    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path / "triton"))
    a = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    args = (a, a, a, 1024, 1024, 1024, 1024, 1, 1024, 1, 1024, 1)
    configs = {
        "huge": ({"BM": 256, "BN": 256, "BK": 128}, {"num_warps": 8, "num_stages": 5}),
        "fine": ({"BM": 64, "BN": 64, "BK": 32}, {"num_warps": 4, "num_stages": 3}),
        "fine2": ({"BM": 128, "BN": 64, "BK": 32}, {"num_warps": 4, "num_stages": 3}),
        "fine3": ({"BM": 64, "BN": 128, "BK": 32}, {"num_warps": 4, "num_stages": 3}),
    }
    before = dict(process_compile.stats)
    compile_one = process_compile.variant_compiler(mm, len(configs), workers=4)
    assert compile_one.__name__ == "pooled"
    jobs = [
        CompileJob(name, lambda kw=kw, opts=opts: compile_one(args, kw, opts))
        for name, (kw, opts) in configs.items()
    ]
    try:
        results = {j.config: r for j, r in compile_stream(jobs, workers=4)}
        # Another key of the kernel (same specialization): the stopped compile fails at once.
        compile_again = process_compile.variant_compiler(mm, len(configs), workers=4)
        again = {
            j.config: r
            for j, r in compile_stream(
                [
                    CompileJob(name, lambda kw=kw, opts=opts: compile_again(args, kw, opts))
                    for name, (kw, opts) in configs.items()
                ],
                workers=4,
            )
        }
    finally:
        compile_processes.shutdown()
    assert process_compile.stats["over_shared"] == before["over_shared"] + 1
    assert process_compile.stats["over_shared_known"] == before["over_shared_known"] + 1
    early = results["huge"]
    assert isinstance(early, triton.runtime.errors.OutOfResources), early
    assert str(again["huge"]) == str(early)
    # The same configuration compiled in full and loaded here: the same error, same numbers.
    monkeypatch.setenv("TUNEDSL_COMPILE_PROCESSES", "off")
    with pytest.raises(triton.runtime.errors.OutOfResources) as loaded:
        compile_variant(mm, args, *configs["huge"])
    assert str(early) == str(loaded.value)
    for name in ("fine", "fine2", "fine3"):
        assert not isinstance(results[name], BaseException), results[name]


_TUNE_SCRIPT = textwrap.dedent(
    """
    import torch
    from shared_kernels import mm  # tests/ is on PYTHONPATH
    from tunedsl import autotune_launch

    M = N = K = 2048
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    space = dict(BM=[64, 128], BN=[64, 128, 256], BK=[32, 64], num_warps=[4, 8],
                 num_stages=[3, 4])
    print("tuning", flush=True)
    autotune_launch(mm, space=space, grid=lambda cfg: (M // cfg.BM, N // cfg.BN),
                    args=(a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                          b.stride(1), c.stride(0), c.stride(1)),
                    kwargs=lambda cfg: {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK})
    print("finished", flush=True)
    """
)


def _session_processes(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


@pytest.mark.parametrize("delay_s", [0.5, 3.0])  # while compiling, and (likely) benchmarking
def test_ctrl_c_during_tuning_leaves_no_record_and_no_process(tmp_path, delay_s) -> None:
    script = tmp_path / "tune_mm.py"
    script.write_text(_TUNE_SCRIPT)
    cache = tmp_path / "tunedsl-cache"
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(tmp_path / "tc"))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "tuning"
    time.sleep(delay_s)
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    elapsed = time.monotonic() - sent
    out = proc.stdout.read()
    time.sleep(0.2)
    assert _session_processes(proc.pid) == []
    records = list((cache / "records").glob("*.json")) if (cache / "records").exists() else []
    # A record of all 48 configurations is written only when the tuning ends: on a host that
    # tunes this space within the delay, the interrupt met the launch after it (the record is
    # right to stay).
    if "finished" in out or (records and all(_whole_record(r) for r in records)):
        pytest.skip("tuning finished before the interrupt arrived")
    assert proc.returncode != 0
    # How fast it stops is a speed figure: benchmarks/bench_sigint.py measures it.
    print(f"stopped {elapsed:.2f} s after SIGINT")
    assert not records, [r.name for r in records]


def _whole_record(path: Path) -> bool:
    from tunedsl.model.record import Record

    try:
        record = Record.from_json(json.loads(path.read_text()))
    except Exception:
        return False
    return len(record.results) == 2 * 3 * 2 * 2 * 2  # the script's whole space


def _precompile(tmp_path, *argv):
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "tc"))
    env.pop("TRITON_INTERPRET", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # precompile must be able to store bytecode
    env.pop("TUNEDSL_QUIET", None)  # the progress line is checked
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", *argv],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip


def test_precompile_on_the_gpu_then_tune_then_replay(tmp_path) -> None:
    good = str(FIXTURES / "good")
    compiled = _precompile(tmp_path, good)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert "precompile: compiled" in compiled.stderr
    again = _precompile(tmp_path, good)
    assert again.returncode == 0 and "nothing compiled" in again.stdout, again.stdout

    tuned = _precompile(tmp_path, "--tune", good)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    records = Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records"
    assert list(records.glob("*.json")), tuned.stdout

    replay = _precompile(tmp_path, "--replay")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "[record" in replay.stdout  # one row per replayed record
