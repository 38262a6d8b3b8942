"""The project's pytest configuration (pyproject.toml's addopts), run on a probe suite in a
real pytest process: the tests go to several pytest-xdist workers, a test file to one worker,
so a module-scoped fixture (the gallery's run, the sdist built in the checkout) is made once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import os

import pytest


def note(line):
    with open(os.environ["PROBE_LOG"], "a") as fh:
        fh.write(line + "\\n")


@pytest.fixture(scope="module")
def built():
    note(f"built {__name__}")
    return __name__


@pytest.mark.parametrize("i", range(6))
def test_probe(built, i):
    note(f"ran {built} {os.environ.get('PYTEST_XDIST_WORKER', 'no-worker')}")
"""


def test_the_tests_run_on_two_workers_a_file_to_one(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(PROBE)
    log = tmp_path / "log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PROBE_LOG=str(log), PYTEST_XDIST_AUTO_NUM_WORKERS="2")  # -n auto's count
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "12 passed" in proc.stdout, proc.stdout
    lines = log.read_text().splitlines()
    # Each module's fixture was made once, and each file's tests ran on one worker.
    assert sorted(line for line in lines if line.startswith("built")) == [
        "built test_one",
        "built test_two",
    ]
    ran = [line.split() for line in lines if line.startswith("ran")]
    assert len(ran) == 12
    for module in ("test_one", "test_two"):
        workers = {worker for _, mod, worker in ran if mod == module}
        assert len(workers) == 1 and workers <= {"gw0", "gw1"}, (module, workers)
