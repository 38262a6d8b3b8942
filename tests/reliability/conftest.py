"""Shared set-up of the reliability tests: fault injection, concurrency, fuzzing, security.

Tests that run real Triton kernels (on the CPU, through Triton's interpreter) are marked
``needs_triton``. ``TRITON_INTERPRET`` must be set before triton is imported, so it is set
here, at import, for this process and for every subprocess these tests start.
"""

from __future__ import annotations

import os
import sys

import pytest

from tunedsl import warn

os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def _fresh_cache_state(monkeypatch: pytest.MonkeyPatch):
    """Each test starts with the process's one-warning-per-topic memory cleared.

    tunedsl warns once per process about a broken cache (by design: a broken cache must
    not flood the output); each test injects its own fault, so it must see its own warning.
    """
    from tunedsl import bytecode

    # PYTHONDONTWRITEBYTECODE=1 (set on some machines) turns bytecode caching off, and these
    # tests are about the cache.
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    bytecode.reset()
    warn.forget()
    yield
    bytecode.reset()
    warn.forget()
