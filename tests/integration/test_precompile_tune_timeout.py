"""``tunedsl precompile --tune --timeout S`` bounds the tuning's compiles too, and the
records the tuning writes state that limit (``backends/compile_limit.py``).

The tuning is the precompile site's (``precompile/workload.py`` ``PrecompileSite``) around a
stand-in site that runs the host compile stage of a real tuning (``backends/host_compile.py``)
on real ``cuda:90`` cross-compiles, in a fresh process (the host must not interpret) whose
``TUNEDSL_CONFIG_TIMEOUT`` is 300 s. A thread beside the tuning keeps that limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

CODE = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
import torch
from shared_kernels import mm
from tunedsl.backends.host_compile import HostCompiler, Split
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant
from tunedsl.precompile import workload as wl
from tunedsl.runtime import timeouts

S = 64
a = torch.empty(S, S, dtype=torch.float16)
args = (a, a, a, S, S, S, S, 1, S, 1, S, 1)
configs = [Config(BM=m, BN=16, BK=16) for m in (16, 32)]
variants = {c: Variant(c, args, dict(c.items()), (1, 1), {"num_warps": 4}) for c in configs}
seen = {}


class Tuning:
    # A site whose miss runs the host compile stage of a tuning and notes what a record
    # of it would state.
    label = "mm.py:1:1"

    def __call__(self, kernel, args, kwargs, bind, key, lazy):
        done = []
        host = HostCompiler(mm, variants, Split(), "cuda:90", lambda c, why: done.append(why))
        host.submit(configs)
        t0 = time.time()
        while len(done) < len(configs) and time.time() - t0 < 600:
            time.sleep(0.05)
        beside = []
        thread = threading.Thread(target=lambda: beside.append(timeouts.limits()))
        thread.start()
        thread.join()
        seen.update(why=done, noted=timeouts.noted(), beside=beside[0])
        return None


site = wl.PrecompileSite(Tuning())
with wl.precompile_mode(None, True, timeout_s=0.01):
    site(mm, args, {}, lambda c: ((), dict(c.items()), (1, 1)), "k", None)
seen["after"] = timeouts.limits()
print(json.dumps(seen))
"""


def test_precompile_timeout_bounds_the_tunings_compiles_and_its_record_states_it(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "TUNEDSL_COMPILE_PROCESSES": "on", "TUNEDSL_CONFIG_TIMEOUT": "300",
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}  # fmt: skip
    env.pop("TRITON_INTERPRET", None)
    tests = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(tests.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", CODE, str(tests)], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # Each compile ran past --timeout's 0.01 s, not TUNEDSL_CONFIG_TIMEOUT's 300 s.
    assert len(seen["why"]) == 2, seen
    assert all(w and "compile timed out after 0.01 s" in w for w in seen["why"]), seen
    assert seen["noted"] == {"limits": {"compile_s": 0.01, "answer_s": seen["beside"]["answer_s"]}}
    # --timeout is a compile limit: the worker's answer keeps TUNEDSL_CONFIG_TIMEOUT's.
    assert seen["noted"]["limits"]["answer_s"] == 300.0, seen
    # Another thread, and this one after precompile, keep the process's limit.
    assert seen["beside"]["compile_s"] == 300.0 and seen["after"]["compile_s"] == 300.0, seen
