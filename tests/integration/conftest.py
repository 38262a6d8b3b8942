"""Integration tests run real Triton kernels on the CPU through Triton's interpreter.

TRITON_INTERPRET must be set before triton is imported, so it is set here, at import.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest


@pytest.fixture
def tune_count(monkeypatch: pytest.MonkeyPatch) -> list:
    """Counts real tuning runs (each is one call of ``runtime.tuner.tune``)."""
    from tunedsl.runtime import tuner

    calls: list = []
    real = tuner.tune

    def counting(req):
        calls.append(req)
        return real(req)

    monkeypatch.setattr(tuner, "tune", counting)
    return calls


@pytest.fixture
def server(tmp_path):
    """A real redis-server on a free loopback port, stopped after the test
    (tests/integration/redis_server.py; skips where redis-server is not installed)."""
    from redis_server import RedisServer

    srv = RedisServer(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches empty before and after (a test that compiles with torch.compile)."""
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def fresh_rules():
    """No warning shown and no rule file loaded yet in this process (rule_helpers.py)."""
    from tunedsl.store import rules as rule_store
    from tunedsl.warn import forget

    forget()
    rule_store.forget_loaded()
    yield
    rule_store.forget_loaded()


@pytest.fixture
def built_rules(tmp_path):
    """The rules directory `tunedsl rules build` makes from a sweep of the site "swept"
    (rule_helpers.py)."""
    from rule_helpers import rules_cli, sweep

    sweep("swept")
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "swept" in done.stdout and "geomean" in done.stdout
    return out
