"""``tunedsl sweep`` interrupted while it writes the finished tasks' records (a real sweep
process, real Triton kernels under the interpreter, a real redis-server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from redis_server import RedisServer

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")

SCRIPT = str(Path(__file__).parent / "sweep_fixtures" / "sweep_vadd.py")


def _wait_for(proc: subprocess.Popen[bytes], ready: Callable[[], object], within_s: float) -> None:
    """Poll ``ready()`` while the sweep runs (its output is the failure's message)."""
    deadline = time.monotonic() + within_s
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)


def _interrupt_once_a_record_is_written(
    proc: subprocess.Popen[bytes], cache: Path, within_s: float
) -> bytes:
    """Ctrl-C once the sweep is writing the records (the local file is written first, the
    Redis write then waits on the stopped server); the sweep's stderr."""
    _wait_for(proc, lambda: list(cache.glob("records/*.json")), within_s)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)[1]


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
        # the first task is done once the second has started
        _wait_for(proc, (markers / "slow-started").exists, 300)
        os.kill(server.proc.pid, signal.SIGSTOP)  # its write to Redis waits for an answer
        stopped = True
        proc.send_signal(signal.SIGINT)
        err = _interrupt_once_a_record_is_written(proc, cache, 60)
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
            err = _interrupt_once_a_record_is_written(proc, cache, 300)
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


def test_the_interrupted_line_starts_below_the_progress_bar_on_a_terminal(
    tmp_path: Path,
) -> None:
    # On a terminal the bar's line stays open between tasks: the interrupted sweep's line
    # was written at its end ("sweep [###   ] 1/2 taskssweep: interrupted after ...").
    import pty

    markers = tmp_path / "markers"
    markers.mkdir()
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}, {"n": 300, "fail": "slow"}]))
    env = {**os.environ, "TRITON_INTERPRET": "1", "SWEEP_MARKERS": str(markers),
           "TUNEDSL_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    env.pop("TUNEDSL_QUIET", None)
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes",
            str(shapes)]  # fmt: skip
    master, terminal = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    seen = b""
    try:
        deadline = time.monotonic() + 300
        while not (markers / "slow-started").exists() or b"1/2 tasks" not in seen:
            assert proc.poll() is None and time.monotonic() < deadline, seen
            seen += _read(master)
        proc.send_signal(signal.SIGINT)
        while proc.poll() is None and time.monotonic() < deadline:
            seen += _read(master)
        seen += _read(master)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    assert proc.returncode == 130, seen
    assert b"1/2 tasks\r\nsweep: interrupted after 1 of 2 tasks" in seen, seen


def _read(fd: int) -> bytes:
    import select

    if not select.select([fd], [], [], 0.1)[0]:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # the terminal's last writer is gone
        return b""
