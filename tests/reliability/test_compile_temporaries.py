"""Triton's compile temporaries in a temporary directory other users can write (``/tmp``).

``ptxas`` writes a kernel's cubin under its PTX file's name with ``.o`` added, a name nothing
creates first: a second local user watching a shared temporary directory could make it
first and have their cubin read back and run. Real cross-compiles (``cuda:90``, real
``ptxas``) under a ``TMPDIR`` that is sticky and open to all, watched by a real second user
(uid 65534) who makes that name for every PTX file they see there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import swap_attack

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "integration" / "precompile_fixtures" / "good"


def _compile_env(tmp_path: Path, tmpdir: Path, **extra: str) -> dict[str, str]:
    """A child's environment for real compiles (cross-compiles for cuda:90 need no GPU, and
    the interpreter compiles nothing): its own caches, and ``TMPDIR=tmpdir``."""
    env = dict(os.environ, TMPDIR=str(tmpdir), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO), **extra)
    env.pop("TRITON_INTERPRET", None)
    return env


def _sticky_dir(path: Path) -> Path:
    """A directory like /tmp: sticky, open to all."""
    path.mkdir()
    path.chmod(0o1777)
    return path


# As the second user: for each PTX file seen in the shared directory, make the name ptxas
# writes the cubin to, first, as a file of theirs open to all; until told to stop.
_WATCH_LOOP = """
seen = set()
deadline = time.monotonic() + 600
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        names = os.listdir(shared)
    except FileNotFoundError:  # removed by the victim
        break
    for name in names:
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
WATCH = (
    """
import os, sys, time
shared, stop = sys.argv[1:3]
"""
    + _WATCH_LOOP
)

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
        env = _compile_env(tmp_path, shared)
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
    env = _compile_env(tmp_path, shared)
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
    shared = _sticky_dir(tmp_path / "shared")
    env = _compile_env(tmp_path, shared, TUNEDSL_COMPILE_PROCESSES="on")
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90",
         str(FIXTURES / "standin_vadd.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "standin_vadd.py:add" in out.stdout and "failed: " not in out.stdout, out.stdout
    assert os.listdir(tmp_path / "triton")  # compiled, not only found
    assert os.listdir(shared) == []


# As the second user, once a sweeper of old files has removed the victim's private
# directory: make a directory of theirs, open to all, under its name; then watch it as WATCH
# does the shared one.
RECLAIM = (
    """
import os, sys, time
shared, ready, stop = sys.argv[1:4]
os.mkdir(shared)
os.chmod(shared, 0o777)
open(ready, "w").close()
"""
    + _WATCH_LOOP
)

# This user's long-running process: a compile, its private directory named, then (once the
# test says so) more compiles.
COMPILE_AFTER_SWEEP = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from standin_vadd import vadd
from tunedsl.backends.triton_compile import compile_variant
from tunedsl.store.scratch import process_scratch_dir

x = torch.empty(256)
if sys.argv[3] == "held":  # another thread's compile runs the whole time
    import threading
    from tunedsl.backends.compile_temporaries import keep_temporaries_private

    entered, done = threading.Event(), threading.Event()

    def long_compile():  # a compile in progress on another thread
        keep_temporaries_private()
        entered.set()
        done.wait()

    threading.Thread(target=long_compile, daemon=True).start()
    entered.wait()
compile_variant(vadd, (x, x, x, 256), {"BLOCK": 32}, {"num_warps": 1}, target="cuda:90")
print(process_scratch_dir(), flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
for block in (64, 128, 256):
    built = compile_variant(vadd, (x, x, x, 256), {"BLOCK": block}, {"num_warps": 1}, target="cuda:90")
    print(built.binary[:4] == b"\\x7fELF", len(built.binary), flush=True)
"""


@pytest.mark.needs_triton
@pytest.mark.parametrize("other_thread", ["idle", "held"])
def test_a_private_directory_a_sweeper_removed_and_another_user_made_again_is_not_used(
    tmp_path: Path, other_thread: str
) -> None:
    """A sweeper of old files in ``/tmp`` removes the private directory of a process that
    runs for days; another user makes a directory under the same name. The process's next
    compiles must not take it for its own: it was checked by name alone, and not at all
    while another thread's compile ran ("held")."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        go, ready, stop = tmp_path / "go", shared / "ready", shared / "stop"
        env = _compile_env(tmp_path, shared)
        victim = subprocess.Popen(
            [sys.executable, "-c", COMPILE_AFTER_SWEEP, str(FIXTURES), str(go), other_thread],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
        )  # fmt: skip
        assert victim.stdout is not None
        private = Path(victim.stdout.readline().strip())
        try:
            assert private.parent == shared, victim.communicate(timeout=60)
            shutil.rmtree(private)  # the sweeper
            watcher = swap_attack.as_attacker(RECLAIM, str(private), str(ready), str(stop))
            deadline = time.monotonic() + 60
            while not ready.exists() and watcher.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            go.touch()
            out, err = victim.communicate(timeout=300)
        finally:
            stop.touch()
            if victim.poll() is None:
                victim.kill()
            seen, attack_err = watcher.communicate(timeout=60)
        assert watcher.returncode == 0, attack_err
        assert victim.returncode == 0, out + err
        assert [line.split()[0] for line in out.splitlines()] == ["True"] * 3, out
        assert int(seen) == 0, f"the other user saw {seen.strip()} PTX files of the compiles"
        assert private.stat().st_uid == swap_attack.ATTACKER  # theirs, left alone
        assert {p.name for p in shared.iterdir()} == {private.name, "ready", "stop"}


# This user's program sets Python's temporary directory itself (to the shared one) while a
# compile runs on another thread; then compiles on this one.
PROGRAM_SETS_TEMPDIR = """
import sys, tempfile, threading
sys.path.insert(0, sys.argv[1])
import torch
from standin_vadd import vadd
from tunedsl.backends.compile_temporaries import keep_temporaries_private
from tunedsl.backends.triton_compile import compile_variant

entered, done = threading.Event(), threading.Event()


def long_compile():  # a compile in progress on another thread
    keep_temporaries_private()
    entered.set()
    done.wait()


thread = threading.Thread(target=long_compile)
thread.start()
entered.wait()
tempfile.tempdir = sys.argv[2]  # the program's own setting, made while a compile runs
x = torch.empty(256)
for block in (32, 64):
    built = compile_variant(vadd, (x, x, x, 256), {"BLOCK": block}, {"num_warps": 1}, target="cuda:90")
    print(built.binary[:4] == b"\\x7fELF", len(built.binary))
done.set()
thread.join()
print("TMPDIR", tempfile.tempdir == sys.argv[2])
"""


@pytest.mark.needs_triton
def test_a_temporary_directory_the_program_sets_while_a_compile_runs_is_kept_private(
    tmp_path: Path,
) -> None:
    """The program sets ``tempfile.tempdir`` to a shared directory while another thread
    compiles: the next compiles kept their files there, in the open (the private directory
    was chosen only when no compile ran), and the program's setting was undone at the end."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        stop = shared / "stop"
        watcher = swap_attack.as_attacker(WATCH, str(shared), str(stop))
        env = _compile_env(tmp_path, tmp_path)
        try:
            time.sleep(0.2)  # the watcher is looking before the first compile
            out = subprocess.run(
                [sys.executable, "-c", PROGRAM_SETS_TEMPDIR, str(FIXTURES), str(shared)],
                capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
            )  # fmt: skip
        finally:
            stop.touch()
            seen, err = watcher.communicate(timeout=60)
        assert watcher.returncode == 0, err
        assert out.returncode == 0, out.stdout + out.stderr
        lines = out.stdout.splitlines()
        assert [line.split()[0] for line in lines[:2]] == ["True"] * 2, out.stdout
        assert int(seen) == 0, f"the other user saw {seen.strip()} PTX files of the compiles"
        assert lines[2] == "TMPDIR True", out.stdout  # the program's own setting stays


# A child the program forks (a DataLoader's worker, a multiprocessing pool) while a
# compile runs on another thread: where do the child's own temporary files go?
FORK_DURING_COMPILE = """
import os, sys, tempfile, threading
from tunedsl.backends.compile_temporaries import keep_temporaries_private

entered, done = threading.Event(), threading.Event()


def long_compile():  # a compile in progress on another thread
    keep_temporaries_private()
    entered.set()
    done.wait()


thread = threading.Thread(target=long_compile)
thread.start()
entered.wait()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, tempfile.gettempdir().encode())
    os._exit(0)
os.close(write)
print(os.read(read, 4096).decode())
os.waitpid(pid, 0)
done.set()
thread.join()
"""


def test_a_child_forked_while_a_compile_runs_keeps_the_programs_temporary_directory(
    tmp_path: Path,
) -> None:
    """The child has no thread inside the compile: its temporary files went into the
    parent's private directory all the same, for good (removed under it when the parent
    exits)."""
    shared = _sticky_dir(tmp_path / "shared")
    env = _compile_env(tmp_path, shared)
    out = subprocess.run(
        [sys.executable, "-c", FORK_DURING_COMPILE],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == str(shared), out.stdout


# This user's launches through Triton's JIT (the launcher's path without the direct launch,
# TUNEDSL_SAFE=direct), each compiling its kernel on the way. There is no GPU here: Triton's
# CUDA driver is stood in for by one that names the cuda:90 target, so Triton's JIT compiles
# for it in full (MLIR, LLVM, the real ptxas, its cache), and fails only at loading the
# binary onto a device.
LAUNCH = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver


class CompilesOnly:
    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")

    def launcher_cls(self, *args):
        raise RuntimeError("no GPU: nothing loaded")


driver.set_active(CompilesOnly())
from standin_vadd import vadd
from tunedsl.backends.triton_launch import Launcher

x = torch.empty(256)
for block in (32, 64, 128):
    launcher = Launcher(vadd, {"num_warps": 1}, (x, x, x, 256), {"BLOCK": block})
    try:
        launcher((4,), (x, x, x, 256), {"BLOCK": block}, {}, None)
    except RuntimeError as err:
        print(launcher.disabled, err)
"""


