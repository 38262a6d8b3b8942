"""A process waiting on another's key lock says who holds it, and gives up
after ``TUNEDSL_LOCK_TIMEOUT`` (then tunes without the lock). Real processes: the holder is
stopped with SIGSTOP, as a tuner suspended with Ctrl-Z or by a debugger is."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import child_env, write_script

DIGEST = "9" * 64

HOLDER = f"""
import os, signal, sys
from tunedsl.store import records
with records.record_lock("{DIGEST}") as held:
    print("HELD", held, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # a stopped tuner: it holds the lock, silently
"""

WAITER = f"""
from tunedsl.store import records
with records.record_lock("{DIGEST}") as held:
    print("WAITER", held, flush=True)
"""


def _wait_stopped(pid: int) -> None:
    for _ in range(2000):  # bounded: about 20 s on a loaded box
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError("the holder never stopped")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc/PID/stat")
def test_waiter_names_the_holder_and_gives_up_after_the_timeout(tmp_path: Path) -> None:
    env = child_env(tmp_path / "cache", TUNEDSL_LOCK_TIMEOUT="4")
    holder = subprocess.Popen(
        [sys.executable, str(write_script(tmp_path / "holder.py", HOLDER))],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "HELD True"
        _wait_stopped(holder.pid)
        # The holder wrote who it is beside the lock.
        owner = tmp_path / "cache" / "locks" / f"{DIGEST}.lock.owner"
        assert str(holder.pid) in owner.read_text()
        waiter = subprocess.run(
            [sys.executable, str(write_script(tmp_path / "waiter.py", WAITER))],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert waiter.returncode == 0, waiter.stderr
        assert waiter.stdout.strip() == "WAITER False"  # went ahead without the lock
        lines = waiter.stderr.strip().splitlines()
        waiting = [line for line in lines if line.startswith("tunedsl: waiting")]
        gave_up = [line for line in lines if line.startswith("tunedsl: gave up")]
        assert waiting and len(gave_up) == 1, waiter.stderr
        who = f"process {holder.pid} on {socket.gethostname()!r}"
        assert who in waiting[0] and who in gave_up[0]
        assert "TUNEDSL_LOCK_TIMEOUT" in gave_up[0]
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.wait(timeout=60)
    # Released by the holder: the next process takes it at once, and silently.
    again = subprocess.run(
        [sys.executable, str(tmp_path / "waiter.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.stdout.strip() == "WAITER True" and again.stderr == ""
    assert not (tmp_path / "cache" / "locks" / f"{DIGEST}.lock.owner").exists()


def test_lock_timeout_must_be_a_positive_number(tmp_path: Path) -> None:
    env = child_env(tmp_path / "cache", TUNEDSL_LOCK_TIMEOUT="soon")
    out = subprocess.run(
        [sys.executable, "-c", "from tunedsl import knobs; knobs.lock_timeout_s()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "TUNEDSL_LOCK_TIMEOUT='soon' is not a number" in out.stderr


# A waiter that has opened the key's lock file and not yet locked it: its flock waits, at
# that point, until the test says go (the real flock then runs on the file it opened).
PAUSED_WAITER = f"""
import fcntl, os, pathlib, time
from tunedsl.store import paths, records

lock_file = str(paths.locks_dir() / "{DIGEST}.lock")
real_flock, paused = fcntl.flock, []


def flock(fd, operation):
    if not paused and operation & fcntl.LOCK_EX and os.readlink(f"/proc/self/fd/{{fd}}") == lock_file:
        paused.append(fd)
        pathlib.Path(os.environ["OPENED"]).write_text("")
        deadline = time.monotonic() + 120
        while not os.path.exists(os.environ["GO"]) and time.monotonic() < deadline:
            time.sleep(0.01)
    return real_flock(fd, operation)


fcntl.flock = flock
with records.record_lock("{DIGEST}") as held:
    print("WAITER", held, flush=True)
"""

# The next tuner: holds the key's lock until its stdin closes.
NEXT_HOLDER = f"""
import sys
from tunedsl.store import records
with records.record_lock("{DIGEST}") as held:
    print("HELD", held, flush=True)
    sys.stdin.read()
"""

REMOVE = f"""
from tunedsl.store import records
records.remove_record_files("{DIGEST}")  # as `tunedsl cache clear` does
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc/self/fd")
def test_a_lock_file_removed_between_a_waiters_open_and_its_flock_is_not_held_twice(
    tmp_path: Path,
) -> None:
    # With filelock before 3.20.4 (the pin allowed 3.12), a waiter that had opened the lock
    # file when `tunedsl cache clear` removed it (free) then locked the removed file, and
    # held the key's lock alongside the next tuner, who had created the file anew.
    opened, go = tmp_path / "opened", tmp_path / "go"
    env = child_env(tmp_path / "cache", TUNEDSL_LOCK_TIMEOUT="3", OPENED=str(opened), GO=str(go))
    waiter = subprocess.Popen(
        [sys.executable, str(write_script(tmp_path / "waiter.py", PAUSED_WAITER))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    holder = None
    try:
        deadline = time.monotonic() + 120
        while not opened.exists():
            assert waiter.poll() is None and time.monotonic() < deadline, waiter.communicate()
            time.sleep(0.02)
        lock_file = tmp_path / "cache" / "locks" / f"{DIGEST}.lock"
        remover = subprocess.run(
            [sys.executable, str(write_script(tmp_path / "remove.py", REMOVE))],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert remover.returncode == 0 and not lock_file.exists(), remover.stderr
        holder = subprocess.Popen(
            [sys.executable, str(write_script(tmp_path / "holder.py", NEXT_HOLDER))],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD True"
        go.write_text("")  # the waiter's flock runs now, on the file it opened
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err
        assert out.strip() == "WAITER False", (out, err)  # never held beside the holder
        assert "tunedsl: gave up" in err, err
    finally:
        for proc in (waiter, holder):
            if proc is not None and proc.poll() is None:
                if proc is holder:
                    proc.communicate("", timeout=60)
                else:
                    proc.kill()
                    proc.communicate()
