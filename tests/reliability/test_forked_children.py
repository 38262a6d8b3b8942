"""Child processes of an application that tunes: a ``multiprocessing`` pool (or a
``DataLoader``'s workers) forked while another thread of the parent runs a tuned site (the
child has only the forking thread, so no lock of tunedsl may arrive held there), and
children started with ``spawn`` from a ``tunedsl run`` script (they run ``__main__`` again
with plain Python)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import child_env, run_python, run_tunedsl, write_script

pytestmark = pytest.mark.needs_triton

# The parent tunes a site, keeps a thread launching it (an inference thread under the
# interpreter, whose launches take turns on one lock), and forks while that thread is
# inside a launch. The child calls the same site (a decided key and a new one) and checks
# the results; an alarm ends a child that hangs.
FORK_WHILE_LAUNCHING = """
import os, signal, sys, threading, time
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import triton_launch


@triton.jit
def axpb(x, y, out, n, BLK: tl.constexpr):
    i = tl.program_id(0) * BLK + tl.arange(0, BLK)
    m = i < n
    tl.store(out + i, 2.0 * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


def run(n):
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty_like(x)
    autotune_launch(axpb, space={"blk": [16, 32]}, grid=lambda c: (cdiv(n, c.blk),),
                    args=(x, y, out, n), kwargs=lambda c: {"BLK": c.blk}, name="forked")
    assert torch.allclose(out, 2.0 * x + y), n


run(100)
run(50_000)
stop = threading.Event()


def busy():
    while not stop.is_set():
        run(50_000)


thread = threading.Thread(target=busy, daemon=True)
thread.start()
deadline = time.monotonic() + 60
while True:  # fork at a moment the thread is inside a launch
    assert time.monotonic() < deadline, "the thread never launched"
    if not triton_launch.INTERPRETER_LOCK.acquire(blocking=False):
        break
    triton_launch.INTERPRETER_LOCK.release()
    time.sleep(0.001)
pid = os.fork()
if pid == 0:
    signal.alarm(30)  # a hang ends the child with SIGALRM
    run(100)
    run(300)
    os._exit(0)
_, status = os.waitpid(pid, 0)
stop.set()
thread.join()
print("CHILD", os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_during_a_launch_of_another_thread_launches(tmp_path: Path) -> None:
    script = write_script(tmp_path / "fork_while_launching.py", FORK_WHILE_LAUNCHING)
    proc = run_python(script, child_env(tmp_path / "cache"), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # -14 (SIGALRM): the child waited forever for the interpreter lock its parent's thread held
    assert "CHILD 0" in proc.stdout, (proc.stdout, proc.stderr[-3000:])


# A `tunedsl run` script whose pool is started with `spawn` (macOS's default, a DataLoader's
# `multiprocessing_context="spawn"`): each child runs the main script again. DSL_WORK is a
# site the children launch, checked against PyTorch there.
DSL_WORK = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv


@triton.jit
def neg(x, out, n, T: tl.constexpr):
    i = tl.program_id(0) * T + tl.arange(0, T)
    tl.store(out + i, -tl.load(x + i, mask=i < n), mask=i < n)


def work(n):
    x = torch.randn(n)
    out = torch.empty_like(x)
    autotune(space=dict(t=[32, 64]), blocks=cdiv(n, $t), neg(x, out, n, T=$t))
    return bool(torch.equal(out, -x))
"""

SPAWN_POOL = """
import multiprocessing


if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print("RESULTS", pool.map(work, [100, 300]))
"""


def test_a_dsl_script_spawns_children_that_run_its_sites(tmp_path: Path) -> None:
    # each child read the script with plain Python: a SyntaxError in every one, and a pool
    # that started them again without end (it hung)
    script = write_script(tmp_path / "spawns.py", DSL_WORK + SPAWN_POOL)
    proc = run_tunedsl(script, child_env(tmp_path / "cache"), timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULTS [True, True]" in proc.stdout, proc.stderr[-3000:]


def test_spawned_children_run_the_dsl_script_not_a_pyc_another_user_put_beside_it() -> None:
    # A DSL script in a shared sticky directory: its spawned children imported it by name,
    # and read the pyc in the `__pycache__` another user made beside it (tunedsl writes none
    # for a DSL module), running their code as this user in every child.
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        script = write_script(shared / "negpool.py", DSL_WORK + SPAWN_POOL)
        script.chmod(0o644)
        marker = shared / "pwned"
        # (it defines `work` too, so that the pool ends where the pyc is run)
        more = "def work(n):\n    return 'PWNED'\n"
        pyc = swap_attack.stage_pyc(script, shared / "staged.pyc", marker, more)
        swap_attack.attacker_step(swap_attack.PLANT_PYCACHE, str(shared / "staged.pyc"), pyc)
        proc = run_tunedsl(script, child_env(shared / "cache"), timeout=60)
        assert not marker.exists(), "another user's pyc ran in a spawned child"
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "RESULTS [True, True]" in proc.stdout, proc.stderr[-3000:]


def test_a_plain_script_spawns_children_that_import_a_dsl_module(tmp_path: Path) -> None:
    write_script(tmp_path / "negkernels.py", DSL_WORK)
    script = write_script(tmp_path / "main.py", "from negkernels import work\n" + SPAWN_POOL)
    proc = run_tunedsl(script, child_env(tmp_path / "cache"), timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULTS [True, True]" in proc.stdout, proc.stderr[-3000:]


def test_a_dsl_script_named_as_no_module_cannot_spawn_and_says_why(tmp_path: Path) -> None:
    script = write_script(tmp_path / "neg-pool.py", DSL_WORK + SPAWN_POOL)
    proc = run_tunedsl(script, child_env(tmp_path / "cache"), timeout=60)
    assert proc.returncode == 1, proc.stdout
    assert "SyntaxError" not in proc.stderr, proc.stderr[-3000:]
    assert "UsageError" in proc.stderr and "neg-pool.py" in proc.stderr, proc.stderr[-3000:]
    assert "name the script as a Python identifier" in proc.stderr and "'fork'" in proc.stderr, (
        proc.stderr
    )


def test_a_dsl_script_its_children_cannot_import_cannot_spawn_and_says_why(
    tmp_path: Path,
) -> None:
    # `python -P`: the script's directory is not on the children's path, so importing it by
    # name there finds nothing (an ImportError in every child, and a pool restarting them)
    script = write_script(tmp_path / "negpool.py", DSL_WORK + SPAWN_POOL)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "tunedsl", "run", str(script)],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
    )
    assert proc.returncode == 1, proc.stdout
    assert "UsageError" in proc.stderr and "module `negpool`" in proc.stderr, proc.stderr[-3000:]
    assert "no `python -P`" in proc.stderr, proc.stderr[-3000:]


# A child started with `spawn` that starts its own with `spawn` (a worker process running a
# DataLoader or a pool of its own): the grandchildren run the main script again too.
NESTED_SPAWN = """
import multiprocessing


def outer(n, queue):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        queue.put(pool.map(work, [n, 3 * n]))


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=outer, args=(100, queue))
    child.start()
    print("RESULTS", queue.get(timeout=120))
    child.join()
"""


@pytest.mark.parametrize("main", ["dsl", "plain"])
def test_a_spawned_child_spawns_children_that_run_the_sites(tmp_path: Path, main: str) -> None:
    # the child installed the import hook for itself only: each grandchild read the DSL
    # script (or the DSL module the plain script imports) with plain Python, a SyntaxError,
    # and the child's pool started them again without end (it hung)
    if main == "dsl":
        script = write_script(tmp_path / "nested.py", DSL_WORK + NESTED_SPAWN)
    else:
        write_script(tmp_path / "negkernels.py", DSL_WORK)
        script = write_script(
            tmp_path / "nested.py", "from negkernels import work\n" + NESTED_SPAWN
        )
    proc = run_tunedsl(script, child_env(tmp_path / "cache"), timeout=90)
    assert "SyntaxError" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULTS [True, True]" in proc.stdout, proc.stderr[-3000:]
