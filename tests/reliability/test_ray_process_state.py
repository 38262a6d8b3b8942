"""What a sweep on Ray leaves of the process that ran it (``precompile/ray_instance.py``,
``sweep.run_on_ray``): the records, called from any thread; the working directory, the
variables and hooks Ray sets, its descriptors. Real Ray in a fresh process of its own (Ray
changes some of these when it is imported; pytest enables ``faulthandler`` itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "integration" / "sweep_fixtures" / "sweep_vadd.py")

# A program whose own thread (a service's worker, asyncio.to_thread, a notebook job) runs a
# sweep on its own Ray instance while its main thread goes on: what the main thread saw of
# the working directory meanwhile, and the process's state before and after, as JSON (the
# descriptors of the actors' directories: Ray's core keeps its own log files open for good).
SWEEP_IN_A_THREAD = r"""
import faulthandler, io, json, os, sys, threading, time
from tunedsl.precompile.sweep import sweep

RAY_SETS = ("PYTHONBREAKPOINT", "RAY_USAGE_STATS_ENABLED", "RAY_CLIENT_MODE", "RAY_AUTH_MODE")

def state():
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed
            pass
    return {"env": {name: os.environ.get(name) for name in RAY_SETS},
            "faulthandler": faulthandler.is_enabled(), "excepthook": repr(sys.excepthook),
            "descriptors": sorted(p for p in held if "tunedsl-ray-" in p and "/actor-" in p)}

before = state()
result = {}

def run():
    try:
        written, outcomes = sweep(sys.argv[1], sys.argv[2], use_ray=True, gpus_per_task=0,
                                  actors=2, out=io.StringIO())
        result.update(written=len(written), errors=[o.error for o in outcomes])
    except BaseException as err:
        result["raised"] = repr(err)

worker = threading.Thread(target=run)
worker.start()
seen = set()
while worker.is_alive():
    seen.add(os.getcwd())
    time.sleep(0.002)
print("FACTS", json.dumps({**result, "cwds": sorted(seen), "before": before, "after": state()}))
"""


def test_a_ray_sweep_in_a_thread_writes_its_records_and_leaves_the_process_as_it_was(
    tmp_path: Path,
) -> None:
    # From a thread other than the main one, the sweep measured every task, then leaving Ray
    # called signal.signal() there ("ValueError: signal only works in main thread"), and no
    # record was written. And after any Ray sweep: the process's working directory had been
    # "/" for the seconds ray.init took (another thread's relative paths went there);
    # breakpoint() here and in every child process started after was Ray's debugger
    # (PYTHONBREAKPOINT), with RAY_USAGE_STATS_ENABLED and RAY_CLIENT_MODE left set,
    # faulthandler enabled and sys.excepthook Ray's; one descriptor of each actor's deleted
    # scratch directory stayed open.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    driver = tmp_path / "driver.py"
    driver.write_text(SWEEP_IN_A_THREAD)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}, {"n": 200}]))
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    for name in ("RAY_ADDRESS", "PYTHONFAULTHANDLER", "PYTHONBREAKPOINT", "RAY_CLIENT_MODE"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, str(driver), SCRIPT, str(shapes)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("FACTS ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    facts = json.loads(lines[-1].removeprefix("FACTS "))
    got = {key: facts.get(key) for key in ("raised", "written", "errors", "cwds", "after")}
    want = {"raised": None, "written": 2, "errors": [None, None], "cwds": [str(tmp_path)],
            "after": facts["before"]}  # fmt: skip
    assert got == want
    assert facts["before"]["env"]["PYTHONBREAKPOINT"] is None  # what it compares with
    assert facts["before"]["faulthandler"] is False
    records = list((tmp_path / "cache").glob("records/*.json"))
    assert len(records) == 2
