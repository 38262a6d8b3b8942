"""Ctrl-C of ``tunedsl cache import`` in the middle of a large bundle: a real process, a real
SIGINT to its session, real record files. It ends at once (130), says how many records it
imported and how to finish; each record it wrote is whole, and nothing else is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rel_helpers import child_env, record_files
from test_corrupt_cache import _valid_record

from tunedsl.store import records

LINES = 40_000  # about 10 s to import here: the interrupt lands well inside it


def _big_bundle(path: Path) -> None:
    line = _valid_record("0" * 64).to_json()
    with path.open("w") as fh:
        fh.write(json.dumps({"tunedsl_records": 2}) + "\n")
        for i in range(LINES):
            line["digest"] = f"{i:064x}"
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")


def test_ctrl_c_of_cache_import_says_how_many_were_imported_and_leaves_each_whole(
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "big.jsonl"
    _big_bundle(bundle)
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunedsl", "cache", "import", str(bundle)],
        env=child_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(record_files(cache)) < 200 and proc.poll() is None:
        assert time.monotonic() < deadline, "the import never started writing"
        time.sleep(0.02)
    assert proc.poll() is None, "the import finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err, err
    written = record_files(cache)
    assert 200 <= len(written) < LINES
    assert (
        f"cache import: interrupted after importing {len(written)} of the bundle's records "
        f"into {cache / 'records'}"
    ) in err, err
    assert "import the bundle again" in err, err
    for path in written:  # each whole, under its own name
        assert records.read_record_file(path).digest == path.stem
    assert sorted(p.name for p in (cache / "records").iterdir() if p.name.startswith(".")) == []
    try:
        os.killpg(proc.pid, 0)
        left = True
    except ProcessLookupError:
        left = False
    assert not left, "a process of the import outlived it"


def test_ctrl_c_just_after_a_record_is_renamed_into_place_counts_that_record(
    tmp_path: Path,
) -> None:
    """The SIGINT lands between the rename that puts a record in place and the count: the
    message still counts every whole record on disk (it said one fewer)."""
    bundle = tmp_path / "big.jsonl"
    _big_bundle(bundle)
    cache = tmp_path / "cache"
    renames = 250
    child = f"""
import os, signal, sys
real_replace, done = os.replace, [0]
def replace(*args, **kwargs):
    real_replace(*args, **kwargs)
    done[0] += 1
    if done[0] == {renames}:
        signal.raise_signal(signal.SIGINT)  # handled as the call returns
os.replace = replace
from tunedsl.cli import main
sys.exit(main(["cache", "import", {str(bundle)!r}]))
"""
    proc = subprocess.run(
        [sys.executable, "-c", child], env=child_env(cache), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(record_files(cache)) == renames
    assert f"interrupted after importing {renames} of the bundle's records" in proc.stderr
