"""Sweep fixture: one workload over shapes; ``fail`` makes a shape fail once or always."""

import os
import pathlib

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload

if "SWEEP_MARKERS" in os.environ:  # which processes imported this script, a line each
    import time

    _imported = pathlib.Path(os.environ["SWEEP_MARKERS"]) / "imported"
    with _imported.open("a") as f:
        f.write(f"{os.getpid()}\n")
    if os.environ.get("SWEEP_WAIT_FOR_ANOTHER") == str(os.getpid()):
        # This process's import waits until another process has imported the script too.
        deadline = time.monotonic() + 120
        while set(_imported.read_text().split()) <= {str(os.getpid())}:
            if time.monotonic() > deadline:
                raise RuntimeError("no other process imported this script meanwhile")
            time.sleep(0.05)


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@workload
def add(n=256, fail=""):
    if "SWEEP_MARKERS" in os.environ:  # which process (and GPU) ran this shape, once a line
        ran = pathlib.Path(os.environ["SWEEP_MARKERS"]) / f"ran-{n}"
        with ran.open("a") as f:
            f.write(f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')}\n")
        from tunedsl.store import paths  # where this task's compile locks and records are

        with (ran.parent / "dirs").open("a") as f:
            f.write(f"{paths.locks_dir()} {paths.records_dir()}\n")
    if fail == "slow":  # stands for a long tuning run (the test interrupts it)
        import time

        (pathlib.Path(os.environ["SWEEP_MARKERS"]) / "slow-started").write_text("")
        time.sleep(120)
    if fail == "hang":  # a task that never ends (the test kills the sweep under it)
        import time

        (pathlib.Path(os.environ["SWEEP_MARKERS"]) / "hang-started").write_text(str(os.getpid()))
        time.sleep(3600)
    if fail == "exit":  # a workload that calls sys.exit (say, through argparse)
        raise SystemExit(4)
    if fail == "always":
        raise RuntimeError("this shape always fails")
    if fail == "die":  # the process ends in the middle of a task
        os._exit(3)
    if fail in ("garbage", "half-answer"):  # the GPU process's answer pipe gets a bad line
        os.write(_answer_pipe(), b"not an answer\n" if fail == "garbage" else b'{"records": [')
        if fail == "half-answer":  # ended in the middle of writing its answer
            os._exit(5)
    if fail == "stdin":  # a workload that reads its standard input
        import sys

        assert sys.stdin.read() == "", "a GPU process's stdin holds no request"
    if fail == "once":
        marker = pathlib.Path(os.environ["SWEEP_MARKERS"]) / f"once-{n}"
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            raise RuntimeError("the first attempt fails")
        (marker.parent / f"retried-{n}").write_text(str(os.getpid()))
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    autotune_launch(
        vadd,
        space={"tile": [64, 128]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name="sweep-vadd",
    )
    assert torch.equal(c, a + b)
    if fail == "after":  # fails after tuning its key
        raise RuntimeError("this shape fails after tuning")


def _answer_pipe() -> int:
    """The descriptor a GPU process (``gpu_child.py``) answers on: its one write-only pipe
    besides the standard ones."""
    import fcntl

    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            pipe = fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:
            continue
        if pipe and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise RuntimeError("no answer pipe: not in a GPU process")
