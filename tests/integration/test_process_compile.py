"""Compiling a stream's variants in forked worker processes (``backends/process_compile.py``).

Real Triton compiles for ``cuda:90`` (MLIR, LLVM, ``ptxas``, cubins in Triton's cache), in a
subprocess because the host must not interpret. The workers build each variant into Triton's
cache and this process loads it: the cubins must be the ones a compile on threads makes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from compile_scripts import run_report

pytestmark = pytest.mark.needs_triton


SCRIPT = r"""
import json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import torch
import triton
import triton.language as tl
from shared_kernels import mm

from tunedsl.backends import process_compile
from tunedsl.backends import compile_processes
from tunedsl.backends.compile_pool import CompileJob, compile_stream

HASHING = triton.runtime.cache.triton_key  # Triton's own, lru-cached


def hashed_triton(_):  # in a worker: did it hash Triton's files itself?
    return HASHING.cache_info().misses


S = 64
a = torch.empty(S, S, dtype=torch.float16)
args = (a, a, a, S, S, S, S, 1, S, 1, S, 1)
CONFIGS = [dict(BM=bm, BN=bn, BK=32) for bm in (16, 32) for bn in (16, 32)]


def compile_all(kernel, configs, make_kwargs=lambda c: c):
    compile = process_compile.variant_compiler(kernel, len(configs), target="cuda:90")
    jobs = [
        CompileJob(str(c), lambda c=c: compile(args, make_kwargs(c), {"num_warps": 4}))
        for c in configs
    ]
    out = {}
    for job, result in compile_stream(jobs, workers=2):
        out[job.config] = (
            type(result).__name__ + ": " + str(result).splitlines()[0][:200]
            if isinstance(result, BaseException)
            else [result.hash, result.cached, len(result.binary)]
        )
    return compile.__name__, out


report = {}
os.environ["TUNEDSL_COMPILE_PROCESSES"] = "on"
report["on"] = compile_all(mm, CONFIGS)
report["stats_on"] = dict(process_compile.stats)
report["pool_on"] = dict(compile_processes.stats)
pool = compile_processes.pool_for([mm], 2)
report["worker_hashed"] = [pool.run(hashed_triton, None, 60) for _ in range(4)]
report["parent_hashed"] = HASHING.cache_info().misses
report["again"] = compile_all(mm, CONFIGS)  # now Triton's cache has them: hits, no worker job
report["pool_again"] = dict(compile_processes.stats)

# The same variants on threads alone, into an empty Triton cache: the same cubins.
os.environ["TUNEDSL_COMPILE_PROCESSES"] = "off"
triton.knobs.cache.dir = tempfile.mkdtemp()
report["off"] = compile_all(mm, CONFIGS)


# A kernel defined after the workers were forked, and a configuration that cannot compile.
@triton.jit
def late(x, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 64, "BLOCK too large")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


os.environ["TUNEDSL_COMPILE_PROCESSES"] = "on"
triton.knobs.cache.dir = tempfile.mkdtemp()
x = torch.empty(256, dtype=torch.float32)
args = (x, 256)
report["late"] = compile_all(late, [32, 64, 128], make_kwargs=lambda b: {"BLOCK": b})
report["stats_late"] = dict(process_compile.stats)
report["pool_late"] = dict(compile_processes.stats)
print("REPORT " + json.dumps(report))
"""


def test_workers_build_the_same_cubins_as_threads_and_failures_keep_tritons_error(
    tmp_path: Path,
) -> None:
    report = run_report(tmp_path, "compile_in_processes.py", SCRIPT)

    name_on, on = report["on"]
    name_off, off = report["off"]
    assert (name_on, name_off) == ("pooled", "here")
    assert len(on) == 4
    for config, (digest, cached, size) in on.items():
        assert not cached and size > 1000  # built now (by a worker), a real cubin
        assert off[config][0] == digest  # the very kernel a compile on threads makes
    assert report["stats_on"] == {
        "built": 4,
        "fallback": 0,
        "mismatch": 0,
        "over_shared": 0,
        "over_shared_known": 0,
    }
    assert report["pool_on"]["pools"] == 1 and report["pool_on"]["jobs"] == 4
    # The workers were forked before this process hashed Triton, and compiled with the
    # key each job carried: no worker hashed Triton's files itself.
    assert report["parent_hashed"] == 1 and report["worker_hashed"] == [0, 0, 0, 0]

    # Second time: Triton's cache has every variant; the workers rebuild nothing new
    # (their compile is a cache hit too) and the handles say so.
    _, again = report["again"]
    assert all(entry[0] == on[c][0] for c, entry in again.items())
    assert all(entry[1] for entry in again.values())  # counted as found, not compiled

    # The late kernel: a new pool (the old one did not know it), two variants built, and
    # the one that fails carries Triton's own error, compiled again here.
    _, late = report["late"]
    assert report["pool_late"]["pools"] == 2 and report["pool_late"]["stale"] == 1
    assert isinstance(late["32"], list) and isinstance(late["64"], list)
    assert late["128"].startswith("CompileTimeAssertionFailure")  # Triton's, from here
    assert report["stats_late"]["fallback"] == 1


OVER_SHARED_SCRIPT = r"""
import dataclasses, json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import torch
import triton
from triton.backends.compiler import GPUTarget
from shared_kernels import mm

