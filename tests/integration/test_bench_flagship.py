"""``benchmarks/bench_flagship.py --plumbing``: the whole benchmark on the CPU interpreter.

The real parent (probe-free without a GPU), real child processes for both tuners with their
own empty caches, the gallery's examples imported as modules, ``triton.autotune`` over the
same spaces and prune, the exhaustive re-timing, and the one table, at tiny sizes. What it
proves is that a GPU run will not stop on a mistake in the plumbing; the numbers are the
interpreter's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_triton, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_plumbing_runs_every_row_with_both_tuners(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_flagship.py"), "--plumbing",
         "--json", str(out)],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note:" not in proc.stdout, proc.stdout  # no child failed or was stopped
    results = json.loads(out.read_text())["results"]
    assert sorted(results) == ["attention d128", "attention d64", "matmul float16"]
    for group, by_tuner in results.items():
        assert sorted(by_tuner) == ["triton", "tunedsl"], group
        assert len(by_tuner["triton"]) == len(by_tuner["tunedsl"]) == 2, group
        for rows in by_tuner.values():
            for row in rows:
                assert row["first_call_s"] > 0 and row["ours_ms"] > 0 and row["ref_ms"] > 0
                assert row["rel_err"] < 2e-2, (group, row)
        for row in by_tuner["tunedsl"]:
            if group.startswith("attention"):
                # every configuration the prune keeps was re-timed, the choice among them
                table = row["exhaustive"]["median_ms"]
                assert len(table) >= 2 and not row["exhaustive"]["failed"], row
                chosen = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}"
                                  for k, v in sorted(row["chosen"].items()))  # fmt: skip
                assert chosen in table, (chosen, sorted(table))
    table_lines = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert len(table_lines) == 1 + 6  # the header and one line per row
