"""``tunedsl.precompile.precompile``: the library function behind the command, called from a
real process (the command only parses and renders around it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

FIXTURES = Path(__file__).parent / "precompile_fixtures"
REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from tunedsl.precompile import Summary, precompile
events = []
summary = precompile(sys.argv[1:], on_result=lambda site, cfg, outcome: events.append(outcome))
assert isinstance(summary, Summary)
print(json.dumps({
    "notes": summary.notes,
    "errors": summary.errors,
    "failed": summary.failed,
    "workload_files": summary.workload_files,
    "interpreted": sum(r.interpreted for r in summary.reports),
    "events": events,
}))
"""


def test_the_library_function_reports_what_it_did(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        TRITON_INTERPRET="1",
        TUNEDSL_NO_AUTO_INTERPRET="1",
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
        PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"),
    )
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(FIXTURES / "good")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert not out["failed"] and out["errors"] == []
    assert out["workload_files"] == 2
    assert out["interpreted"] == 8  # four configurations in each of the two scripts
    assert out["events"] == ["interpreted"] * 8  # on_result heard each one
    assert any("nothing to compile" in n for n in out["notes"])


def test_the_library_function_names_a_missing_path() -> None:
    from tunedsl.errors import UsageError
    from tunedsl.precompile import precompile

    with pytest.raises(UsageError, match=r"no such file or directory: .*nope\.py"):
        precompile([str(FIXTURES / "nope.py")])