from tunedsl.backends import process_compile
from tunedsl.backends.triton_cache import triton_cache_has
from tunedsl.backends.triton_compile import compile_source, pack_for_target
from tunedsl.backends import compile_processes

S = 256
target = GPUTarget("cuda", 90, 32)
args = (torch.float16,) * 3 + (S, S, S, S, 1, S, 1, S, 1)
SMALL, BIG = dict(BM=16, BN=16, BK=32), dict(BM=64, BN=64, BK=64)
OPTIONS = {"num_warps": 4, "num_stages": 3}


def full(config):  # the whole compile, in this process: Triton's own numbers
    opts, sig, ce, attrs = pack_for_target(mm, args, config, OPTIONS, target)
    from tunedsl.backends import compat
    done = compile_source(mm, sig, ce, attrs, compat.options_dict(opts), target)
    return done.hash, done.kernel.metadata.shared


triton.knobs.cache.dir = tempfile.mkdtemp()
small_hash, small_shared = full(SMALL)
big_hash, big_shared = full(BIG)
limit = (small_shared + big_shared) // 2

# Workers compile into an empty cache, with the launching GPU's limit between the two.
triton.knobs.cache.dir = tempfile.mkdtemp()
os.environ["TUNEDSL_COMPILE_PROCESSES"] = "on"
pool = compile_processes.pool_for([mm], 2)
key = compile_processes.register(mm)
results = {}
for name, config in (("small", SMALL), ("big", BIG)):
    job = process_compile._worker_job(mm, key, str(mm.cache_key), args, config, OPTIONS, target)
    job = dataclasses.replace(job, shared_limit=limit)
    results[name] = repr(process_compile.run_job(pool, job))
# The stopped kernel left no entry that a later load could trust.
opts, sig, ce, attrs = pack_for_target(mm, args, BIG, OPTIONS, target)
from tunedsl.backends import compat
from triton.compiler import ASTSource, make_backend
backend = make_backend(target)
src = ASTSource(mm, sig, ce, attrs)
parsed = backend.parse_options(compat.options_dict(opts))
big_key = compat.triton_cache_key(src, backend, parsed, compat.cache_invalidating_env())
big_cached = triton_cache_has(big_key, src.name)
# The same compiles again (another key of the kernel): the one over the limit fails at once,
# the one that fits is a worker's cache hit; with a limit it fits, the big one compiles.
before = dict(process_compile.stats)
again = {}
for name, config, at in (("small", SMALL, limit), ("big", BIG, limit), ("big_fits", BIG, big_shared)):
    job = process_compile._worker_job(mm, key, str(mm.cache_key), args, config, OPTIONS, target)
    again[name] = repr(process_compile.run_job(pool, dataclasses.replace(job, shared_limit=at)))
