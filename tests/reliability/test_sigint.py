"""SIGINT (Ctrl-C) in the middle of tuning: the process exits promptly (within 2 s), writes
no record, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import child_env, record_files, write_script

pytestmark = pytest.mark.needs_triton

SLOW_TUNING = """
import sys
sys.path.insert(0, {here!r})
import torch
from rel_kernels import vadd
from tunedsl import autotune_launch

n = 1 << 16  # the interpreter runs thousands of small programs per launch: slow on purpose
a, b, c = torch.ones(n), torch.ones(n), torch.zeros(n)
started = []

def announce(args):
    if not started:
        started.append(True)
        print("TUNING", flush=True)

autotune_launch(
    vadd,
    space=dict(TILE=[16, 32, 64, 128]),
    grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
    args=(a, b, c, n),
    kwargs=lambda cfg: dict(TILE=cfg.TILE),
    pre_hook=announce,
    effort="thorough",
)
print("FINISHED", flush=True)
"""


def _session_processes(sid: int) -> list[int]:
    """Processes still alive in the session ``sid`` (Linux /proc)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getsid(int(entry)) == sid:
                alive.append(int(entry))
        except OSError:
            continue
    return alive


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
def test_sigint_during_tuning_exits_promptly_without_record(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    script = write_script(tmp_path / "slow.py", SLOW_TUNING.format(here=str(Path(__file__).parent)))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=child_env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session: every process it starts is findable
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "TUNING", (line, proc.stderr.read() if proc.stderr else "")
    time.sleep(0.3)  # well inside the measurement of the first configurations
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the process did not exit within 2 s of SIGINT")
    took = time.monotonic() - sent
    out, err = proc.communicate()
    assert "FINISHED" not in out
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err
    assert took < 2.0
    assert record_files(cache) == []  # tuning was cut short: no record
    assert _session_processes(proc.pid) == []  # no stray worker left running
