"""The README's complete script runs as the README says: `tunedsl run add.py` tunes and checks
on this machine (the interpreter, without a GPU), and a second run finds the record."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.needs_triton


def test_the_readmes_script_runs_tunes_and_is_warm_the_second_time(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    script = re.search(r"```python\n(.*?)```", readme, re.S)
    assert script is not None and "def main():" in script.group(1)
    path = tmp_path / "add.py"
    path.write_text(script.group(1))
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "run", str(path)],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    assert re.search(r"Config\(tile=\d+, num_warps=\d\) \(tuned\)", run())
    assert re.search(r"Config\(tile=\d+, num_warps=\d\) \(disk\)", run())
