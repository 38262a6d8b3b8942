"""A serving application's kernels tuned ahead of time over the batch sizes it meets, as an
inference engineer walks it from the docs: sweep (interrupted and resumed), build, ship, run.
Real commands in subprocesses, real kernels under the interpreter (kernels_serving.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).parent
SCRIPT = str(HERE / "kernels_serving.py")


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_CACHE_DIR": str(cache)}


def _swept_batches(cache: Path) -> list[int]:
    keys = [records.read_record_file(p).key for p in cache.glob("records/*.json")]
    return sorted(k["args"]["g"]["shape"][0] for k in keys)


def test_a_sweep_interrupted_half_way_names_the_shapes_left_so_none_is_tuned_twice(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    batches = [1, 2, 3, 5, 8, 13, 21, 34]
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"b": b} for b in batches]))
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes"]
    proc = subprocess.Popen(
        [*argv, str(shapes)], env=_env(cache), stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not any(" 2/8 tasks" in line for line in lines):  # two tasks done, six to go
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=30)
    err = "".join(lines)
    assert proc.returncode == 130, err
    first = _swept_batches(cache)
    assert len(first) >= 2 and len(first) < len(batches), err
    # The message names the shapes it did not sweep, as a list to pass as --shapes.
    found = re.search(r"pass this list as --shapes: (\[.*\])$", err, re.M)
    assert found, err
    left = json.loads(found.group(1))
    assert sorted(s["b"] for s in left) == sorted(set(batches) - set(first)), err
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps(left))
    again = subprocess.run(
        [*argv, str(rest)], env=_env(cache), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    # The resumed sweep ran only the shapes left: each batch size tuned once in all.
    assert f"sweep: {len(left)} tasks, {len(left)} records written" in again.stdout
    assert _swept_batches(cache) == batches
