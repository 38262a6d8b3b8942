"""Scratch directories (``store/paths.scratch_dir``: a sweep task's records, the claims of a
multi-GPU ``precompile --tune``) ending while another process of the user removes the ones
killed processes left: real processes, real files, real locks."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tunedsl.store import paths

OWNER = """
import sys, time
from pathlib import Path

from tunedsl.store import paths

with paths.scratch_dir("tunedsl-sweep-") as tmp:
    for i in range(20000):  # a removal that takes a while
        (tmp / f"f{i}").write_bytes(b"")
    print(tmp, flush=True)
    while not Path(sys.argv[1]).exists():
        time.sleep(0.01)
print("left", flush=True)
"""


def test_a_scratch_directory_being_removed_by_its_owner_is_not_taken_for_abandoned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The owner unlocked its directory before removing it: another process took it for a
    # killed one's and removed it too, and the two removals raced (either could fail on
    # the other's half-removed tree, leaving an empty directory that nothing removes).
    scratch, go = tmp_path / "tmp", tmp_path / "go"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(go)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert owner.stdout is not None
    made = Path(owner.stdout.readline().strip())
    assert made.parent == scratch, owner.communicate()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # this process's TMPDIR too
    go.write_text("")
    removed = 0
    while owner.poll() is None:  # another process of the user starts a task meanwhile
        removed += paths.remove_abandoned_scratch("tunedsl-sweep-")
    out, err = owner.communicate()
    assert owner.returncode == 0 and "left" in out, err
    assert removed == 0, "a live process's directory was removed as abandoned"
    assert list(scratch.iterdir()) == []


def test_a_scratch_directory_left_without_its_lock_file_is_removed_after_an_hour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process killed between making the directory and its lock file left one that was
    # never removed: without a lock file it looked "just being made" for ever.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old, new = tmp_path / "tunedsl-sweep-old", tmp_path / "tunedsl-sweep-new"
    for made in (old, new):
        made.mkdir(mode=0o700)
        (made / (paths.SCRATCH_ALIVE + ".new")).write_bytes(b"")  # killed before the rename
    hour_ago = time.time() - paths.STALE_TEMP_AGE_S - 60
    os.utime(old, (hour_ago, hour_ago))
    assert paths.remove_abandoned_scratch("tunedsl-sweep-") == 1
    assert not old.exists() and new.exists()  # a directory being made now is left alone
