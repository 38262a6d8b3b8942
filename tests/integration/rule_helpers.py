"""Helpers for the tests of shipped rules: sweep a site, run `tunedsl rules` in a
subprocess, ship the rules to a fresh cache, call the site on one size (real kernels under
the interpreter, the real command, real rule files). The fixtures ``built_rules`` and
``fresh_rules`` that use them are in conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runtime_helpers import call, site
from runtime_kernels import vadd

from tunedsl.store import rules as rule_store

SWEPT = (64, 128, 256, 512, 1024)
SPACE = {"tile": [32, 64, 128, 256]}


def sweep(name: str, sizes=SWEPT, **options) -> None:
    s = site(name, space=SPACE, options=options)
    for n in sizes:
        a, b = torch.randn(n), torch.randn(n)
        assert call(s, vadd, (a, b, torch.empty(n), n), n).source == "tuned"


def rules_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", *argv],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
        check=False,
    )


def ship(out: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A new process of a user who has the shipped rules and an empty cache."""
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(out))
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "fresh-cache"))
    rule_store.forget_loaded()


def rule_file(out: Path) -> Path:
    (path,) = sorted(out.glob("*.rule.json"))
    return path


def run(name: str, n: int, **options):
    s = site(name, space=SPACE, options=options)
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    res = call(s, vadd, (a, b, c, n), n)
    torch.testing.assert_close(c, a + b)
    return res


def two_rule_directories(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, large_space=SPACE
) -> dict[str, Path]:
    """Two current rules of the site "swept", one directory each on the path: "A" built from
    a sweep of small sizes (8..32), "B" from one of large sizes (64..512) over
    ``large_space``; then a fresh cache."""
    built = {}
    for part, sizes, space in (("A", (8, 16, 32), SPACE), ("B", (64, 128, 256, 512), large_space)):
        monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / f"cache-{part}"))
        s = site("swept", space=space)
        for n in sizes:
            a, b = torch.randn(n), torch.randn(n)
            assert call(s, vadd, (a, b, torch.empty(n), n), n).source == "tuned"
        built[part] = tmp_path / part
        done = rules_cli("build", "--out", str(built[part]))
        assert done.returncode == 0, done.stderr
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", os.pathsep.join(map(str, built.values())))
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "fresh-cache"))
    rule_store.forget_loaded()
    return built
