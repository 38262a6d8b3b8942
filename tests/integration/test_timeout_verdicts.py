"""A timeout is a verdict under a limit, not about the configuration: a configuration that
timed out under one ``TUNEDSL_CONFIG_TIMEOUT`` is measured again by a later process under a
larger one, and the rest of the record's timings are reused. Real processes, real isolated workers, Triton's interpreter: the kernel's
second configuration is the faster one, but its first launch in a process waits 2.5 s, past
a limit of 1 s (a worker preparing a configuration has the compile limit plus the answer
limit: 2 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tunedsl.store import paths

pytestmark = pytest.mark.needs_triton
HERE = Path(__file__).resolve().parent

CHILD = """
import json, sys
import torch
from timeout_kernels import slow_first_copy
from tunedsl import autotune_launch
n = 64
x, y = torch.randn(n), torch.zeros(n)
space = [{"FIRST": 0, "EACH": 50, "BLOCK": 64}, {"FIRST": 2500, "EACH": 0, "BLOCK": 64}]
res = autotune_launch(slow_first_copy, space=space, grid=(1,), args=(x, y, n),
                      kwargs=lambda c: dict(c.items()), verify=sys.argv[2:] != ["unverified"],
                      isolate=sys.argv[1] == "isolate", name="slow-to-answer")
assert torch.equal(x, y)
print(json.dumps({"source": res.source, "first": res.config.FIRST,
                  "slow": [res.timings[c].status for c in res.timings if c.FIRST][0],
                  "why": [res.timings[c].reason or "" for c in res.timings if c.FIRST][0]}))
"""


def _run(tmp_path: Path, limit: str, how: str = "isolate", *more: str) -> dict[str, Any]:
    """One process tuning (or reading) the key under ``TUNEDSL_CONFIG_TIMEOUT=limit``."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "TUNEDSL_CONFIG_TIMEOUT": limit, "TUNEDSL_QUIET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    done = subprocess.run([sys.executable, str(script), how, *more], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _record() -> Path:
    (found,) = paths.records_dir().glob("*.json")
    return found


def test_a_timeout_is_measured_again_under_a_larger_limit(tmp_path: Path) -> None:
    """Under a limit of 1 s the faster configuration times out and the slower one is chosen;
    a process under the same limit reads that from disk. A process under 30 s measures the
    timed-out configuration again and chooses it (a timeout standing for good would launch
    the slower one in every later process); the next reads that from disk."""
    tight = _run(tmp_path, "1")
    assert tight["source"] == "tuned" and tight["first"] == 0
    assert tight["slow"] == "failed" and "no answer after 2 s" in tight["why"], tight["why"]
    assert _run(tmp_path, "1") == tight | {"source": "disk"}
    longer = _run(tmp_path, "30")
    assert longer["source"] == "tuned", "a timeout under 1 s decided a site that waits 30 s"
    assert longer["slow"] == "ok" and longer["first"] == 2500
    assert _run(tmp_path, "30") == longer | {"source": "disk", "why": ""}
    stated = json.loads(_record().read_text())["context"]["limits"]
    assert stated == {"compile_s": 30.0, "answer_s": 30.0}


def test_a_record_stating_no_limit_and_a_site_measuring_in_process(tmp_path: Path) -> None:
    """A record that states no limits (written before records stated them) keeps its
    timeouts out, as it did. A site measuring in its own process keeps out a configuration
    a worker gave up on, under any limit: it may hang, and nothing would stop it there; an
    isolated site under a larger limit measures it again."""
    assert _run(tmp_path, "1")["slow"] == "failed"
    path = _record()
    data = json.loads(path.read_text())
    data["context"].pop("limits", None)
    path.write_text(json.dumps(data))
    assert _run(tmp_path, "30")["source"] == "disk", "a record stating no limit lost its timeout"
    data["context"]["limits"] = {"compile_s": 1.0, "answer_s": 1.0}
    path.write_text(json.dumps(data))
    assert _run(tmp_path, "1", how="in-process")["source"] == "disk"
    here = _run(tmp_path, "30", how="in-process")
    assert here["source"] == "disk" and here["slow"] == "failed", "ran a silent one in process"
    isolated = _run(tmp_path, "30")
    assert isolated["source"] == "tuned" and isolated["slow"] == "ok"
    assert isolated["first"] == 2500


def test_a_silence_kept_by_a_site_measuring_in_process_keeps_its_limit(tmp_path: Path) -> None:
    """A site measuring in its own process under a larger limit tunes the key again (its
    record's choice is outside the space) and keeps the worker's silence out; the record it writes
    still states the limit that silence was made under, so an isolated site under the
    larger limit measures it again (stated as the larger limit, it kept the slower
    configuration for good)."""
    assert _run(tmp_path, "1", "isolate", "unverified")["slow"] == "failed"
    path = _record()
    data = json.loads(path.read_text())
    (ok,) = [r for r in data["results"] if r["status"] == "ok"]
    data["chosen"] = {**ok["config"], "BLOCK": 128}  # outside the space: tuned again
    data["results"].append({**ok, "config": data["chosen"]})
    path.write_text(json.dumps(data))
    here = _run(tmp_path, "30", "in-process", "unverified")
    assert here["source"] == "tuned" and here["slow"] == "failed", "ran a silent one in process"
    stated = json.loads(_record().read_text())["context"]["limits"]
    assert stated == {"compile_s": 1.0, "answer_s": 1.0}
    isolated = _run(tmp_path, "30", "isolate", "unverified")
    assert isolated["source"] == "tuned" and isolated["slow"] == "ok"
    assert isolated["first"] == 2500
