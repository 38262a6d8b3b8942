"""Triton's compile temporaries in a temporary directory other users can write (``/tmp``).

``ptxas`` writes a kernel's cubin under its PTX file's name with ``.o`` added, a name nothing
creates first: a second local user watching a shared temporary directory could make it
first and have their cubin read back and run. Real cross-compiles (``cuda:90``, real
``ptxas``) under a ``TMPDIR`` that is sticky and open to all, watched by a real second user
(uid 65534) who makes that name for every PTX file they see there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import swap_attack

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "integration" / "precompile_fixtures" / "good"

# As the second user: for each PTX file seen in the shared directory, make the name ptxas
# writes the cubin to, first, as a file of theirs open to all; until told to stop.
WATCH = """
import os, sys, time
shared, stop = sys.argv[1:3]
seen = set()
deadline = time.monotonic() + 600
while not os.path.exists(stop) and time.monotonic() < deadline:
    for name in os.listdir(shared):
        if name.endswith(".ptx") and name not in seen:
            seen.add(name)
            try:
                fd = os.open(os.path.join(shared, name + ".o"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                os.write(fd, b"their cubin")
                os.close(fd)
            except OSError:
                pass
    time.sleep(0.001)
print(len(seen))
"""

# This user's compiles: four variants of a vector add for cuda:90, each its own ptxas run.
COMPILE = """
import sys
sys.path.insert(0, sys.argv[1])
import tempfile
import torch
from standin_vadd import vadd
from tunedsl.backends.triton_compile import compile_variant

x = torch.empty(256)
before = tempfile.gettempdir()
for block in (32, 64, 128, 256):
    built = compile_variant(vadd, (x, x, x, 256), {"BLOCK": block}, {"num_warps": 1}, target="cuda:90")
    print(built.binary[:4] == b"\\x7fELF", len(built.binary))
print("TMPDIR", tempfile.gettempdir() == before)
"""


@pytest.mark.needs_triton
def test_compiles_keep_their_temporaries_out_of_a_temporary_directory_others_can_write(
    tmp_path: Path,
) -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        stop = shared / "stop"  # where the other user can see it
        watcher = swap_attack.as_attacker(WATCH, str(shared), str(stop))
        env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
        env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO))
        env.pop("TRITON_INTERPRET", None)  # cross-compiles for cuda:90 need no GPU
        try:
            time.sleep(0.2)  # the watcher is looking before the first compile
            out = subprocess.run(
                [sys.executable, "-c", COMPILE, str(FIXTURES)],
                capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
            )  # fmt: skip
        finally:
            stop.touch()
            seen, err = watcher.communicate(timeout=60)
        assert watcher.returncode == 0, err
        assert out.returncode == 0, out.stdout + out.stderr
        lines = out.stdout.splitlines()
        assert [line.split()[0] for line in lines[:4]] == ["True"] * 4, out.stdout
        assert lines[4] == "TMPDIR True", out.stdout  # the process's own setting is restored
        assert int(seen) == 0, f"the other user saw {seen.strip()} PTX files of the compiles"
        assert os.listdir(shared) == ["stop"]  # the private directory is removed at exit


@pytest.mark.needs_triton
def test_a_compile_under_a_tmpdir_open_to_all_and_not_sticky_is_refused_naming_tmpdir(
    tmp_path: Path,
) -> None:
    """There another user could rename the private directory away and put theirs in its
    place: the compile stops with the error that names TMPDIR and the fix."""
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)
    env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO))
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, "-c", COMPILE, str(FIXTURES)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"UsageError: cannot keep a private scratch directory in TMPDIR={shared}" in out.stderr
    assert "set TMPDIR to a directory of your own" in out.stderr
    assert os.listdir(shared) == []


@pytest.mark.needs_triton
def test_forked_compile_workers_share_the_private_directory_and_leave_none_behind(
    tmp_path: Path,
) -> None:
    """`precompile --target` with compile processes: the workers, which leave by
    ``os._exit``, compile in the parent's private directory; each made its own, left after
    the run."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # sticky and open to all, as /tmp
    env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO))
    env.update(TUNEDSL_COMPILE_PROCESSES="on")
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90",
         str(FIXTURES / "standin_vadd.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "standin_vadd.py:add" in out.stdout and "failed: " not in out.stdout, out.stdout
    assert os.listdir(tmp_path / "triton")  # compiled, not only found
    assert os.listdir(shared) == []
