"""SIGTERM (a job scheduler's time limit, ``kill``, ``docker stop``) of the long commands
without Ray: ``tunedsl sweep --no-ray`` in this process or over GPU processes, and
``tunedsl precompile --tune``. Each is a real process sent a real SIGTERM, tuning real
Triton kernels under the interpreter (``precompile/sigterm.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import running_in_session, terminate_once

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "integration" / "sweep_fixtures" / "sweep_vadd.py")


def _kept(cache: Path) -> list[records.Record]:
    return [records.read_record_file(p) for p in cache.glob("records/*.json")]  # each validates


@pytest.mark.parametrize("gpus", [[], ["--gpus", "2"]], ids=["in-process", "two-gpu-processes"])
def test_sigterm_of_a_sweep_without_ray_writes_the_finished_tasks_and_leaves_no_process(
    tmp_path: Path, gpus: list[str]
) -> None:
    # SIGTERM ended the sweep at once (status -15): the finished task's records were never
    # written, and hours of tuning were lost.
    markers, cache = tmp_path / "markers", tmp_path / "cache"
    markers.mkdir()
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}, {"n": 300, "fail": "slow"}]))
    env = {**os.environ, "TRITON_INTERPRET": "1", "SWEEP_MARKERS": str(markers),
           "TUNEDSL_CACHE_DIR": str(cache)}  # fmt: skip
    env.pop("TUNEDSL_QUIET", None)  # the progress lines say when the quick task is done
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", *gpus,
            "--shapes", str(shapes)]  # fmt: skip
    # The quick task is done (sharded, the slow one may have started before it ended)
    status, said, left = terminate_once(argv, env, markers / "slow-started", "1/2 tasks")
    assert status == 143, said
    assert "Traceback" not in said, said
    assert "sweep: terminated (SIGTERM) after 1 of 2 tasks; wrote the 1 records" in said, said
    assert said.rstrip().splitlines()[-1] == "tunedsl: terminated (SIGTERM)", said
    kept = _kept(cache)
    assert len(kept) == 1 and "100" in str(kept[0].key), said
    assert left == [], f"a process of the sweep outlived it: {left}"


def test_sigterm_of_precompile_without_tune_stops_as_ctrl_c_does(tmp_path: Path) -> None:
    # Plain `precompile` (cross-compiling, no --tune) died by the signal (status -15),
    # saying nothing.
    slow = REPO / "tests" / "integration" / "precompile_fixtures" / "slow"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton-cache"),
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TUNEDSL_COMPILE_WORKERS": "2",
           "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}  # fmt: skip
    for name in ("TRITON_INTERPRET", "TUNEDSL_QUIET", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    argv = [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90", str(slow)]
    # Once the first compile is done (the progress line reports it), the others still running
    status, said, left = terminate_once(argv, env, tmp_path, "precompile: compiled")
    assert status == 143, said
    assert "Traceback" not in said, said
    assert said.rstrip().splitlines()[-1] == "tunedsl: terminated (SIGTERM)", said
    assert list((tmp_path / "triton-cache").rglob("*.cubin")), said  # what compiled is kept
    assert left == [], f"a process of precompile outlived it: {left}"


LIBRARY_SWEEP = """
import sys
import tunedsl
from tunedsl.precompile.sweep import sweep

try:
    sweep(sys.argv[1], sys.argv[2], use_ray=False)
except tunedsl.Terminated:
    print("caught Terminated", file=sys.stderr)
    sys.exit(143)