counts = {k: process_compile.stats[k] - before[k] for k in ("over_shared", "over_shared_known")}
print("REPORT " + json.dumps({
    "small": [small_hash, small_shared], "big": [big_hash, big_shared], "limit": limit,
    "results": results, "big_cached": big_cached,
    "again": again, "counts": counts,
    "error": str(compat.out_of_resources(big_shared, limit)),
}))
"""


def test_a_worker_stops_a_kernel_over_the_gpus_shared_memory_before_code_generation(
    tmp_path: Path,
) -> None:
    """The early stop answers exactly what loading would: Triton's ``metadata.shared``
    against the limit, the same kernel hash for one that fits, no cache entry for one
    that does not (a later load must not find a half-built kernel)."""
    report = run_report(tmp_path, "over_shared.py", OVER_SHARED_SCRIPT)
    small_hash, small_shared = report["small"]
    _, big_shared = report["big"]
    limit = report["limit"]
    assert small_shared < limit < big_shared
    assert report["results"]["small"] == f"Built(hash={small_hash!r}, cached=False)"
    assert report["results"]["big"] == f"OverSharedMemory(required={big_shared}, limit={limit})"
    assert report["big_cached"] is False
    assert f"Required: {big_shared}, Hardware limit: {limit}" in report["error"]


def test_a_compile_stopped_over_shared_memory_is_not_run_again_in_the_process(
    tmp_path: Path,
) -> None:
    """Another key of the same kernel and specialization compiles the same jobs: the one a
    worker stopped over the limit fails at once with the same numbers, while the same
    kernel under a limit it fits is compiled (the memory is by the whole job)."""
    report = run_report(tmp_path, "over_shared.py", OVER_SHARED_SCRIPT)
    small_hash, _ = report["small"]
    big_hash, big_shared = report["big"]
    limit = report["limit"]
    again = report["again"]
    assert again["small"] == f"Built(hash={small_hash!r}, cached=True)"
    assert again["big"] == f"OverSharedMemory(required={big_shared}, limit={limit})"
    assert again["big_fits"] == f"Built(hash={big_hash!r}, cached=False)"
    assert report["counts"] == {"over_shared": 0, "over_shared_known": 1}


def test_no_more_workers_are_forked_than_a_kernel_has_variants(tmp_path: Path) -> None:
    # TUNEDSL_COMPILE_WORKERS=64 for kernels of 4 variants each: forking 64 processes per
    # kernel (the pool is forked again for each new kernel) costs 60 processes for nothing.
    import json
    import os
    import subprocess
    import sys

    fixtures = Path(__file__).parent / "precompile_fixtures" / "good"
    code = (
        "import json, sys\n"
        "from tunedsl.precompile import precompile\n"
        "from tunedsl.backends import compile_processes as cp\n"
        "summary = precompile([sys.argv[1]], target='cuda:90')\n"
        "size = cp._pool.size if cp._pool is not None else None\n"
        "print(json.dumps({'size': size, 'jobs': cp.stats['jobs'], 'failed': summary.failed}))\n"
    )
    env = {**os.environ, "TUNEDSL_COMPILE_WORKERS": "64", "TUNEDSL_COMPILE_PROCESSES": "on",
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}  # fmt: skip
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fixtures)], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["jobs"] > 0 and not report["failed"], report
    assert report["size"] is not None and report["size"] <= 4, report


def test_one_pool_serves_every_batch_a_search_compiles_at_once(tmp_path: Path) -> None:
    # A search compiles its batches announced ahead side by side, and their streams share
    # one pool: it must have a process for each core they can use, not for the first
    # batch's jobs (a pool of 16 kept a 32-core host at 16 compiles). Eight variants,
    # batches of four, eight compile workers: a pool of eight.

    code = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import torch\n"
        "from shared_kernels import mm\n"
        "from tunedsl.backends import compile_processes as cp\n"
        "from tunedsl.backends.host_compile import HostCompiler, Split\n"
        "from tunedsl.model.config import Config\n"
        "from tunedsl.model.variant import Variant\n"
        "S = 64\n"
        "a = torch.empty(S, S, dtype=torch.float16)\n"
        "args = (a, a, a, S, S, S, S, 1, S, 1, S, 1)\n"
        "configs = [Config(BM=m, BN=n, BK=k) for m in (16, 32) for n in (16, 32)"
        " for k in (16, 32)]\n"
        "variants = {c: Variant(c, args, dict(c.items()), (1, 1), {'num_warps': 4})"
        " for c in configs}\n"
        "done = []\n"
        "host = HostCompiler(mm, variants, Split(), 'cuda:90', lambda c, why: done.append(why))\n"
        "host.submit(configs[:4])\n"
        "host.submit(configs[4:])\n"
        "import time\n"
        "t0 = time.time()\n"
        "while len(done) < 8 and time.time() - t0 < 600:\n"
        "    time.sleep(0.05)\n"
        "print(json.dumps({'size': cp._pool.size if cp._pool else None, 'failed':"
        " [w for w in done if w], 'done': len(done)}))\n"
    )
    report = _compiled_in_a_fresh_process(tmp_path, code, {"TUNEDSL_COMPILE_WORKERS": "8"}, 900)
    assert report["done"] == 8 and not report["failed"], report
    assert report["size"] == 8, report


def test_workers_forked_while_a_thread_reads_the_kernels_hash_compile(tmp_path: Path) -> None:
    # Triton guards a kernel's hash (`JITFunction.cache_key`) with a lock of its own. A
    # thread that is reading it as the pool forks (another batch building its jobs) left
    # that lock held in every worker, by a thread they do not have: each worker's first
    # compile then waited for it until the compile timed out, and every variant failed.
    # Here a thread holds the lock across the fork, as such a thread would.

    code = (
        "import json, sys, threading, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import torch\n"
        "from shared_kernels import mm\n"
        "from tunedsl.backends import compile_processes as cp\n"
        "from tunedsl.backends.host_compile import HostCompiler, Split\n"
        "from tunedsl.model.config import Config\n"
        "from tunedsl.model.variant import Variant\n"
        "mm.cache_key\n"
        "held, release = threading.Event(), threading.Event()\n"
        "def hold():\n"
        "    with mm._hash_lock:\n"
        "        held.set()\n"
        "        release.wait()\n"
        "threading.Thread(target=hold, daemon=True).start()\n"
        "held.wait()\n"
        "pool = cp.pool_for([mm], 2)\n"
        "time.sleep(0.5)  # the zygote forks the workers from its copy, the lock held there\n"
        "release.set()\n"
        "S = 64\n"
        "a = torch.empty(S, S, dtype=torch.float16)\n"
        "args = (a, a, a, S, S, S, S, 1, S, 1, S, 1)\n"
        "configs = [Config(BM=m, BN=16, BK=16) for m in (16, 32)]\n"
        "variants = {c: Variant(c, args, dict(c.items()), (1, 1), {'num_warps': 4})"
        " for c in configs}\n"
        "done = []\n"
        "host = HostCompiler(mm, variants, Split(), 'cuda:90', lambda c, why: done.append(why))\n"
        "host.submit(configs)\n"
        "t0 = time.time()\n"
        "while len(done) < 2 and time.time() - t0 < 120:\n"
        "    time.sleep(0.05)\n"
        "print(json.dumps({'same_pool': cp._pool is pool, 'failed': [w for w in done if w],"
        " 'done': len(done)}))\n"
    )
    settings = {"TUNEDSL_COMPILE_WORKERS": "2", "TUNEDSL_CONFIG_TIMEOUT": "40"}
    report = _compiled_in_a_fresh_process(tmp_path, code, settings, 600)
    assert report == {"same_pool": True, "failed": [], "done": 2}, report


def _compiled_in_a_fresh_process(
    tmp_path: Path, code: str, settings: dict[str, str], timeout_s: int
) -> dict:
    """Run ``code`` (``python -c``, the tests' directory as its argument) in a process that
    compiles for real with compile processes on, its own caches and ``settings``; the JSON
    report it prints last."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "TUNEDSL_COMPILE_PROCESSES": "on", **settings,
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}  # fmt: skip
    env.pop("TRITON_INTERPRET", None)
    tests = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(tests.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tests)], env=env, capture_output=True, text=True,
        timeout=timeout_s,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


