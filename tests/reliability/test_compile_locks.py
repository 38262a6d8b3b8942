"""The cross-process compile locks (``store/locks.file_lock``) get the cache's trust rule.

Real ``tunedsl precompile --target cuda:90`` subprocesses (real cross-compiles, real
``ptxas``), a real second local user holding real ``flock``s, a real unwritable cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "precompile_fixtures" / "good" / "standin_vadd.py"


def _precompile(
    cache: Path, triton_cache: Path, timeout: float, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **extra)
    env.pop("TRITON_INTERPRET", None)  # cross-compiles for cuda:90 need no GPU
    env.update(
        TUNEDSL_CACHE_DIR=str(cache),
        TRITON_CACHE_DIR=str(triton_cache),
        TRITON_DEFAULT_FP_FUSION="1",
        TUNEDSL_COMPILE_WORKERS="2",
    )
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90", str(SCRIPT)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout,
    )  # fmt: skip


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CacheWarning" in line]


MAKE_OPEN_DIR = "import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777)"

# The attacker: make the cache root's locks/ theirs (open to all), create the victim's lock
# files there and hold an exclusive flock on each until told to stop.
HOLD = """
import fcntl, os, sys, time
root, stop, *names = sys.argv[1:]
locks = os.path.join(root, "locks")
os.mkdir(locks)
os.chmod(locks, 0o777)
held = []
for name in names:
    fd = os.open(os.path.join(locks, name), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    held.append(fd)
print("holding", len(held), flush=True)
deadline = time.monotonic() + 600
while not os.path.exists(stop) and time.monotonic() < deadline:
    time.sleep(0.1)
"""


@pytest.mark.slow
def test_compile_locks_another_user_holds_in_a_root_they_own_never_block_a_compile(
    tmp_path: Path,
) -> None:
    """Another user created the cache root and holds the lock files of the victim's
    variants (their names follow from the kernel, so anyone who can compile it knows them):
    the victim's precompile neither waits on them nor creates anything in that root; one
    warning names the root and the fix, and every variant is compiled."""
    swap_attack.need_second_user()
    own = _precompile(tmp_path / "own-cache", tmp_path / "triton-cache", timeout=300)
    assert own.returncode == 0, own.stdout + own.stderr
    names = sorted(os.listdir(tmp_path / "own-cache" / "locks"))
    assert names and all(n.startswith("triton-") for n in names), names
    with swap_attack.shared_tmp() as base:
        root, stop = base / "shared", base / "stop"
        swap_attack.attacker_step(MAKE_OPEN_DIR, str(root))
        holder = swap_attack.as_attacker(HOLD, str(root), str(stop), *names)
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().split() == ["holding", str(len(names))]
            before = sorted(os.listdir(root))
            # A compile waiting on their locks waits forever: two minutes is plenty for 4 variants.
            out = _precompile(root, tmp_path / "triton-cache", timeout=120)
            after = sorted(os.listdir(root))
        finally:
            stop.touch()
            holder.communicate(timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "standin_vadd.py:add" in out.stdout and "failed: " not in out.stdout
    assert after == before == ["locks"]  # nothing of the victim's there
    warned = _warnings(out.stderr)
    assert len(warned) == 1, out.stderr
    assert f"{root} is owned by another user (uid {swap_attack.ATTACKER})" in warned[0]
    assert "TUNEDSL_CACHE_DIR" in warned[0]


def test_precompile_with_a_cache_that_cannot_be_written_compiles_every_variant(
    tmp_path: Path,
) -> None:
    """The cache root lies under a regular file: no compile lock can be made, so the
    variants compile without one (one warning naming the directory and the fix) instead
    of every compile failing."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = _precompile(blocker / "cache", tmp_path / "triton-cache", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "failed: " not in out.stdout
    row = next(line for line in out.stdout.splitlines() if line.startswith("standin_vadd.py"))
    assert row.split()[1:4] == ["4", "0", "0"], out.stdout  # compiled, cached, failed
    warned = _warnings(out.stderr)
    assert len(warned) == 1, out.stderr
    assert str(blocker / "cache" / "locks") in warned[0] and "TUNEDSL_CACHE_DIR" in warned[0]


# A process of this user that hangs while it compiles (a stopped or stuck compiler): it holds
# the compile locks of its variants in the user's own cache until told to stop.
HOLD_OWN = """
import fcntl, os, sys, time
locks, stop, *names = sys.argv[1:]
held = []
for name in names:
    fd = os.open(os.path.join(locks, name), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    held.append(fd)
print("holding", len(held), flush=True)
deadline = time.monotonic() + 600
while not os.path.exists(stop) and time.monotonic() < deadline:
    time.sleep(0.1)
"""


def test_a_compile_lock_held_by_a_hung_process_of_this_user_is_waited_for_a_bounded_time(
    tmp_path: Path,
) -> None:
    """The compile lock waited forever: a precompile (or a tuning's compile) of the same
    variant as a hung process never ended, and its exit hung on the waiting thread. Now it
    waits at most half the compile timeout, says who it waited for, and compiles."""
    cache = tmp_path / "cache"
    first = _precompile(cache, tmp_path / "triton-1", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    names = sorted(os.listdir(cache / "locks"))
    assert names and all(n.startswith("triton-") for n in names), names
    stop = tmp_path / "stop"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OWN, str(cache / "locks"), str(stop), *names],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["holding", str(len(names))]
        # A fresh Triton cache: every variant must be compiled again, under the same locks.
        again = _precompile(cache, tmp_path / "triton-2", timeout=180, TUNEDSL_CONFIG_TIMEOUT="8")
    except subprocess.TimeoutExpired:
        pytest.fail("precompile waited on a compile lock held by a hung process")
    finally:
        stop.touch()
        holder.communicate(timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "standin_vadd.py:add" in again.stdout and "failed: " not in again.stdout
    warned = _warnings(again.stderr)
    assert len(warned) == 1 and "compile lock" in warned[0] and "waited" in warned[0], warned


# Compiles tunedsl drives outside `precompile`: one variant (as a compile process does), and
# a tuning's batch (on a GPU), refused before anything is built there.
COMPILE_ONE = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
from standin_vadd import vadd

from tunedsl.backends.compile_ahead import compile_jobs
from tunedsl.backends.triton_compile import compile_variant
from tunedsl.errors import UsageError

x = torch.empty(256)
for compile in (
    lambda: compile_variant(vadd, (x, x, x, 256), {"BLOCK": 64}, {"num_warps": 1}, target="cuda:90"),
    lambda: list(compile_jobs(vadd, [])),  # a tuning's compiles, before its launcher is built
):
    try:
        compile()
    except UsageError as err:
        print("REFUSED", err)
    else:
        print("COMPILED")
"""


def test_nothing_is_compiled_into_a_triton_cache_another_user_can_write(tmp_path: Path) -> None:
    """`TRITON_CACHE_DIR` names a directory another user made (open to all), or one not made
    yet in a directory open to all: Triton loads the binaries and (on a GPU) imports the
    launcher libraries it finds there, and a cross-compile put there is one they can swap
    before a later run loads it. precompile stops before any work with one error naming
    the directory and the fix, and every other compile tunedsl drives is refused alike;
    nothing is written there (every variant was compiled into their directory)."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        theirs, open_dir = base / "triton-cache", base / "open"
        swap_attack.attacker_step(MAKE_OPEN_DIR, str(theirs))
        open_dir.mkdir()
        open_dir.chmod(0o777)
        for triton_cache, why in (
            (theirs, f"{theirs} is owned by another user (uid {swap_attack.ATTACKER})"),
            (open_dir / "cache", f"{open_dir} is writable by group or others (mode 777)"),
        ):
            out = _precompile(tmp_path / "own-cache", triton_cache, timeout=300)
            said = out.stdout + out.stderr
            assert out.returncode == 2, said
            assert f"Triton's cache directory {triton_cache}: {why}" in said, said
            assert "set TRITON_CACHE_DIR to a directory of your own" in said, said
            assert "Traceback" not in said
            env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "own-cache"))
            env.update(TRITON_CACHE_DIR=str(triton_cache), TRITON_DEFAULT_FP_FUSION="1")
            env.pop("TRITON_INTERPRET", None)
            one = subprocess.run(
                [sys.executable, "-c", COMPILE_ONE, str(SCRIPT.parent)],
                capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
            )  # fmt: skip
            lines = one.stdout.splitlines()
            assert one.returncode == 0 and len(lines) == 2, one.stdout + one.stderr
            assert all(line.startswith("REFUSED") and why in line for line in lines), lines
        assert os.listdir(theirs) == [] and os.listdir(open_dir) == []
    own = _precompile(tmp_path / "own-cache", tmp_path / "triton-cache", timeout=300)
    assert own.returncode == 0, own.stdout + own.stderr  # a Triton cache of this user's own
    assert os.listdir(tmp_path / "triton-cache")
