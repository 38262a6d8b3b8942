"""A real ``redis-server`` on a free loopback port for the tests, and a sample record.

``.ci/run`` installs Debian's ``redis-server``; without it the tests that need one skip.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tunedsl.model.config import Config
from tunedsl.store.records import ConfigResult, Record

REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process without persistence, bound to 127.0.0.1."""

    def __init__(self, workdir: Path, password: str | None = None) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
        self.port = free_port()
        self.password = password
        self.workdir = workdir
        args = [
            REDIS_SERVER,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ]
        if password:
            args += ["--requirepass", password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.proc.returncode}") from None
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start listening in 20 s")

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url)

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-run."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def store_for(url: str, **settings: float) -> Any:
    """A ``RedisRecordStore`` for ``url`` (``settings``: RedisSettings' other fields)."""
    from tunedsl.store.redis_store import RedisRecordStore, RedisSettings

    return RedisRecordStore(RedisSettings(url=url, **settings))  # type: ignore[arg-type]


def sample_record(digest: str, tile: int = 128, site: str = "k.py:3:4") -> Record:
    fast, slow = Config(tile=tile), Config(tile=64 if tile != 64 else 256)
    return Record(
        site=site,
        digest=digest,
        key={"args": {"a": {"dtype": "float32", "shape": [4096], "stride": "1"}}},
        chosen=fast,
        results=(
            ConfigResult(fast, "ok", 0.5, 0.02, 40, 0.49, constexprs={"TILE": tile}),
            ConfigResult(slow, "ok", 0.9, 0.01, 30, 0.88, constexprs={"TILE": 64}),
        ),
        kernel={"module": "k", "qualname": "vadd", "file": "/k.py", "source_hash": "0" * 64},
        signature={"a": "*fp32", "n": "i32", "TILE": {"constexpr": tile}},
        device={"type": "cpu", "name": "interpreter"},
        versions={"triton": "3.6.0"},
        context={"env": {}},
        tuning_s=1.5,
        timestamp=1.0e9,
    )
