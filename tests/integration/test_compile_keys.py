"""The variant a compile worker builds is the one Triton's JIT looks up, at every alignment.

Triton specialises a launch on its integer arguments (divisible by 16, equal to 1) and on
its pointers' 16-byte alignment, and keys both its kernel table and its cache on that. A
compile job describes the call to a forked worker (``process_compile._worker_job``), which
compiles into Triton's cache; the tuning process's compile of the same call, and then the
measurement's launches, go through Triton's JIT. Had the job carried another
specialisation than the JIT computes (sizes that are not multiples of 16 are where they
would part), every configuration would be compiled twice.

Real Triton, no GPU: the JIT runs up to its compile against a driver that answers with an
H100's target (``cuda:90``), and its own keys are read back through its public hooks
(``knobs.runtime.jit_cache_hook``; the async-compile mode tunedsl's compile uses).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from compile_scripts import run_report

pytestmark = pytest.mark.needs_triton


SCRIPT = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import torch
import triton
from concurrent.futures import Future
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from shared_kernels import mm

from tunedsl.backends import compat, process_compile
from tunedsl.backends.triton_compile import compile_source
from tunedsl.backends.triton_launch import launch_jit

TARGET = GPUTarget("cuda", 90, 32)


class H100Driver:  # what JITFunction.run asks its driver before it compiles
    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0

    def get_current_target(self):
        return TARGET


class NeverRuns:  # the JIT submits its compile here; only its key is wanted
    def submit(self, fn, *args, **kwargs):
        return Future()


driver.set_active(H100Driver())
table_keys = []


def jit_cache_hook(*, key, compile, **_):  # called on a miss of the JIT's kernel table
    table_keys.append([str(key), sorted(map(str, compile["configs"][0].items()))])
    return True  # nothing compiled, nothing launched


def call(m, n, k, offset):
    a = torch.empty(m * k + offset, dtype=torch.float16)[offset:].view(m, k)
    b = torch.empty(k, n, dtype=torch.float16)
    c = torch.empty(m, n, dtype=torch.float16)
    return (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            c.stride(0), c.stride(1))


kwargs = {"BM": 16, "BN": 16, "BK": 16}
options = {"num_warps": 4, "num_stages": 2}
report = {}
for name, (m, n, k, offset) in {
    "3000x2000x1000": (3000, 2000, 1000, 0),
    "4096^3": (4096, 4096, 4096, 0),
    "one row, unaligned a": (1, 40, 24, 1),
}.items():
    args = call(m, n, k, offset)
    # The tuning process's compile (compile_variant: JITFunction.warmup) and a measurement
    # launch (the measurer's kernel[grid](...)): each one's key in the JIT's kernel table.
    table_keys.clear()
    triton.knobs.runtime.jit_cache_hook = jit_cache_hook
    compat.jit_warmup(mm, args, kwargs, options)
    launch_jit(mm, (1, 1), args, {**kwargs, **options})
    changed = dict(options, num_warps=8)  # another variant: its key must differ
    launch_jit(mm, (1, 1), args, {**kwargs, **changed})
    triton.knobs.runtime.jit_cache_hook = None
    # The Triton cache key the JIT would compile under (the key it hands its async mode).
    mode = compat.keyed_async_mode(NeverRuns())
    with compat.async_compile_mode(mode):
        compat.jit_warmup(mm, args, kwargs, options)
    # What a compile worker is sent for this call, compiled as the worker compiles it.
    job = process_compile._worker_job(mm, 0, str(mm.cache_key), args, kwargs, options, TARGET)
    built = compile_source(mm, job.signature, job.constexprs, job.attrs, job.options, TARGET)
    report[name] = {
        "table_keys": table_keys[:],
        "jit_cache_hash": hashlib.sha256(mode.cache_key.encode()).hexdigest(),
        "worker_hash": built.hash,
        "worker_attrs": sorted(map(str, job.attrs.items())),
        "worker_constexprs": sorted(map(str, job.constexprs.items())),
    }
print("REPORT " + json.dumps(report))
"""


def test_a_compile_workers_variant_is_the_jits_at_sizes_not_multiples_of_16(
    tmp_path: Path,
) -> None:
    report = run_report(tmp_path, "compile_keys.py", SCRIPT)

    for name, case in report.items():
        compiled, launched, other = case["table_keys"]
        # The measurement's launch finds what the compile put in the JIT's table ...
        assert launched == compiled, name
        assert other[0] != compiled[0], name  # (a key that tells variants apart)
        # ... and the worker built exactly the cache entry that compile looks up.
        assert case["worker_hash"] == case["jit_cache_hash"], name
        assert case["worker_attrs"] == compiled[1], name

    # The cases differ where Triton's specialisation does: 3000x2000x1000 has integers that
    # are not multiples of 16 (M, K, the row stride of a), 4096^3 none; an unaligned
    # pointer and an integer equal to 1 (a constant) change it again.
    hashes = {case["worker_hash"] for case in report.values()}
    assert len(hashes) == 3
    aligned, unaligned = report["4096^3"], report["3000x2000x1000"]
    assert len(unaligned["worker_attrs"]) == len(aligned["worker_attrs"])
    assert unaligned["worker_attrs"] != aligned["worker_attrs"]
    one_row = report["one row, unaligned a"]
    assert any(c.startswith("((3,), 1)") for c in one_row["worker_constexprs"])  # M == 1
