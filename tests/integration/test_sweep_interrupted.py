"""``tunedsl sweep`` interrupted while it writes the finished tasks' records (a real sweep
process, real Triton kernels under the interpreter, a real redis-server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis_server import RedisServer

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")

SCRIPT = str(Path(__file__).parent / "sweep_fixtures" / "sweep_vadd.py")


def test_a_second_ctrl_c_while_the_finished_tasks_records_are_written_says_what_was_written(
    tmp_path: Path, server: RedisServer
) -> None:
    # The second interrupt ended the sweep with "tunedsl: interrupted" alone: nothing said
    # whether the finished tasks' records were written.
    markers, cache = tmp_path / "markers", tmp_path / "cache"
    markers.mkdir()
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}, {"n": 300, "fail": "slow"}]))
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(cache),
           "TUNEDSL_REDIS_URL": f"{server.url}?socket_timeout=120"}  # fmt: skip
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes",
            str(shapes)]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stopped = False
    try:
        deadline = time.monotonic() + 300
        while not (markers / "slow-started").exists():  # the first task is done by then
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        os.kill(server.proc.pid, signal.SIGSTOP)  # its write to Redis waits for an answer
        stopped = True
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while not list(cache.glob("records/*.json")):  # the local file is written first
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if stopped:
            os.kill(server.proc.pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err.decode()
    assert (
        "sweep: interrupted again while writing the finished tasks' records: 0 were written"
        in err.decode()
    ), err.decode()
    # What is in the cache is whole: the finished task's record, and no temporary file.
    kept = [records.read_record_file(p) for p in cache.glob("records/*.json")]
    assert len(kept) == 1 and "[100]" in str(kept[0].key), [r.key for r in kept]
    assert [p.name for p in cache.glob("records/*") if not p.name.endswith(".json")] == []


def test_ctrl_c_while_a_finished_sweep_writes_its_records_says_what_was_written(
    tmp_path: Path, server: RedisServer
) -> None:
    # Every task done, the records being written (Redis slow to answer): Ctrl-C ended the
    # sweep with "tunedsl: interrupted" alone.
    markers, cache, bundle = tmp_path / "markers", tmp_path / "cache", tmp_path / "b.json"
    markers.mkdir()
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}]))
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(cache),
           "TUNEDSL_REDIS_URL": f"{server.url}?socket_timeout=120"}  # fmt: skip
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes",
            str(shapes), "--bundle", str(bundle)]  # fmt: skip
    os.kill(server.proc.pid, signal.SIGSTOP)  # a task never asks Redis; the merge waits on it
    try:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 300
            while not list(cache.glob("records/*.json")):  # the local file is written first
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert proc.returncode == 130, err.decode()
    says = "sweep: interrupted while writing the records: 0 were written, each whole"
    assert says in err.decode() and "and no bundle" in err.decode(), err.decode()
    kept = [records.read_record_file(p) for p in cache.glob("records/*.json")]
    assert len(kept) == 1 and not bundle.exists()