STOPPED_SCRIPT = r"""
import dataclasses, json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import torch
import triton
from triton.backends.compiler import GPUTarget
from shared_kernels import mm

from tunedsl.backends import compile_processes, process_compile
from tunedsl.store import paths

S = 256
args = (torch.float16,) * 3 + (S, S, S, S, 1, S, 1, S, 1)
triton.knobs.cache.dir = tempfile.mkdtemp()  # a fresh Triton cache: it holds nothing anyway
os.environ["TUNEDSL_COMPILE_PROCESSES"] = "on"
pool = compile_processes.pool_for([mm], 2)
key = compile_processes.register(mm)
job = process_compile._worker_job(
    mm, key, str(mm.cache_key), args, dict(BM=64, BN=64, BK=64),
    {"num_warps": 4, "num_stages": 3}, GPUTarget("cuda", 90, 32),
)
job = dataclasses.replace(job, shared_limit=1024)  # far under what the tiles need
result = repr(process_compile.run_job(pool, job))
print("REPORT " + json.dumps({
    "result": result,
    "stats": {k: process_compile.stats[k] for k in ("over_shared", "over_shared_known")},
    "stored": sorted(os.listdir(paths.stopped_compiles_dir())),
}))
"""


def test_a_compile_stopped_over_shared_memory_is_remembered_by_a_later_process(
    tmp_path: Path,
) -> None:
    """A later process (the run after ``tunedsl precompile``, a restarted server) fails a
    compile a worker stopped over the limit before at once, from the cache's ``stopped/``;
    a damaged verdict, or one another user owns, is a miss: the worker compiles again and
    its own verdict stands."""
    first = run_report(tmp_path, "stopped.py", STOPPED_SCRIPT)
    assert first["stats"] == {"over_shared": 1, "over_shared_known": 0}
    assert re.fullmatch(r"OverSharedMemory\(required=\d+, limit=1024\)", first["result"])
    [name] = first["stored"]
    second = run_report(tmp_path, "stopped.py", STOPPED_SCRIPT)
    assert second == {**first, "stats": {"over_shared": 0, "over_shared_known": 1}}

    stored = tmp_path / "tunedsl" / "stopped" / name
    stored.write_text('{"required": 99')  # a writer killed half-way cannot leave this; a disk can
    damaged = run_report(tmp_path, "stopped.py", STOPPED_SCRIPT)
    assert damaged == first
    if os.geteuid() == 0:  # a forged verdict of another user's is not read
        stored.write_text('{"required": 999999, "limit": 1024}')
        os.chown(stored, 65534, 65534)
        forged = run_report(tmp_path, "stopped.py", STOPPED_SCRIPT)
        assert forged == first
        assert stored.stat().st_uid == os.geteuid()  # the worker's verdict replaced it