"""


def test_sigterm_of_the_librarys_sweep_writes_the_finished_tasks_and_raises_terminated(
    tmp_path: Path,
) -> None:
    # sweep() called from a user's script (not the CLI) died by the signal (status -15):
    # the finished task's records were never written.
    markers, cache = tmp_path / "markers", tmp_path / "cache"
    markers.mkdir()
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}, {"n": 300, "fail": "slow"}]))
    driver = tmp_path / "driver.py"
    driver.write_text(LIBRARY_SWEEP)
    env = {**os.environ, "TRITON_INTERPRET": "1", "SWEEP_MARKERS": str(markers),
           "TUNEDSL_CACHE_DIR": str(cache), "TUNEDSL_QUIET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, str(driver), SCRIPT, str(shapes)]
    status, said, left = terminate_once(argv, env, markers / "slow-started")
    assert status == 143, said
    assert "sweep: terminated (SIGTERM) after 1 of 2 tasks; wrote the 1 records" in said, said
    assert said.rstrip().splitlines()[-1] == "caught Terminated", said
    kept = _kept(cache)
    assert len(kept) == 1 and "100" in str(kept[0].key), said
    assert left == [], f"a process of the sweep outlived it: {left}"


OWN_HANDLER = """
import os, signal, sys
from tunedsl.precompile.sweep import sweep


def mine(signum, frame):
    print("the script's own handler", file=sys.stderr, flush=True)
    os._exit(7)


signal.signal(signal.SIGTERM, mine)
sweep(sys.argv[1], sys.argv[2], use_ray=False)
"""


def test_the_librarys_sweep_keeps_a_sigterm_handler_the_script_set(tmp_path: Path) -> None:
    # The rule of every SIGTERM tunedsl takes: a handler the program set is its own.
    markers = tmp_path / "markers"
    markers.mkdir()
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 300, "fail": "slow"}]))
    driver = tmp_path / "driver.py"
    driver.write_text(OWN_HANDLER)
    env = {**os.environ, "TRITON_INTERPRET": "1", "SWEEP_MARKERS": str(markers),
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TUNEDSL_QUIET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, str(driver), SCRIPT, str(shapes)]
    status, said, left = terminate_once(argv, env, markers / "slow-started")
    assert status == 7 and "the script's own handler" in said, said
    assert "terminated (SIGTERM)" not in said, said
    assert left == [], left


_SWALLOWS = """
import os, pathlib, subprocess, sys, time
from tunedsl import workload

MARKERS = pathlib.Path(os.environ["SWEEP_MARKERS"])


@workload
def swallows(n=1):
    try:  # a workload that catches the interrupt itself and goes on
        (MARKERS / "waiting").write_text("")
        time.sleep(120)
    except KeyboardInterrupt:
        pass
    # A process started now: what SIGTERM does in it (its SigIgn mask, bit 15)
    child = subprocess.run(
        [sys.executable, "-c", "print(open('/proc/self/status').read())"],
        capture_output=True, text=True, check=True,
    )
    ignored = next(l for l in child.stdout.splitlines() if l.startswith("SigIgn:"))
    (MARKERS / "child-sigign").write_text(ignored.split()[1])
    (MARKERS / "went-on").write_text("")
    time.sleep(120)  # only a second SIGTERM ends this early
    (MARKERS / "finished").write_text("")
"""


def test_a_sweep_whose_workload_swallows_sigterm_still_stops_on_the_next_and_children_keep_it(
    tmp_path: Path,
) -> None:
    # The first SIGTERM's handler set SIGTERM ignored: a workload that caught the interrupt
    # went on with SIGTERM ignored (a second one did nothing), and every process started
    # after that inherited the ignored SIGTERM.
    markers, cache = tmp_path / "markers", tmp_path / "cache"
    markers.mkdir()
    script = tmp_path / "swallows.py"
    script.write_text(_SWALLOWS)
    env = {**os.environ, "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(cache)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, "-m", "tunedsl", "sweep", str(script), "--no-ray"]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        for marker in ("waiting", "went-on"):
            deadline = time.monotonic() + 120
            while not (markers / marker).exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.1)
            if marker == "waiting":
                proc.send_signal(signal.SIGTERM)  # swallowed by the workload
        ignored = int((markers / "child-sigign").read_text(), 16)
        assert not ignored & (1 << (signal.SIGTERM - 1)), "a child inherited SIGTERM ignored"
        proc.send_signal(signal.SIGTERM)  # the second: the sweep stops
        out, err = proc.communicate(timeout=100)
        assert not (markers / "finished").exists(), (out, err)
        assert proc.returncode == 143, (out, err)
        assert err.rstrip().splitlines()[-1] == "tunedsl: terminated (SIGTERM)", err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for line in running_in_session(proc.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
