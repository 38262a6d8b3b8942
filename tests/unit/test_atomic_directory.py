"""``store/atomic.write_directory``: a directory of files appears whole or not at all (the
stored kernel binaries), with real files and a real writer process killed mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tunedsl.store import atomic

REPO = Path(__file__).resolve().parents[2]


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


def test_the_directory_appears_with_every_file(tmp_path: Path) -> None:
    atomic.write_directory(tmp_path / "entry", {"a.bin": b"\x00\x01", "manifest.json": b"{}"})
    assert sorted(os.listdir(tmp_path / "entry")) == ["a.bin", "manifest.json"]
    assert (tmp_path / "entry" / "a.bin").read_bytes() == b"\x00\x01"
    assert leftovers(tmp_path) == []


def test_an_existing_entry_is_kept_and_the_writer_told(tmp_path: Path) -> None:
    atomic.write_directory(tmp_path / "entry", {"a.bin": b"first"})
    with pytest.raises(OSError):
        atomic.write_directory(tmp_path / "entry", {"a.bin": b"second"}, durable=False)
    assert (tmp_path / "entry" / "a.bin").read_bytes() == b"first"
    assert leftovers(tmp_path) == []


def test_a_writer_killed_mid_write_leaves_no_entry(tmp_path: Path) -> None:
    started = tmp_path / "started"
    child = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from tunedsl.store import atomic

        class Slow(dict):
            # The files of a big entry, written one by one: the parent kills us midway.
            def items(self):
                for i in range(1000):
                    if i == 3:
                        Path({str(started)!r}).write_text("x")
                    time.sleep(0.05)
                    yield f"f{{i}}", b"x" * 1024

        atomic.write_directory(Path({str(tmp_path / "entry")!r}), Slow())
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], cwd=REPO)
    while not started.exists():  # ends: the writer either starts or exits (about 50 s)
        assert proc.poll() is None, "the writer ended before it was killed"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "entry").exists()  # no half-written entry a reader could take
    # Only the writer's temporary directory is left, named so nothing reads it as an entry.
    assert all(name.startswith(".entry.") and name.endswith(".tmp") for name in leftovers(tmp_path))
