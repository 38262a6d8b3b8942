"""A measurement worker (``isolate=True``) or a Ray sweep actor killed by SIGKILL leaves no
directory of Triton's compile temporaries behind in a temporary directory open to all.

Each kept its temporaries in a private ``tunedsl-process-*`` directory of its own, removed at
its exit: a worker the parent kills (a hung or crashed configuration, and every worker at
the parent's exit) runs no clean-up, and its directory stayed in ``/tmp`` until the user's
next tunedsl process. Real compiles (the real ``ptxas``, for ``cuda:90``: there is no GPU
here, so Triton's CUDA driver is stood in for by one that only names that target), a real
worker and a real SIGKILL, a real local Ray instance."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import swap_attack

pytestmark = pytest.mark.needs_triton
REPO = Path(__file__).resolve().parents[2]

# A kernel module whose Triton "GPU" only compiles: loading a binary hangs the whole process
# in a measurement worker (the parent kills it after TUNEDSL_CONFIG_TIMEOUT), and fails
# elsewhere.
KERNEL_MODULE = """
import ctypes, os
import torch
import triton
import triton.language as tl
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
        from tunedsl.backends.isolated_worker import in_worker

        if in_worker():  # compiled (ptxas ran): now a hang, in C code holding the GIL
            open(os.path.join(os.environ["MARKERS"], f"hung-{os.getpid()}"), "w").close()
            ctypes.PyDLL(None).sleep(600)
        raise RuntimeError("no GPU: nothing loaded")


driver.set_active(CompilesOnly())


@triton.jit
def add(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)
"""

# Tunes ``add`` in a worker; every configuration hangs there and is killed. Then prints how
# many directories that no live process holds are in the temporary directory, and what it
# holds while this process lives: each entry, with what is in it.
ISOLATED_TUNE = """
import os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import torch
from hangs_in_worker import add
from tunedsl import autotune_launch
from tunedsl.errors import TuningError

n = 300
a, b, c = torch.ones(n), torch.ones(n), torch.zeros(n)
try:
    autotune_launch(
        add, space=dict(TILE=[64, 128]), grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
        args=(a, b, c, n), kwargs=lambda cfg: dict(TILE=cfg.TILE), isolate=True, name="hangs",
    )
except TuningError as err:
    print("FAILED", str(err).count("worker killed"))
from tunedsl.store.scratch import remove_abandoned_scratch

shared = tempfile.gettempdir()
print("ABANDONED", remove_abandoned_scratch("tunedsl-process-"))  # left by killed processes
for name in sorted(os.listdir(shared)):
    print("LEFT", name, sorted(os.listdir(os.path.join(shared, name))))
"""


def _sticky_dir(path: Path) -> Path:
    """A directory like /tmp: sticky, open to all (compile temporaries go to a private
    directory in it)."""
    path.mkdir()
    path.chmod(0o1777)
    return path


def test_a_measurement_worker_killed_for_a_hang_leaves_no_temporary_directory(
    tmp_path: Path,
) -> None:
    shared = _sticky_dir(tmp_path / "shared")
    (tmp_path / "hangs_in_worker.py").write_text(KERNEL_MODULE)
    markers = tmp_path / "markers"
    markers.mkdir()
    env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO))
    env.update(TUNEDSL_NO_AUTO_INTERPRET="1", TUNEDSL_CONFIG_TIMEOUT="2", MARKERS=str(markers))
    env.pop("TRITON_INTERPRET", None)
    script = tmp_path / "tune.py"
    script.write_text(ISOLATED_TUNE)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED 2" in out.stdout, out.stdout + out.stderr  # each configuration killed
    hung = list(markers.iterdir())
    assert len(hung) >= 2, out.stdout + out.stderr  # workers compiled, hung and were killed
    assert "ABANDONED 0" in out.stdout, out.stdout  # a killed worker's, there until now
    left = [line.split(" ", 2)[1:] for line in out.stdout.splitlines() if line.startswith("LEFT")]
    # While the tuning process lives: its own private directory, and in it nothing of the
    # workers it killed (no worker runs once the tuning has failed).
    assert len(left) == 1 and left[0][0].startswith("tunedsl-process-"), out.stdout
    assert left[0][1] == "['.alive']", out.stdout
    assert os.listdir(shared) == []  # and nothing once it is gone


# A sweep script: each task compiles a variant for cuda:90 (real ptxas); the first attempt
# of a ``hang`` task then waits to be killed.
COMPILING_WORKLOAD = """
import os, pathlib, time
import torch
import triton
import triton.language as tl
from tunedsl import workload
from tunedsl.backends.triton_compile import compile_variant