@pytest.mark.needs_triton
def test_a_launch_through_tritons_jit_keeps_its_compile_temporaries_private(
    tmp_path: Path,
) -> None:
    """A launch through Triton's JIT compiles a kernel it has not seen (a launcher without
    the direct launch, a new specialization or keyword argument): its PTX file was made in
    ``TMPDIR`` itself, where a second user watching ``/tmp`` could make the cubin's name."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        stop = shared / "stop"
        watcher = swap_attack.as_attacker(WATCH, str(shared), str(stop))
        env = _compile_env(tmp_path, shared, TUNEDSL_SAFE="direct")
        try:
            time.sleep(0.2)  # the watcher is looking before the first compile
            out = subprocess.run(
                [sys.executable, "-c", LAUNCH, str(FIXTURES)],
                capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
            )  # fmt: skip
        finally:
            stop.touch()
            seen, err = watcher.communicate(timeout=60)
        assert watcher.returncode == 0, err
        assert out.returncode == 0, out.stdout + out.stderr
        # Each launch compiled (its binary is in Triton's cache), then failed to load.
        assert out.stdout.splitlines() == ["True no GPU: nothing loaded"] * 3, out.stdout
        assert len(os.listdir(tmp_path / "triton")) >= 3
        assert int(seen) == 0, f"the other user saw {seen.strip()} PTX files of the compiles"
        assert os.listdir(shared) == ["stop"]


ROUTED = """
import tempfile, sys
import triton.backends.nvidia.compiler as nvidia
from tunedsl.backends.compile_temporaries import keep_temporaries_private

keep_temporaries_private()  # as before a compile
print("program", tempfile.gettempdir())  # the program's, compiles or not
with nvidia.tempfile.NamedTemporaryFile(suffix=".ptx") as f:
    print("triton", f.name)
print("after", tempfile.gettempdir())
"""


@pytest.mark.needs_triton
def test_only_tritons_compilers_see_the_private_directory(tmp_path: Path) -> None:
    """The rest of the program (another thread, PyTorch's Inductor naming its cache by
    the temporary directory) sees the temporary directory it set, during a compile too."""
    shared = _sticky_dir(tmp_path / "shared")
    env = _compile_env(tmp_path, shared)
    out = subprocess.run(
        [sys.executable, "-c", ROUTED], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    said = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert said["program"] == said["after"] == str(shared)
    triton_file = Path(said["triton"])
    assert triton_file.parent.parent == shared
    assert triton_file.parent.name.startswith("tunedsl-process-")
    assert os.listdir(shared) == []  # removed at exit
