"""An output file named on the command line that is a FIFO or a device (``--bundle
/dev/null``) is refused before any work, and stays what it was: a bundle is written whole
to a temporary file and renamed over its target, which would put a regular file in place of
the device (as root, /dev/null itself). Real commands in subprocesses, a real FIFO."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env

SCRIPT = """
from tunedsl import workload


@workload
def nothing():
    pass
"""


def _tunedsl(cache: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=child_env(cache),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(cwd),
        check=False,
    )


@pytest.mark.parametrize("command", ["cache export", "sweep --bundle"])
def test_a_fifo_named_as_the_output_is_refused_and_left_a_fifo(
    tmp_path: Path, command: str
) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    if command == "cache export":
        argv = ["cache", "export", str(fifo)]
    else:
        script = tmp_path / "work.py"
        script.write_text(SCRIPT)
        argv = ["sweep", str(script), "--no-ray", "--bundle", str(fifo)]
    done = _tunedsl(tmp_path / "cache", *argv, cwd=tmp_path)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{fifo}: not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert "sweep:" not in done.stdout  # refused before the sweep ran


def test_an_empty_bundle_name_is_refused_before_the_sweep(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    done = _tunedsl(
        tmp_path / "cache", "sweep", str(script), "--no-ray", "--bundle", "", cwd=tmp_path
    )
    assert done.returncode == 1 and "--bundle is empty" in done.stderr, done.stdout + done.stderr
    assert "sweep:" not in done.stdout
