"""Many threads cross-compiling one kernel's configurations at once (real cubins, cuda:90).

The binaries must be byte-identical to a serial compile; a configuration that raises
must neither deadlock the pool nor poison the compile lock.

Cross-compiling needs Triton imported without ``TRITON_INTERPRET`` (which this
directory's conftest sets), so each case runs this file as a script in a subprocess.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

CONFIGS = [
    dict(BM=bm, BN=bn, BK=32, num_warps=w, num_stages=2)
    for bm in (32, 64)
    for bn in (32, 64)
    for w in (2, 4)
]
BAD = dict(BM=48, BN=32, BK=32, num_warps=2, num_stages=2)  # arange needs a power of 2


def _run(case: str, tmp_path) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_DEFAULT_FP_FUSION="1")
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, __file__, case],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_parallel_cubins_equal_serial_cubins(tmp_path) -> None:
    result = _run("equal", tmp_path)
    assert result["all_elf"]
    assert result["parallel"] == result["serial"]
    assert len(set(result["serial"].values())) == len(CONFIGS)  # different configs, code


def test_a_raising_compile_neither_deadlocks_nor_poisons_the_lock(tmp_path) -> None:
    result = _run("raising", tmp_path)
    assert result["finished"], "compile pool deadlocked"
    assert result["reported"] == len(CONFIGS[:5]) + 2
    assert result["errors"] == ["CompilationError", "CompilationError"]
    assert "power of 2" in result["message"]
    assert result["lock_free_after"]


def test_leaving_while_compiles_run_exits_cleanly(tmp_path) -> None:
    # The consumer stops after the first result and the program ends while other
    # compiles still run inside Triton's C++ code: the exit waits for them instead of
    # aborting ("terminate called ... exception not rethrown").
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_DEFAULT_FP_FUSION="1")
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, __file__, "leave"], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "terminate called" not in out.stderr
    assert "leaked" not in out.stderr  # nanobind: objects alive at finalization
    assert json.loads(out.stdout.strip().splitlines()[-1])["busy_when_leaving"]


def test_a_recorded_specialization_compiles_the_very_same_binary(tmp_path) -> None:
    # What replay needs: from triton_specialization's JSON-able description alone,
    # compile_signature rebuilds byte-identical cubins to a compile from real arguments.
    result = _run("fidelity", tmp_path)
    assert result["specialization"]["a"] == "*fp16:D"  # aligned pointer
    assert result["specialization"]["sak"] == {"constexpr": 1}  # Triton's 1-specialisation
    assert result["same"] == len(CONFIGS)


# -- the subprocess side -----------------------------------------------------------------


def _kernel():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared kernels
    from shared_kernels import mm

    return mm


def _jobs(kernel, configs):
    import torch

    from tunedsl.backends.compile_pool import CompileJob
    from tunedsl.backends.triton_compile import compile_variant

    a = torch.empty(128, 128, dtype=torch.float16)
    args = (a, a, a, 128, 128, 128, 128, 1, 128, 1, 128, 1)

    def job(cfg):
        kwargs = {k: cfg[k] for k in ("BM", "BN", "BK")}
        options = {k: cfg[k] for k in ("num_warps", "num_stages")}
        return CompileJob(
            cfg, lambda: compile_variant(kernel, args, kwargs, options, target="cuda:90")
        )

    return [job(c) for c in configs]


def _case_equal(kernel) -> dict:
    from tunedsl.backends.compile_pool import compile_stream

    digests = {}
    all_elf = True
    for name, workers in (("serial", 1), ("parallel", 8)):
        digests[name] = {}
        for job, result in compile_stream(_jobs(kernel, CONFIGS), workers=workers):
            if isinstance(result, BaseException):
                raise result
            all_elf &= result.binary[:4] == b"\x7fELF"  # a real cubin
            digests[name][str(job.config)] = hashlib.sha256(result.binary).hexdigest()
    return {**digests, "all_elf": all_elf}


def _case_raising(kernel) -> dict:
    from tunedsl.backends.compile_pool import compile_stream
    from tunedsl.store.locks import compile_lock

    jobs = _jobs(kernel, [BAD, *CONFIGS[:3], BAD, *CONFIGS[3:5]])
    box: dict = {}
    consumer = threading.Thread(
        target=lambda: box.update(results=list(compile_stream(jobs, workers=6, timeout_s=300))),
        daemon=True,
    )
    consumer.start()
    consumer.join(timeout=240)
    results = box.get("results", [])
    errors = [r for j, r in results if j.config is BAD]
    others_ok = all(not isinstance(r, BaseException) for j, r in results if j.config is not BAD)
    got: list[bool] = []

    def probe() -> None:  # another thread can take the lock at once
        acquired = compile_lock.acquire(timeout=5)
        got.append(acquired)
        if acquired:
            compile_lock.release()

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return {
        "finished": not consumer.is_alive() and others_ok,
        "reported": len(results),
        "errors": [type(e).__name__ for e in errors],
        "message": str(errors[0]) if errors else "",
        "lock_free_after": got == [True],
    }


def _case_leave(kernel) -> dict:
    from tunedsl.backends.compile_pool import compile_stream, workers_busy

    stream = compile_stream(_jobs(kernel, CONFIGS), workers=4, timeout_s=300)
    next(stream)
    stream.close()
    return {"busy_when_leaving": workers_busy()}


def _case_fidelity(kernel) -> dict:
    import torch

    from tunedsl.backends.triton_compile import (
        compile_signature,
        compile_variant,
        triton_specialization,
    )

    a = torch.empty(128, 128, dtype=torch.float16)
    args = (a, a, a, 128, 128, 128, 128, 1, 128, 1, 128, 1)
    same = 0
    spec = None
    for cfg in CONFIGS:
        kwargs = {k: cfg[k] for k in ("BM", "BN", "BK")}
        options = {k: cfg[k] for k in ("num_warps", "num_stages")}
        live = compile_variant(kernel, args, kwargs, options, target="cuda:90")
        spec = json.loads(json.dumps(triton_specialization(kernel, args, kwargs, target="cuda:90")))
        types = {n: v for n, v in spec.items() if not isinstance(v, dict)}
        consts = {n: v["constexpr"] for n, v in spec.items() if isinstance(v, dict)}
        again = compile_signature(kernel, types, consts, options, target="cuda:90")
        same += again.hash == live.hash and again.binary == live.binary
    return {"specialization": spec, "same": same}


if __name__ == "__main__":
    cases = {"equal": _case_equal, "raising": _case_raising, "leave": _case_leave}
    case = {**cases, "fidelity": _case_fidelity}[sys.argv[1]]
    print(json.dumps(case(_kernel())))
