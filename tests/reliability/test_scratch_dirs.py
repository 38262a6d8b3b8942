"""Scratch directories (``store/scratch.scratch_dir``: a sweep task's records, the claims of a
multi-GPU ``precompile --tune``) ending while another process of the user removes the ones
killed processes left, or while a child forked from their maker ends: real processes, real
files, real locks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunedsl.store import paths, scratch

OWNER = """
import sys, time
from pathlib import Path

from tunedsl.store import scratch

with scratch.scratch_dir("tunedsl-sweep-") as tmp:
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
    tmp, go = tmp_path / "tmp", tmp_path / "go"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(go)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert owner.stdout is not None
    made = Path(owner.stdout.readline().strip())
    assert made.parent == tmp, owner.communicate()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # this process's TMPDIR too
    go.write_text("")
    removed = 0
    while owner.poll() is None:  # another process of the user starts a task meanwhile
        removed += scratch.remove_abandoned_scratch("tunedsl-sweep-")
    out, err = owner.communicate()
    assert owner.returncode == 0 and "left" in out, err
    assert removed == 0, "a live process's directory was removed as abandoned"
    assert list(tmp.iterdir()) == []


def test_a_scratch_directory_left_without_its_lock_file_is_removed_after_an_hour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process killed between making the directory and its lock file left one that was
    # never removed: without a lock file it looked "just being made" for ever.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old, new = tmp_path / "tunedsl-sweep-old", tmp_path / "tunedsl-sweep-new"
    for made in (old, new):
        made.mkdir(mode=0o700)
        (made / (scratch.SCRATCH_ALIVE + ".new")).write_bytes(b"")  # killed before the rename
    hour_ago = time.time() - paths.STALE_TEMP_AGE_S - 60
    os.utime(old, (hour_ago, hour_ago))
    assert scratch.remove_abandoned_scratch("tunedsl-sweep-") == 1
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


@pytest.fixture
def open_tmpdir() -> Iterator[Path]:
    """A directory in the temporary directory that everyone can write (not sticky), owned by
    the second local user (uid 65534) when running as root."""
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-test-open-"))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(shared, 65534, 65534)
    shared.chmod(0o777)
    try:
        yield shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.needs_triton
def test_a_sweep_whose_tmpdir_others_can_write_stops_before_measuring_naming_tmpdir(
    tmp_path: Path, open_tmpdir: Path
) -> None:
    # Another user can rename what lies in a directory open to writes without the sticky
    # bit: the task's records directory there was refused (rightly), so the sweep measured
    # every key, threw the records away and said "0 records written, 0 failed".
    from rel_helpers import child_env

    shared = open_tmpdir
    script = tmp_path / "swept.py"
    script.write_text(SWEPT.lstrip())
    env = child_env(tmp_path / "cache", TMPDIR=str(shared))
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "sweep", "--no-ray", str(script)],
        env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert f"TMPDIR={shared}" in out.stderr, out.stderr
    assert "owned by another user" in out.stderr or "writable by group or others" in out.stderr
    assert "set TMPDIR to a directory of your own" in out.stderr, out.stderr
    assert "records written" not in out.stdout + out.stderr
    assert list(shared.iterdir()) == []  # nothing made there is left


def test_no_directory_is_removed_from_a_tmpdir_another_user_can_rename_in(
    open_tmpdir: Path,
) -> None:
    # In a TMPDIR open to writes (not sticky) the other user renames any of this user's
    # directories there to a scratch name: one left an hour ago was removed as a killed
    # process's scratch directory before the directory was refused.
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("needs root, to act as a second local user (uid 65534)")
    shared = open_tmpdir
    if shutil.which("setpriv") is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs setpriv and /usr/bin/python3 to act as a second local user")
    data = shared / "results"
    data.mkdir()
    (data / "weeks-of-work.txt").write_text("keep me")
    hour_ago = time.time() - 2 * 3600
    os.utime(data, (hour_ago, hour_ago))
    renamed = shared / "tunedsl-claims-planted"
    attack = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
         "-I", "-c", f"import os; os.rename({str(data)!r}, {str(renamed)!r})"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert attack.returncode == 0, attack.stderr
    use = "from tunedsl.store import scratch\nwith scratch.scratch_dir('tunedsl-claims-'):\n    pass\n"
    out = subprocess.run(
        [sys.executable, "-c", use], env={**os.environ, "TMPDIR": str(shared)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0 and f"TMPDIR={shared}" in out.stderr, out.stderr
    assert (renamed / "weeks-of-work.txt").read_text() == "keep me"
    assert sorted(p.name for p in shared.iterdir()) == [renamed.name]


# A process with a scratch directory and a measurement worker (its compile temporaries in a
# directory made for it inside), a child forked from it that leaves by a normal exit, then
# a sweep task's scratch directory that a forked child leaves through (the `with` it forked
# in ends there too).
FORKS = """
import os, sys
from tunedsl.backends import isolated
from tunedsl.store import scratch

mine = scratch.process_scratch_dir()
worker = isolated.worker_for(None)
worker.start()
assert worker.scratch is not None, "no directory made for the worker"
pid = os.fork()
if pid == 0:
    sys.exit(0)
os.waitpid(pid, 0)
print("PROCESS", os.path.isdir(mine), "WORKER", os.path.isdir(worker.scratch.path), flush=True)
with scratch.scratch_dir("tunedsl-sweep-") as task:
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    os.waitpid(pid, 0)
    print("TASK", os.path.isdir(task), flush=True)
"""


def test_a_forked_child_leaving_normally_leaves_its_parents_scratch_directories(
    tmp_path: Path,
) -> None:
    """A child forked by a program that uses tunedsl (``os.fork()``, a pre-forking server's
    worker) and ending by ``sys.exit``: the parent's process scratch directory, the one
    made inside it for its measurement worker (Triton's compile temporaries of both: their
    compiles in flight failed), and a sweep task's, are still there, and removed when the
    parent ends. The child's exit had removed all three: the generator of each directory
    ran its clean-up in the child, and so did the child's copy of the parent's workers."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: compile temporaries go to private directories in it
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TUNEDSL_NO_AUTO_INTERPRET="1", PYTHONPATH=str(Path(__file__).parents[2]))
    out = subprocess.run(
        [sys.executable, "-c", FORKS], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PROCESS True WORKER True" in out.stdout, out.stdout + out.stderr
    assert "TASK True" in out.stdout, out.stdout + out.stderr
    assert os.listdir(shared) == []
