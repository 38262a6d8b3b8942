"""Many threads cross-compiling one kernel's configurations at once (real cubins, cuda:90).

The binaries must be byte-identical to a serial compile, a configuration that raises
must neither deadlock the pool nor poison the compile lock.
"""

from __future__ import annotations

import hashlib
import threading

import pytest

pytestmark = pytest.mark.needs_triton

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = pytest.importorskip("triton.language")


@triton.jit
def _mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))


CONFIGS = [
    dict(BM=bm, BN=bn, BK=32, num_warps=w, num_stages=2)
    for bm in (32, 64)
    for bn in (32, 64)
    for w in (2, 4)
]


def _args():
    a = torch.empty(128, 128, dtype=torch.float16)
    return (a, a, a, 128, 128, 128, 128, 1, 128, 1, 128, 1)


def _job(cfg, args):
    from tunedsl.backends.triton_compile import compile_variant
    from tunedsl.tuning.compile_pool import CompileJob

    kwargs = {k: cfg[k] for k in ("BM", "BN", "BK")}
    options = {k: cfg[k] for k in ("num_warps", "num_stages")}
    return CompileJob(cfg, lambda: compile_variant(_mm, args, kwargs, options, target="cuda:90"))


@pytest.fixture
def always_compile(monkeypatch, tmp_path):
    # Separate Triton cache and no cache hits: every compile below is a real compile.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)


def _digest(handle) -> str:
    return hashlib.sha256(handle.binary).hexdigest()


def test_parallel_cubins_equal_serial_cubins(always_compile) -> None:
    from tunedsl.tuning.compile_pool import compile_stream

    args = _args()
    serial = {}
    for job, result in compile_stream([_job(c, args) for c in CONFIGS], workers=1):
        assert not isinstance(result, BaseException), result
        serial[str(job.config)] = _digest(result)
    parallel = {}
    for job, result in compile_stream([_job(c, args) for c in CONFIGS], workers=8):
        assert not isinstance(result, BaseException), result
        assert result.binary[:4] == b"\x7fELF"  # a real cubin
        parallel[str(job.config)] = _digest(result)
    assert parallel == serial
    assert len(set(serial.values())) == len(CONFIGS)  # different configs, different code


def test_a_raising_compile_neither_deadlocks_nor_poisons_the_lock(always_compile) -> None:
    from tunedsl.tuning.compile_pool import compile_stream
    from tunedsl.tuning.lock import compile_lock

    args = _args()
    bad = dict(BM=48, BN=32, BK=32, num_warps=2, num_stages=2)  # arange needs a power of 2
    jobs = [_job(c, args) for c in [bad, *CONFIGS[:3], bad, *CONFIGS[3:5]]]
    outcome: dict[str, object] = {}

    def consume() -> None:
        outcome["results"] = list(compile_stream(jobs, workers=6, timeout_s=300))

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    worker.join(timeout=240)
    assert not worker.is_alive(), "compile pool deadlocked"
    results = outcome["results"]
    assert len(results) == len(jobs)
    errors = [r for j, r in results if j.config is bad]
    assert len(errors) == 2 and all(isinstance(e, triton.CompilationError) for e in errors)
    assert "power of 2" in str(errors[0])
    assert all(not isinstance(r, BaseException) for j, r in results if j.config is not bad)
    got: list[bool] = []

    def probe() -> None:
        acquired = compile_lock.acquire(timeout=5)
        got.append(acquired)
        if acquired:
            compile_lock.release()

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert got == [True]
