"""Bad arguments of `tunedsl sweep` about Ray: each a clear error naming the argument and
the fix, before any Ray instance starts, never a traceback nor a misleading one (the real
command in a subprocess, with Ray installed)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed"
)

SCRIPT = """
from tunedsl import workload


@workload
def nothing():
    pass
"""


def _sweep(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    env = child_env(tmp_path / "cache")
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "sweep", str(script), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--actors", "0", "--gpus-per-task", "0"], "actors=0: give 1 or more Ray actors"),
        (["--actors", "-3", "--gpus-per-task", "0"], "actors=-3: give 1 or more Ray actors"),
        (["--no-ray", "--actors", "2"], "--actors 2 runs the sweep on Ray, and --no-ray"),
        (["--no-ray", "--ray", "auto"], "--ray auto runs the sweep on Ray, and --no-ray"),
        (["--ray", "::bad::"], "sweep --ray ::bad::: cannot join a Ray cluster"),
    ],
)
def test_a_bad_ray_argument_is_an_error_naming_it(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    done = _sweep(tmp_path, *argv)
    assert done.returncode == 1, done.stdout + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "records written" not in done.stdout
    assert "actor died" not in done.stderr  # refused before any Ray actor was asked for
