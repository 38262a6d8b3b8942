"""A configuration whose launch kills the process (a real segfault: Triton's interpreter
loading from an address far outside any tensor), tuned in the process (isolate=False).
The next run of the same script must not die in the same launch again: it learns from the
file the dead process left (``store/inflight.py``) and measures that key in a worker
process, where the crash fails the configuration alone; or, where no worker can take the
tuning, leaves the configuration out. Real subprocesses, real signals, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env, write_script

pytestmark = pytest.mark.needs_triton

SCRIPT = """
import sys
import threading
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch


@triton.jit
def bump(x, n, BAD: tl.constexpr, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if BAD:  # far outside any tensor: the interpreter's load segfaults
        v = tl.load(x + offs + (1 << 40))
    else:
        v = tl.load(x + offs, mask=offs < n)
    tl.store(x + offs, v + 1, mask=offs < n)


lock = threading.Lock()
hook = None
if sys.argv[1:] == ["unpicklable"]:  # a hook no worker process can be sent
    def hook(args):
        with lock:
            pass
x = torch.zeros(64)
res = autotune_launch(bump, space=dict(BAD=[0, 1], TILE=[16]), grid=lambda c: (4,),
                      args=lambda c: (x, 64), kwargs=lambda c: dict(BAD=c.BAD, TILE=c.TILE),
                      pre_hook=hook, name="crash-site")
print("RESULT", res.source, res.config.BAD, flush=True)
"""


# The same kernel reading its tensor through an address stored in a tensor (the pointer
# arrays of a grouped GEMM): in a worker process that address points nowhere, so every
# configuration crashes the worker.
POINTER_SCRIPT = (
    SCRIPT.replace("def bump(x, n,", "def bump(ptrs, n,")
    .replace(
        "    offs = tl.program_id(0)",
        "    x = tl.load(ptrs).to(tl.pointer_type(tl.float32))\n    offs = tl.program_id(0)",
    )
    .replace("x = torch.zeros(64)\n", "x = torch.zeros(64)\nptrs = torch.tensor([x.data_ptr()])\n")
    .replace("args=lambda c: (x, 64)", "args=lambda c: (ptrs, 64)")
)


def _run(script: Path, cache: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *argv], env=child_env(cache, TUNEDSL_QUIET="1"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _inflight(cache: Path) -> list[str]:
    directory = cache / "inflight"
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def test_a_run_after_a_crash_in_a_launch_measures_that_key_in_a_worker(tmp_path: Path) -> None:
    script = write_script(tmp_path / "crash_site.py", SCRIPT)
    cache = tmp_path / "cache"
    first = _run(script, cache)
    assert first.returncode == -signal.SIGSEGV, first.stdout + first.stderr
    left = _inflight(cache)
    assert len(left) == 1 and left[0].endswith(".json"), left
    assert json.loads((cache / "inflight" / left[0]).read_text())["config"]["BAD"] == 1

    second = _run(script, cache)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "RESULT tuned 0" in second.stdout, second.stdout
    assert "died while launching" in second.stderr and "in a worker process" in second.stderr
    assert _inflight(cache) == []  # taken, and this tuning's own removed at its end

    third = _run(script, cache)  # the record decides: nothing to say
    assert third.returncode == 0 and "RESULT disk 0" in third.stdout, third.stdout
    assert "died while launching" not in third.stderr, third.stderr


def test_where_no_worker_can_take_the_tuning_the_configuration_is_left_out(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path / "crash_site.py", SCRIPT)
    cache = tmp_path / "cache"
    first = _run(script, cache, "unpicklable")
    assert first.returncode == -signal.SIGSEGV, first.stdout + first.stderr
    # One death is no proof of a crash (a kill looks the same): measured again, it dies again.
    second = _run(script, cache, "unpicklable")
    assert second.returncode == -signal.SIGSEGV, second.stdout + second.stderr
    assert "measures Config(BAD=1, TILE=16) again" in second.stderr, second.stderr
    third = _run(script, cache, "unpicklable")
    assert third.returncode == 0, third.stdout + third.stderr
    assert "RESULT tuned 0" in third.stdout, third.stdout
    assert "leaves them out, as failed" in third.stderr, third.stderr
    records = list((cache / "records").glob("*.json"))
    assert len(records) == 1
    text = records[0].read_text()
    assert "the process measuring it died in its launch" in text, text


def test_a_process_killed_between_launches_changes_nothing_for_the_next(
    tmp_path: Path,
) -> None:
    """The file of a process killed outside a launch is empty: the next tuning of the key
    removes it and measures in its own process, with nothing to say."""
    script = write_script(
        tmp_path / "crash_site.py",
        SCRIPT.replace("BAD=[0, 1], TILE=[16]", "BAD=[0], TILE=[16, 32]"),
    )
    cache = tmp_path / "cache"
    out = _run(script, cache)
    assert out.returncode == 0 and "RESULT tuned 0" in out.stdout, out.stdout + out.stderr
    (record,) = (cache / "records").glob("*.json")
    record.unlink()  # the key is tuned again
    (cache / "inflight" / f"{record.stem}.4194304.json").write_bytes(b"")
    again = _run(script, cache)
    assert again.returncode == 0 and "RESULT tuned 0" in again.stdout, again.stdout + again.stderr
    assert "died while launching" not in again.stderr, again.stderr
    assert _inflight(cache) == []


def test_damaged_or_foreign_in_flight_files_are_a_miss_never_a_crash_or_an_exclusion(
    tmp_path: Path,
) -> None:
    """In-flight files of the key that no tuning of this user's left whole: JSON nested
    deeper than Python parses, bytes that are not UTF-8, a file past the size limit, a
    FIFO, a directory, a symbolic link to a file naming a configuration, a file another
    user owns naming one. Each one changes nothing: the run tunes in its own process,
    leaves no configuration out and says nothing of a death; those that are not this
    user's regular files stay where they are."""
    script = write_script(
        tmp_path / "crash_site.py",
        SCRIPT.replace("BAD=[0, 1], TILE=[16]", "BAD=[0], TILE=[16, 32]"),
    )
    cache = tmp_path / "cache"
    out = _run(script, cache, "unpicklable")  # no worker could take it: a death leaves out
    assert out.returncode == 0 and "RESULT tuned 0" in out.stdout, out.stdout + out.stderr
    (record,) = (cache / "records").glob("*.json")
    record.unlink()  # the key is tuned again
    inflight = cache / "inflight"
    named = json.dumps({"config": {"BAD": 0, "TILE": 16}, "pid": 4194301, "time": 0.0})
    (inflight / f"{record.stem}.4194302.json").write_text(
        '{"config": {"BAD": 0, "TILE": 16}, "pid": ' + "[" * 30000 + "]" * 30000 + "}"
    )
    (inflight / f"{record.stem}.4194303.json").write_bytes(b'{"config": \xff\xfe}')
    (inflight / f"{record.stem}.4194304.json").write_text(named + " " * (1 << 17))
    os.mkfifo(inflight / f"{record.stem}.4194305.json")
    (inflight / f"{record.stem}.4194306.json").mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(named)
    (inflight / f"{record.stem}.4194307.json").symlink_to(elsewhere)
    foreign = inflight / f"{record.stem}.4194308.json"
    foreign.write_text(named)
    if os.getuid() == 0:  # as root: a file that another user owns
        os.chown(foreign, 65534, 65534)
    again = _run(script, cache, "unpicklable")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "RESULT tuned 0" in again.stdout, again.stdout
    assert "died while launching" not in again.stderr, again.stderr
    (record,) = (cache / "records").glob("*.json")
    assert "died in its launch" not in record.read_text()
    left = set(_inflight(cache))
    for pid in (4194305, 4194306, 4194307, 4194308):  # not this user's regular files
        assert f"{record.stem}.{pid}.json" in left, left
    assert elsewhere.read_text() == named


def test_a_kernel_reading_addresses_from_a_tensor_is_tuned_here_after_a_crash(
    tmp_path: Path,
) -> None:
    """After a death in a launch the key is measured in a worker, but a kernel that reads
    addresses stored in a tensor crashes the worker with every configuration: the tuning
    then measures in its own process, by the same rule: the configuration that killed one
    process is measured again, and after a second death it is left out."""
    assert POINTER_SCRIPT.count("ptrs") == 4
    script = write_script(tmp_path / "pointer_site.py", POINTER_SCRIPT)
    cache = tmp_path / "cache"
    first = _run(script, cache)
    assert first.returncode == -signal.SIGSEGV, first.stdout + first.stderr
    second = _run(script, cache)
    assert second.returncode == -signal.SIGSEGV, second.stdout + second.stderr
    assert "every configuration crashed it" in second.stderr, second.stderr
    assert "measures Config(BAD=1, TILE=16) again" in second.stderr, second.stderr
    third = _run(script, cache)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "RESULT tuned 0" in third.stdout, third.stdout
    assert "every configuration crashed it" in third.stderr, third.stderr
    (record,) = (cache / "records").glob("*.json")
    assert "the process measuring it died in its launch" in record.read_text()
    fourth = _run(script, cache)
    assert fourth.returncode == 0 and "RESULT disk 0" in fourth.stdout, (
        fourth.stdout + fourth.stderr
    )


HOLDER = """
import sys
from tunedsl.store.inflight import Inflight

inflight = Inflight("ab" * 32)
inflight.trying({"TILE": 16})  # launching, for as long as this process lives
print("ready", flush=True)
sys.stdin.read()
inflight.close()
"""


def test_cache_clear_all_removes_the_files_of_dead_processes_and_never_a_live_ones(
    tmp_path: Path,
) -> None:
    # `cache clear --all` left the in-flight files of processes that had died, so the next
    # tuning of each key still took the path after a death.
    script = write_script(tmp_path / "crash_site.py", SCRIPT)
    cache = tmp_path / "cache"
    died = _run(script, cache)  # dies in the launch, leaving its file
    assert died.returncode == -signal.SIGSEGV, died.stdout + died.stderr
    (dead,) = _inflight(cache)
    holder = write_script(tmp_path / "holder.py", HOLDER)
    live = subprocess.Popen(
        [sys.executable, str(holder)], env=child_env(cache), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert live.stdout is not None and live.stdout.readline() == "ready\n"
        (held,) = set(_inflight(cache)) - {dead}
        foreign = cache / "inflight" / f"{'cd' * 32}.4194309.json"
        foreign.write_text('{"config": {"TILE": 16}, "pid": 4194309, "time": 0.0}')
        if os.getuid() == 0:  # as root: a file another user owns, never this user's to remove
            os.chown(foreign, 65534, 65534)
        cleared = subprocess.run(
            [sys.executable, "-m", "tunedsl", "cache", "clear", "--all"], env=child_env(cache),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert cleared.returncode == 0, cleared.stdout + cleared.stderr
        left = set(_inflight(cache))
        assert dead not in left, cleared.stdout
        assert held in left, "a live process's in-flight file was removed"
        if os.getuid() == 0:
            assert foreign.name in left
        assert "removed 1 in-flight file of ended processes" in cleared.stdout, cleared.stdout
    finally:
        live.communicate("", timeout=60)
    assert live.returncode == 0
    assert held not in _inflight(cache)  # its own close() removed it


# One rank of a torch.distributed job (gloo, on the CPU) tuning with TUNEDSL_DISTRIBUTED=
# allreduce: rank r measures every second candidate from r, so rank 1 alone launches the
# configuration that crashes. With SLOW_RANK_1, rank 1 binds its candidates a while after
# rank 0 (it reaches the tuning second).
RANK = """
import os, sys, time
import torch
import torch.distributed as dist
import triton
import triton.language as tl

rank, port = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
from tunedsl import autotune_launch


@triton.jit
def bump(x, n, BAD: tl.constexpr, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if BAD:  # far outside any tensor: the interpreter's load segfaults
        v = tl.load(x + offs + (1 << 40))
    else:
        v = tl.load(x + offs, mask=offs < n)
    tl.store(x + offs, v + 1, mask=offs < n)


slept = []


def kwargs(c):
    if rank == 1 and os.environ.get("SLOW_RANK_1") and not slept:
        slept.append(time.sleep(3))
    return dict(BAD=c.BAD, TILE=c.TILE)


x = torch.zeros(64)
try:
    res = autotune_launch(bump, space=[dict(BAD=0, TILE=16), dict(BAD=1, TILE=16)],
                          grid=lambda c: (4,), args=(x, 64), kwargs=kwargs, name="ranks-crash")
    print("RESULT", res.source, res.config.BAD, flush=True)
except Exception as err:  # the other rank died: the exchange times out
    print("FAILED", type(err).__name__, flush=True)
dist.destroy_process_group()
"""


def _ranks(script: Path, cache: Path, **extra: str) -> list[subprocess.CompletedProcess[str]]:
    """Both ranks, sharing ``cache`` (one node), to their end."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = child_env(cache, TUNEDSL_QUIET="1", TUNEDSL_DISTRIBUTED="allreduce",
                    TUNEDSL_LOCK_TIMEOUT="30", **extra)  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), port],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_ranks_sharing_a_cache_each_learn_of_a_rank_that_died_in_a_launch(tmp_path: Path) -> None:
    # Ranks sharing a cache directory each read the in-flight files when their share began:
    # the first to read took the dead rank's file, so the rank whose share held the
    # crashing configuration launched it in its own process again, and every run of the
    # job died in the same launch.
    script = write_script(tmp_path / "rank.py", RANK)
    cache = tmp_path / "cache"
    first = _ranks(script, cache)
    assert first[1].returncode == -signal.SIGSEGV, first[1].stdout + first[1].stderr
    assert len(_inflight(cache)) == 1, _inflight(cache)  # rank 1's, naming the crash
    # Rank 1 learns of the death though rank 0 took the file: it measures in a worker, which
    # its crash fails; then (every configuration of its share crashed the worker) in its
    # own process, where one death is no proof of a crash: it dies a second time.
    again = _ranks(script, cache, SLOW_RANK_1="1")
    assert again[1].returncode == -signal.SIGSEGV, again[1].stdout + again[1].stderr[-3000:]
    assert "died while launching" in again[1].stderr, again[1].stderr[-3000:]
    assert "measures Config(BAD=1, TILE=16) again" in again[1].stderr, again[1].stderr[-3000:]
    last = _ranks(script, cache, SLOW_RANK_1="1")  # its second death: left out
    for rank, run in enumerate(last):
        assert run.returncode == 0, (rank, run.stdout, run.stderr[-3000:])
        assert "RESULT tuned 0" in run.stdout, (rank, run.stdout, run.stderr[-3000:])
    assert "leaves them out, as failed" in last[1].stderr, last[1].stderr[-3000:]
    assert _inflight(cache) == []