KEY_SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
from triton.runtime import cache as triton_cache
from shared_kernels import mm

from tunedsl.backends import process_compile
from tunedsl.backends.compile_pool import CompileJob, compile_stream

HASHING = triton_cache.triton_key  # Triton's own, lru-cached
os.environ["TUNEDSL_COMPILE_PROCESSES"] = "on"
S = 64
a = torch.empty(S, S, dtype=torch.float16)
args = (a, a, a, S, S, S, S, 1, S, 1, S, 1)
configs = [dict(BM=bm, BN=16, BK=32) for bm in (16, 32)]
compile = process_compile.variant_compiler(mm, len(configs), target="cuda:90", workers=2)
jobs = [CompileJob(str(c), lambda c=c: compile(args, c, {"num_warps": 4})) for c in configs]
hashes = sorted(r.hash for _, r in compile_stream(jobs, workers=2))
hashed = HASHING.cache_info().misses
print("REPORT " + json.dumps({
    "hashed": hashed, "key_used": triton_cache.triton_key(), "real_key": HASHING(),
    "hashes": hashes, "built": process_compile.stats["built"],
}))
"""


def test_a_later_process_takes_tritons_key_from_the_cache_not_hashing_triton_again(
    tmp_path: Path,
) -> None:
    """Hashing Triton (0.4 s a process, before its first compile jobs go out) happens once
    per installation: a later process takes the key stored beside the installation's
    fingerprint and compiles the same kernels under the same keys. A damaged file, one of
    another installation, or one another user owns, is hashed over and written again."""
    first = run_report(tmp_path, "key.py", KEY_SCRIPT)
    assert first["hashed"] == 1 and first["key_used"] == first["real_key"]
    assert first["built"] == 2
    stored = tmp_path / "tunedsl" / "triton_key.json"
    saved = json.loads(stored.read_text())
    assert saved["key"] == first["real_key"] and stored.stat().st_mode & 0o077 == 0
    second = run_report(tmp_path, "key.py", KEY_SCRIPT)
    assert second == {**first, "hashed": 0}

    forged = first["real_key"][:-64] + "0" * 64  # the right shape, another key
    for text, owner in (
        ('{"fingerprint": "', None),
        (json.dumps({"fingerprint": "0" * 64, "key": forged}), None),
        (json.dumps({**saved, "key": forged}), 65534),
    ):
        stored.write_text(text)
        if owner is not None:
            if os.geteuid() != 0:
                continue
            os.chown(stored, owner, owner)
        again = run_report(tmp_path, "key.py", KEY_SCRIPT)
        assert again == first, text
        assert json.loads(stored.read_text()) == saved
