"""Running a test's script in a fresh process that compiles for real, and reading its report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def run_report(tmp_path: Path, name: str, text: str) -> dict:
    """Run ``text`` as a script (``@triton.jit`` needs a source file) in a fresh process
    that compiles for real (no interpreter), with its own caches; its REPORT line. The
    script gets the tests' directory as its first argument (for ``shared_kernels``)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    env["TUNEDSL_CACHE_DIR"] = str(tmp_path / "tunedsl")
    script = tmp_path / name
    script.write_text(text)
    out = subprocess.run(
        [sys.executable, str(script), str(TESTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("REPORT ")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(lines[-1][len("REPORT ") :])
