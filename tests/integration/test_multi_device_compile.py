"""Multi-device tuning compiles each configuration once, on the host, and measures while it
compiles (``backends/multi_device.py``).

On the CPU the host stage cross-compiles for ``cuda:90`` (real Triton compiles: MLIR, LLVM,
``ptxas``, a cubin in Triton's cache), while two interpreter workers measure. A script in a
subprocess: the host must not interpret (it compiles), the workers must (no GPU here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

TESTS = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
from shared_kernels import mm

from tunedsl.backends import multi_device
from tunedsl.engine.driver import run_search
from tunedsl.engine.search import make_strategy
from tunedsl.model.config import Config
from tunedsl.model.space import ListSpace
from tunedsl.model.variant import Variant
from tunedsl.runtime.tuner import TuneRequest

S = 64
a, b = torch.randn(S, S, dtype=torch.float16), torch.randn(S, S, dtype=torch.float16)
c = torch.empty(S, S, dtype=torch.float16)
configs = [Config(BM=bm, BN=bn, BK=bk) for bm in (16, 32) for bn in (16, 32) for bk in (16, 32)]
args = (a, b, c, S, S, S, *a.stride(), *b.stride(), *c.stride())
variants = [
    Variant(cfg, args, dict(cfg.items()), (S // cfg.BM, S // cfg.BN), {"num_warps": 4})
    for cfg in configs
]
req = TuneRequest(kernel=mm, variants=variants)
# The workers (started with the measurer) run the interpreter (no GPU); this process
# compiles for the H100/H200 target.
os.environ["TRITON_INTERPRET"] = "1"
m = multi_device.MultiDeviceMeasurer(
    req, [0, 0], opening_reps=1, chunk=1, compile_target="cuda:90"
)
m.wait_started()
del os.environ["TRITON_INTERPRET"]
try:
    # Batches of 4: the driver announces the second batch (prefetch) before racing the first.
    strategy = make_strategy("exhaustive", batch=4)
    out = run_search(ListSpace(configs), strategy, m, final_leaders=2)
finally:
    m.close()
cache = os.environ["TRITON_CACHE_DIR"]
cubins = [f for _, _, files in os.walk(cache) for f in files if f.endswith(".cubin")]
json.dump({
    "configs": [repr(c) for c in configs],
    "compiles": {repr(c): n for c, n in m.compiles.items()},
    "owners": {repr(c): i for c, i in m.owner.items()},
    "status": {repr(o.config): o.status for o in out.observations},
    "events": [(kind, repr(c), t) for kind, c, t in m.events],
    "cubins": len(cubins),
    "chosen": repr(out.chosen),
    "compile_cpu_s": m.stats.compile_cpu_s,
    "measure_s": m.stats.measure_s,
}, open(sys.argv[2], "w"))
"""


def test_each_configuration_is_compiled_once_on_the_host_and_measured_while_others_compile(
    tmp_path: Path,
) -> None:
    script = tmp_path / "multi.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        TUNEDSL_CONFIG_TIMEOUT="120",
        TUNEDSL_COMPILE_WORKERS="2",
        PYTHONPATH=os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")]),
    )
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, str(script), str(TESTS), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    configs = got["configs"]
    # Compiled once each, by the host stage (not once per worker): one cubin per configuration.
    assert got["compiles"] == {c: 1 for c in configs}
    assert got["cubins"] == len(configs)
    assert got["status"] == {c: "ok" for c in configs} and got["chosen"] in configs
    # Both workers measured part of the batch (each configuration's opening on one of them).
    assert set(got["owners"]) == set(configs) and set(got["owners"].values()) == {0, 1}
    # Pipelined: a configuration is measured only after the host compiled it; the second
    # batch went to the host (after the first) before the first batch's first measurement,
    # and the first measurement began while the host was still compiling.
    compiled = {c: t for kind, c, t in got["events"] if kind == "compiled"}
    measuring = {c: t for kind, c, t in got["events"] if kind == "measuring"}
    submitted = [(t, c) for kind, c, t in got["events"] if kind == "submitted"]
    assert all(compiled[c] < measuring[c] for c in configs)
    assert [c for _, c in sorted(submitted)] == configs
    assert max(t for t, _ in submitted) < min(measuring.values())
    assert min(measuring.values()) < max(compiled.values())
    assert got["compile_cpu_s"] > 0 and all(s > 0 for s in got["measure_s"])
