"""The gallery on a GPU, at full size: every example tuned, timed with do_bench, correct.

Slow (minutes: the matmul space alone has 52 configurations); run on the GPU machine with
``pytest -s tests/integration/test_gallery_gpu.py`` (``-s`` prints the report's table).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.needs_triton]


def test_the_gallery_on_a_gpu(tmp_path: Path) -> None:
    out = tmp_path / "gallery-report"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "gallery", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    print(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert "CUDA GPU found" in proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["environment"]["interpreted"] is False
    assert report["environment"]["timing_method"].startswith("triton.testing.do_bench")
    for entry in report["examples"]:
        result = entry["result"]
        assert entry["status"] == "ok", entry["message"]
        assert result["time_ms"] > 0 and result["torch_time_ms"] > 0
        assert len(result["timings"]) > 1, f"{entry['name']}: a space of one on a GPU"
        assert (out / "plots" / f"{entry['name']}.png").stat().st_size > 1000
    print((out / "report.md").read_text())