@triton.jit
def vadd(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@workload
def build(block=32, hang=False):
    x = torch.empty(256)
    compile_variant(vadd, (x, x, x, 256), {"BLOCK": block}, {"num_warps": 1}, target="cuda:90")
    marker = pathlib.Path(os.environ["MARKERS"]) / "hang-started"
    if hang and not marker.exists():  # compiled: the test kills this actor now
        marker.write_text(str(os.getpid()))
        time.sleep(600)
"""


def test_a_ray_actor_killed_by_sigkill_leaves_no_temporary_directory(tmp_path: Path) -> None:
    """An actor killed in the middle of a task (its task is retried on the other actor), and
    the actors that Ray ends with the sweep: each had left its directory in the temporary
    directory (a killed actor's task scratch directory too)."""
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    shared = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))  # short: Ray's sockets go below
    shared.chmod(0o1777)  # as /tmp: compile temporaries go to private directories in it
    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "compiles.py"
    script.write_text(COMPILING_WORKLOAD)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"block": 32}, {"block": 64, "hang": True}]))
    env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(
        TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO), MARKERS=str(markers)
    )
    env.update(TUNEDSL_QUIET="1", TUNEDSL_NO_AUTO_INTERPRET="1", RAY_ENABLE_UV_RUN_RUNTIME_ENV="0")
    env.pop("TRITON_INTERPRET", None)  # real compiles
    env.pop("RAY_ADDRESS", None)
    argv = [sys.executable, "-m", "tunedsl", "sweep", str(script), "--gpus-per-task", "0",
            "--actors", "2", "--shapes", str(shapes)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        marker = markers / "hang-started"
        deadline = time.monotonic() + 300
        while not marker.exists() or not marker.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.kill(int(marker.read_text()), signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        deadline = time.monotonic() + 30  # Ray's processes may outlive the sweep a moment
        while os.listdir(shared) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert os.listdir(shared) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        shutil.rmtree(shared, ignore_errors=True)


# What a worker or an actor takes as its directory: each candidate by name, then whether it
# was taken and which directory the process's compile temporaries would go to.
ADOPT = """
import os, sys
from tunedsl.store import scratch

name, path = sys.argv[1:3]
st = os.stat(path)
identity = (st.st_dev, st.st_ino + 1) if name == "another-inode" else (st.st_dev, st.st_ino)
taken = scratch.adopt_scratch_dir(path, identity=identity)
print(name, taken, scratch.process_scratch_dir() == scratch.Path(path))
"""


def test_a_worker_takes_only_the_private_directory_of_this_user_made_for_it(
    tmp_path: Path,
) -> None:
    """Another user's directory under the name given (made once a sweeper removed the one
    made for the worker), one open to others, or another inode: none is taken; the worker
    makes a directory of its own instead."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        theirs = shared / "theirs"
        swap_attack.attacker_step("import os, sys; os.mkdir(sys.argv[1], 0o700)", str(theirs))
        open_to_all, mine = shared / "open", shared / "mine"
        open_to_all.mkdir()
        open_to_all.chmod(0o777)
        mine.mkdir(mode=0o700)
        cases = {"theirs": theirs, "open-to-all": open_to_all, "another-inode": mine, "mine": mine}
        env = dict(os.environ, TMPDIR=str(shared), PYTHONPATH=str(REPO))
        said = []
        for name, path in cases.items():
            out = subprocess.run(
                [sys.executable, "-c", ADOPT, name, str(path)],
                capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            said.append(out.stdout.strip())
        assert said == [
            "theirs False False",
            "open-to-all False False",
            "another-inode False False",
            "mine True True",
        ]
        assert list(theirs.iterdir()) == [] and mine.exists()  # neither removed nor written
