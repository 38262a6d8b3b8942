"""Children forked from an application that tunes: a ``multiprocessing`` pool (or a
``DataLoader``'s workers) forked while another thread of the parent runs a tuned site.
The child has only the forking thread, so no lock of tunedsl may arrive held there."""

from __future__ import annotations

from pathlib import Path

import pytest
from rel_helpers import child_env, run_python, write_script

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
