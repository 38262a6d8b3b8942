"""`tunedsl rules build` over the records of a space grown after the sweep (a configuration
added, swept again at a few sizes only): the real commands in subprocesses, real kernels
under the interpreter, real records and rule files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunedsl.model.config import Config

pytestmark = pytest.mark.needs_triton

SCRIPT = str(Path(__file__).parent / "sweep_fixtures" / "rule_rowsum.py")
GROWN = Config(rows=16)


def tunedsl(*argv: str, grown: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "RULE_GROWN": "1" if grown else "0"}
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def shapes(tmp_path: Path, name: str, sizes: list[int]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps([{"r": r} for r in sizes]))
    return str(path)


def test_a_configuration_timed_on_only_some_keys_is_measured_at_the_others_or_left_out(
    tmp_path: Path,
) -> None:
    """rows=16 joined the space after the sweep and was swept at R=2 and 4 only, where it
    loses. The build measured nothing (no cell of the rule's configurations was missing),
    listed rows=16 as swept, and the rule decided R=64 without ever trying it (2x slower)."""
    every = shapes(tmp_path, "every", [2, 4, 32, 64])
    done = tunedsl("sweep", SCRIPT, "--shapes", every, "--no-ray")
    assert done.returncode == 0, done.stderr
    done = tunedsl("sweep", SCRIPT, "--shapes", shapes(tmp_path, "small", [2, 4]), "--no-ray",
                   grown=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Without --script: said, and left out (a site whose space keeps it is tuned).
    left = tunedsl("rules", "build", "--out", str(tmp_path / "left"))
    assert left.returncode == 0, left.stderr
    assert "1 configuration(s) timed on only some swept keys" in left.stderr, left.stderr
    assert "are left out of the rule: 2 cells untimed, on 2 keys" in left.stderr
    (path,) = (tmp_path / "left").glob("*.rule.json")
    data = json.loads(path.read_text())
    assert GROWN.to_json() not in data["configs"] and GROWN.to_json() not in data["swept"]
    # With --script: measured at the keys that lack it, and picked where it wins.
    measured = tunedsl("rules", "build", "--out", str(tmp_path / "measured"), "--script",
                       SCRIPT, "--shapes", every, grown=True)  # fmt: skip
    assert measured.returncode == 0, measured.stderr
    assert "measured 2 of the 2 cells the records lacked" in measured.stderr, measured.stderr
    assert "left out" not in measured.stderr
    from tunedsl.store.rules import read_rule_file

    (path,) = (tmp_path / "measured").glob("*.rule.json")
    rule = read_rule_file(path)
    assert rule.swept is not None and GROWN in rule.swept
    from tunedsl.store.files import FileRecordStore

    (key,) = [
        r.key for r in FileRecordStore().iter_records() if r.key["args"]["x"]["shape"][0] == 64
    ]
    assert rule.decide(key) == (GROWN, True)
