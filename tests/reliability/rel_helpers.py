"""Helpers of the reliability tests: subprocesses with a scoped environment, cache files.

Pure Python (no torch or triton): the tests that need those import them themselves.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tunedsl.errors import CacheWarning

REPO = Path(__file__).resolve().parents[2]


def child_env(cache_dir: Path | str, **extra: str) -> dict[str, str]:
    """The environment of a child process: this one's, with its own cache and the interpreter."""
    env = dict(os.environ)
    env["TUNEDSL_CACHE_DIR"] = str(cache_dir)
    env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def write_script(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body).lstrip())
    return path


def run_python(
    script: Path, env: dict[str, str], *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(script.parent),
    )


@contextmanager
def cache_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record every warning; the caller filters the CacheWarnings it expects."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def only_cache_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def record_files(cache_dir: Path) -> list[Path]:
    root = cache_dir / "records"
    return sorted(root.glob("*.json")) if root.is_dir() else []


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


# A DSL module with a real kernel: `tunedsl run` loads it through the bytecode cache, and its
# macro tunes through the record store. ``tune(n)`` returns the LaunchResult and checks c.
DSL_KERNELS = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


def tune(n, name="rel-vadd"):
    a = torch.arange(n, dtype=torch.float32)
    b = torch.full((n,), 0.5)
    c = torch.full((n,), float("nan"))
    result = autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), effort="quick",
                      name=name, vadd_kernel(a, b, c, n, TILE=$tile))
    assert torch.equal(c, a + b), (n, c)
    return result
"""

# The main script (itself DSL: it goes through the bytecode cache too) tunes three keys.
DSL_MAIN = """
import os
import sys
import time

from tunedsl import autotune
import rel_dsl_kernels

barrier = os.environ.get("REL_BARRIER")
if barrier:  # concurrency tests: start tuning together, once every process is ready
    open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.01)

for n in (40, 50, 60):
    result = rel_dsl_kernels.tune(n)
    print("RESULT", n, result.source, result.config.tile, flush=True)
"""


#: A script that tunes a small vadd in its own process and says TUNED.
TUNE_VADD = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


n = 40
a, b, c = torch.arange(n, dtype=torch.float32), torch.full((n,), 2.0), torch.zeros(n)
autotune_launch(
    vadd, space={"TILE": [16, 32]}, grid=lambda cfg: (triton.cdiv(n, cfg.TILE),),
    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.TILE}, key=n, effort="quick",
)
assert torch.equal(c, a + b)
print("TUNED", flush=True)
"""


def write_dsl_project(directory: Path) -> Path:
    """Write the DSL kernel module and main script into ``directory``; return the script."""
    (directory / "rel_dsl_kernels.py").write_text(DSL_KERNELS.lstrip())
    script = directory / "rel_dsl_main.py"
    script.write_text(DSL_MAIN.lstrip())
    return script


def run_tunedsl(
    script: Path, env: dict[str, str], *args: str, timeout: float = 180.0
) -> subprocess.CompletedProcess[str]:
    """``tunedsl run SCRIPT`` in a subprocess, every warning shown (not once per place)."""
    return subprocess.run(
        [sys.executable, "-W", "always", "-m", "tunedsl", "run", str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(script.parent),
    )


def cache_warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CacheWarning:" in line]


def running_in_session(sid: int) -> list[str]:
    """The processes of session ``sid`` still running (zombies have ended)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text.split(" (", 1)[1].rsplit(") ", 1)
        fields = rest.split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(f"{stat.parent.name} {name}")
    return found


def terminate_once(
    argv: list[str], env: dict[str, str], ready: Path, said_first: str = ""
) -> tuple[int, str, list[str]]:
    """Run ``argv`` in a session of its own; SIGTERM to it alone once it has said a line
    holding ``said_first`` and ``ready`` exists. Its status, what it said, and the processes
    of its session left 30 s after it ended."""
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        while said_first and not any(said_first in line for line in lines):
            line = proc.stderr.readline()
            assert line, (proc.wait(), lines)
            lines.append(line)
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        deadline = time.monotonic() + 30
        while running_in_session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        return proc.returncode, "".join(lines) + err, running_in_session(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for line in running_in_session(proc.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)


@contextmanager
def own_group() -> Iterator[str]:
    """A fresh group whose one member is this user (as ``useradd`` makes a user-private
    group), removed afterwards. Needs root and ``groupadd``/``gpasswd`` (else a skip)."""
    import pwd
    import shutil

    import pytest

    if os.geteuid() != 0 or shutil.which("groupadd") is None or shutil.which("gpasswd") is None:
        pytest.skip("needs root and groupadd/gpasswd to make a group")
    name = f"tdpg{os.getpid() % 100000}"
    me = pwd.getpwuid(os.getuid()).pw_name
    subprocess.run(["groupadd", name], check=True, timeout=30)
    try:
        subprocess.run(["gpasswd", "-a", me, name], check=True, capture_output=True, timeout=30)
        yield name
    finally:
        subprocess.run(["groupdel", name], check=True, timeout=30)


def share_group(group: str, uid: int = 65534) -> None:
    """List the user ``uid`` (by default 65534, the second user) in ``group`` too."""
    import pwd

    other = pwd.getpwuid(uid).pw_name
    subprocess.run(["gpasswd", "-a", other, group], check=True, capture_output=True, timeout=30)


# -- records tuned, then shipped ---------------------------------------------------------------

TWO_KEYS = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


for n in (40, 32):  # two keys of one site (n % 16 == 0 or not)
    a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
    r = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick",
                        grid=lambda cfg: (cdiv(n, cfg.tile),),
                        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
    assert torch.equal(c, a + b)
    print("RESULT", r.source, flush=True)
"""


def tuned_and_shipped(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """``TWO_KEYS`` as ``tmp_path/a/NAME`` tuned in the cache ``tmp_path/tuned``, its records
    copied to a private ``tmp_path/ship``: (script, ship)."""
    (tmp_path / "a").mkdir()
    script = write_script(tmp_path / "a" / name, TWO_KEYS)
    tuned = run_python(script, child_env(tmp_path / "tuned"), timeout=180)
    assert tuned.returncode == 0 and tuned.stdout.split() == ["RESULT", "tuned"] * 2, tuned.stderr
    ship = tmp_path / "ship"
    ship.mkdir(mode=0o700)
    for path in record_files(tmp_path / "tuned"):
        shutil.copy(path, ship / path.name)
    return script, ship
