"""Ending every process of a sweep's own Ray instance, however the sweep ends.

``ray.shutdown()`` stops the instance when the sweep leaves normally. A sweep killed
(``SIGKILL``) runs no clean-up, and Ray's agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) outlive the raylet that
started them by about a minute, one of them listening on the network. So a reaper starts
before the instance: a small process in a session of its own, waiting on a pipe the sweep
holds. When the pipe closes (the sweep left or died), it kills every process of this user
that holds a file in the instance's directory (every Ray process keeps its log there), until
none is left, then removes the directory once no live sweep holds it. Linux (``/proc``);
elsewhere nothing is started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: How long the reaper goes on looking for processes to kill, at most, once the sweep is
#: gone; and how many looks in a row must find none before it stops.
REAP_LIMIT_S = 30.0
_QUIET_LOOKS = 5


def start_reaper(directory: Path, prefix: str) -> subprocess.Popen[bytes] | None:
    """Start the reaper of ``directory`` (a ``scratch_dir`` named ``prefix*``); closing its
    stdin (or this process dying) sets it to work. None where there is no ``/proc``."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    import tempfile

    from tunedsl.backends.python_child import python_argv

    code = "import sys\nfrom tunedsl.precompile.ray_reaper import reap\nreap(*sys.argv[1:3])\n"
    env = dict(os.environ, TMPDIR=tempfile.gettempdir())  # where this process's scratch is
    return subprocess.Popen(
        python_argv(code, str(directory), prefix),
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True, cwd="/", env=env,
    )  # fmt: skip


def stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
    """Set the reaper to work and wait for it (what the instance left is gone after)."""
    if reaper is None:
        return
    if reaper.stdin is not None:
        reaper.stdin.close()
    try:
        reaper.wait(timeout=REAP_LIMIT_S + 5)
    except subprocess.TimeoutExpired:
        reaper.kill()
        reaper.wait()


def reap(directory: str, prefix: str) -> None:
    """The reaper's body: wait for end of input, kill ``holders(directory)`` until none are
    left (or ``REAP_LIMIT_S``; the sweep itself, while alive, never), then remove this
    user's abandoned ``prefix*`` directories."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep's Ctrl-C is not for the reaper
    sweep = os.getppid()
    while sys.stdin.buffer.read(65536):
        pass
    deadline = time.monotonic() + REAP_LIMIT_S
    quiet = 0
    while quiet < _QUIET_LOOKS and time.monotonic() < deadline:
        found = [p for p in holders(directory) if p != sweep or os.getppid() != sweep]
        quiet = 0 if found else quiet + 1
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # gone already
                pass
        time.sleep(0.05)
    from tunedsl.store.scratch import remove_abandoned_scratch

    remove_abandoned_scratch(prefix)  # this one too, once its sweep no longer holds it


def holders(directory: str) -> list[int]:
    """The processes of this user (other than this one) whose working directory or an open
    file lies in ``directory``."""
    inside = directory.rstrip("/") + "/"
    uid, me = os.getuid(), os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        proc = f"/proc/{name}"
        try:
            if os.stat(proc).st_uid != uid:
                continue
            places = [os.readlink(f"{proc}/cwd")]
            for fd in os.listdir(f"{proc}/fd"):
                try:
                    places.append(os.readlink(f"{proc}/fd/{fd}"))
                except OSError:  # closed meanwhile
                    pass
        except OSError:  # gone, or a zombie
            continue
        if any(p == directory or p.startswith(inside) for p in places):
            found.append(int(name))
    return found
