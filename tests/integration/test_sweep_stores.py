"""What a ``tunedsl sweep`` task reads and writes besides its own records directory: nothing.
A sweep measures every key it meets, and nothing reaches Redis before it merges (real sweep
processes, real Triton kernels under the interpreter, a real redis-server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from redis_server import RedisServer

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

SCRIPT = str(Path(__file__).parent / "sweep_fixtures" / "sweep_vadd.py")


def _sweep(tmp_path: Path, items: list[dict], **env: str) -> subprocess.CompletedProcess:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(items))
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes", str(shapes)],
        env={**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1", **env},
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def _redis_records(server: RedisServer) -> list[dict]:
    client = server.client()
    return [json.loads(client.get(k)) for k in client.keys("tunedsl:v1:record:*")]


def test_a_sweep_task_neither_writes_to_redis_before_the_merge_nor_takes_its_records(
    tmp_path: Path, server: RedisServer
) -> None:
    # A task tuned through Redis as any launch does: what it tuned reached Redis at once
    # (a task that failed afterwards left its keys there, "0 records written"), and a key
    # Redis held was taken from it, not measured (the sweep wrote the old record again).
    env = {"TUNEDSL_REDIS_URL": server.url, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache")}
    failed = _sweep(tmp_path, [{"n": 300, "fail": "after"}], **env)
    assert failed.returncode == 1 and "fails after tuning" in failed.stderr, failed.stderr
    assert _redis_records(server) == []
    first = _sweep(tmp_path, [{"n": 300}], **env)
    assert first.returncode == 0, first.stderr
    (before,) = _redis_records(server)  # the merge writes it
    again = _sweep(tmp_path, [{"n": 300}], **env)
    assert again.returncode == 0 and "1 record written" in again.stdout, again.stderr
    (after,) = _redis_records(server)
    assert after["digest"] == before["digest"] and after["timestamp"] > before["timestamp"]


def test_a_sweep_measures_a_key_whose_record_is_shipped_on_the_records_path(
    tmp_path: Path,
) -> None:
    # The task took the shipped record, which is never copied: the sweep wrote nothing for
    # the key and said "0 records written, 0 failed".
    first = _sweep(tmp_path, [{"n": 300}], TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    assert first.returncode == 0, first.stderr
    shipped = tmp_path / "shipped"
    shutil.copytree(tmp_path / "cache" / "records", shipped)
    (old,) = [records.read_record_file(p) for p in shipped.glob("*.json")]
    done = _sweep(
        tmp_path, [{"n": 300}], TUNEDSL_CACHE_DIR=str(tmp_path / "new-cache"),
        TUNEDSL_RECORDS_PATH=str(shipped),
    )  # fmt: skip
    assert done.returncode == 0 and "1 record written, 0 failed" in done.stdout, done.stdout
    (new,) = [records.read_record_file(p) for p in (tmp_path / "new-cache").glob("records/*")]
    assert new.digest == old.digest and new.timestamp > old.timestamp
