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


SWEPT = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)


@workload
def warm():
    a, b = torch.ones(40), torch.ones(40)
    c = torch.empty_like(a)
    autotune(space=dict(tile=[16, 32]), blocks=cdiv(40, $tile), vadd(a, b, c, 40, TILE=$tile))
"""


def _open_to_others(directory: Path) -> None:
    """Make ``directory`` writable by everyone (not sticky): as the second local user when
    running as root, else as this user."""
    if hasattr(os, "geteuid") and os.geteuid() == 0 and os.access("/usr/bin/python3", os.X_OK):
        directory.parent.chmod(0o755)
        made = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
             "-I", "-c", f"import os; os.mkdir({str(directory)!r}); os.chmod({str(directory)!r}, 0o777)"],
            capture_output=True, text=True,
        )  # fmt: skip
        if made.returncode == 0:
            return
    directory.mkdir()
    directory.chmod(0o777)


@pytest.mark.needs_triton
def test_a_sweep_whose_tmpdir_others_can_write_stops_before_measuring_naming_tmpdir(
    tmp_path: Path,
) -> None:
    # Another user can rename what lies in a directory open to writes without the sticky
    # bit: the task's records directory there was refused (rightly), so the sweep measured
    # every key, threw the records away and said "0 records written, 0 failed".
    from rel_helpers import child_env

    shared = tmp_path / "open" / "scratch"
    shared.parent.mkdir()
    _open_to_others(shared)
    script = tmp_path / "swept.py"
    script.write_text(SWEPT.lstrip())
    env = child_env(tmp_path / "cache", TMPDIR=str(shared))
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "sweep", "--no-ray", str(script)],
        env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert f"TMPDIR={shared}" in out.stderr and "writable by group or others" in out.stderr
    assert "set TMPDIR to a directory of your own" in out.stderr, out.stderr
    assert "records written" not in out.stdout + out.stderr
    assert list(shared.iterdir()) == []  # nothing made there is left
