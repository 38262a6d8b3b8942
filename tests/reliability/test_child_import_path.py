"""The import path of tunedsl's child processes never names the working directory.

A session with ``""`` on ``sys.path`` (``python -c``, a REPL, a notebook) imports its kernel
module from its project directory, then works in a shared, sticky directory where a second
user (uid 65534) planted ``torch``, ``triton``, ``numpy``, ``tunedsl`` and a module of the
kernel module's name. The measurement worker of ``isolate=True`` and the GPU processes of a
sweep (``use_ray=False, gpus=2``: on CPU, under the interpreter) import none of them, and
still find the session's own modules in its project directory. Where that directory is one
another user could write, it is left off the child's path and the error says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import rel_helpers
from rel_helpers import child_env, write_script

pytestmark = pytest.mark.needs_triton

# Another user's module: if it is ever imported, it leaves a mark beside itself.
PLANTED = """
import json
import os
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "planted-code-ran"), "a") as f:
    f.write(f"{__name__} in pid {os.getpid()} uid {os.getuid()}\\n")
"""
PLANTED_NAMES = ("torch.py", "triton.py", "numpy.py", "tunedsl/__init__.py", "projkernels.py")

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)
"""

# Run with ``python -c`` from the project directory: the kernel's module comes through "".
ISOLATED = """
import os, sys
import torch
from projkernels import vadd  # the project's own module, through "" (the working directory)
from tunedsl import autotune_launch, cdiv
assert sys.path[0] == ""
os.chdir(sys.argv[1])  # into the shared directory
n = 300
a, b, c = torch.randn(n), torch.randn(n), torch.zeros(n)
result = autotune_launch(
    vadd, space={"tile": [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, isolate=True, name="cwd-iso",
)
assert torch.equal(c, a + b)
print("RESULT", result.source, sorted(r.status for r in result.timings.values()), flush=True)
"""

SWEEP_SCRIPT = """
import torch
from projkernels import vadd  # beside the session's working directory, not this script
from tunedsl import autotune_launch, cdiv, workload


@workload
def add(n=256):
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    autotune_launch(
        vadd, space={"tile": [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="cwd-sweep",
    )
    assert torch.equal(c, a + b)
"""

SWEEP = """
import io, json, os, sys
import numpy, torch, triton  # before the chdir: this process's imports are its own affair
import projkernels  # the project's own module, through "" (the working directory)
from tunedsl.precompile.sweep import sweep
assert sys.path[0] == ""
script, shapes = os.path.abspath("scripts/sweep_me.py"), os.path.abspath("shapes.json")
os.chdir(sys.argv[1])  # into the shared directory
written, outcomes = sweep(script, shapes, use_ray=False, gpus=2, out=io.StringIO())
print("ERRORS", json.dumps([o.error for o in outcomes]), flush=True)
"""


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky directory open to all (as /tmp), where uid 65534 planted modules."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user (uid 65534)")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to act as a second user")
    base = Path(tempfile.mkdtemp(prefix="tunedsl-shared-", dir="/tmp"))
    try:
        base.chmod(0o1777)
        plant = "; ".join(
            f'mkdir -p "$(dirname "$1/{n}")" && cp "$2" "$1/{n}"' for n in PLANTED_NAMES
        )
        source = base.parent / f"{base.name}.planted.py"
        source.write_text(PLANTED)
        source.chmod(0o644)
        try:
            subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 "sh", "-c", plant, "sh", str(base), str(source)],
                check=True, timeout=30,
            )  # fmt: skip
        finally:
            source.unlink()
        assert all((base / n).stat().st_uid == 65534 for n in PLANTED_NAMES)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def project(tmp_path: Path) -> Path:
    """The user's own project directory (theirs, closed to others), with its kernel module."""
    home = tmp_path / "project"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    write_script(home / "projkernels.py", KERNELS)
    return home


def run_c(code: str, cwd: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args...`` run in ``cwd``, as a notebook or REPL session would (no
    GPU named: a sweep's GPU processes tune under the interpreter)."""
    env = child_env(tmp_path / "cache")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def planted_ran(shared: Path) -> str:
    mark = shared / "planted-code-ran"
    return mark.read_text() if mark.exists() else ""


def test_the_isolated_worker_imports_nothing_from_a_shared_working_directory(
    tmp_path: Path, shared: Path
) -> None:
    done = run_c(ISOLATED, project(tmp_path), tmp_path, str(shared))
    assert planted_ran(shared) == "", f"another user's module ran: {planted_ran(shared)}"
    assert done.returncode == 0, done.stderr[-3000:]
    # The kernel's module came from the project directory, in the worker too.
    assert "RESULT tuned ['ok', 'ok']" in done.stdout, done.stdout + done.stderr[-3000:]


def test_the_gpu_processes_of_a_sweep_import_nothing_from_a_shared_working_directory(
    tmp_path: Path, shared: Path
) -> None:
    home = project(tmp_path)
    (home / "scripts").mkdir()
    write_script(home / "scripts" / "sweep_me.py", SWEEP_SCRIPT)
    (home / "shapes.json").write_text('[{"n": 100}, {"n": 300}]')
    done = run_c(SWEEP, home, tmp_path, str(shared))
    assert planted_ran(shared) == "", f"another user's module ran: {planted_ran(shared)}"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ERRORS [null, null]" in done.stdout, done.stdout + done.stderr[-3000:]


def test_a_module_from_a_working_directory_others_can_write_is_left_out_and_the_error_says_so(
    tmp_path: Path,
) -> None:
    # The session's own kernel module, but in a directory group and others may write.
    open_dir = project(tmp_path)
    open_dir.chmod(0o777)
    done = run_c(ISOLATED, open_dir, tmp_path, str(open_dir))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "No module named 'projkernels'" in last, done.stderr[-3000:]
    assert f"{open_dir} is writable by group or others (mode 777)" in last, last
    assert "keep your modules in a directory of your own" in last, last


def test_a_gpu_process_missing_a_module_from_a_directory_others_can_write_says_why(
    tmp_path: Path,
) -> None:
    open_dir = project(tmp_path)
    (open_dir / "scripts").mkdir()
    write_script(open_dir / "scripts" / "sweep_me.py", SWEEP_SCRIPT)
    (open_dir / "shapes.json").write_text('[{"n": 100}]')
    open_dir.chmod(0o777)
    done = run_c(SWEEP, open_dir, tmp_path, str(open_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    errors = json.loads(done.stdout.split("ERRORS ", 1)[1])
    assert "No module named 'projkernels'" in errors[0], errors
    assert f"{open_dir} is writable by group or others (mode 777)" in errors[0], errors


@pytest.fixture
def own_group() -> Iterator[str]:
    with rel_helpers.own_group() as name:
        yield name


def umask_002_project(tmp_path: Path, group: str) -> Path:
    """The project directory, and one above it, as ``umask 002`` makes them (775, the
    kernel's module 664), of ``group``."""
    work = tmp_path / "work"
    work.mkdir()
    home = project(work)
    for made, mode in ((work, 0o775), (home, 0o775), (home / "projkernels.py", 0o664)):
        shutil.chown(made, group=group)
        made.chmod(mode)
    return home


def test_a_working_directory_writable_only_by_your_own_group_stays_on_the_child_path(
    tmp_path: Path, shared: Path, own_group: str
) -> None:
    home = umask_002_project(tmp_path, own_group)
    done = run_c(ISOLATED, home, tmp_path, str(shared))
    assert planted_ran(shared) == "", f"another user's module ran: {planted_ran(shared)}"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT tuned ['ok', 'ok']" in done.stdout, done.stdout + done.stderr[-3000:]


def test_the_gpu_processes_of_a_sweep_keep_a_directory_writable_only_by_your_own_group(
    tmp_path: Path, shared: Path, own_group: str
) -> None:
    home = umask_002_project(tmp_path, own_group)
    (home / "scripts").mkdir()
    write_script(home / "scripts" / "sweep_me.py", SWEEP_SCRIPT)
    (home / "shapes.json").write_text('[{"n": 100}, {"n": 300}]')
    for made, mode in ((home / "scripts", 0o775), (home / "scripts" / "sweep_me.py", 0o664)):
        shutil.chown(made, group=own_group)
        made.chmod(mode)
    done = run_c(SWEEP, home, tmp_path, str(shared))
    assert planted_ran(shared) == "", f"another user's module ran: {planted_ran(shared)}"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ERRORS [null, null]" in done.stdout, done.stdout + done.stderr[-3000:]


def test_a_working_directory_writable_by_a_group_shared_with_another_user_is_left_out(
    tmp_path: Path, shared: Path, own_group: str
) -> None:
    rel_helpers.share_group(own_group)  # uid 65534 listed too: it could plant modules there
    home = umask_002_project(tmp_path, own_group)
    done = run_c(ISOLATED, home, tmp_path, str(shared))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "No module named 'projkernels'" in last, done.stderr[-3000:]
    assert f"{home.parent} is writable by group or others (mode 775)" in last, last


# What python_argv gives a child for its path, from a session started in the project
# directory, with a relative entry too, once it works elsewhere.
ARGV_PATH = """
import json, os, sys
import projkernels  # through ""
sys.path.append("src")  # relative: the working directory of its first use
import helper
os.chdir(sys.argv[1])
from tunedsl.backends.python_child import python_argv
argv = python_argv("pass")
print("PATH", json.dumps(argv[4 : 4 + int(argv[3])]))
"""


def test_a_child_path_names_the_directories_imported_from_not_the_working_directory(
    tmp_path: Path,
) -> None:
    home = project(tmp_path)
    (home / "src").mkdir()
    (home / "src" / "helper.py").write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_c(ARGV_PATH, home, tmp_path, str(elsewhere))
    assert done.returncode == 0, done.stderr[-3000:]
    path = json.loads(done.stdout.split("PATH ", 1)[1])
    assert all(os.path.isabs(p) for p in path), path  # no "", no "src"
    assert str(elsewhere) not in path, path  # the working directory at the child's start
    assert path[0] == str(home), path  # where "" was: the project, where projkernels is from
    assert path[-1] == str(home / "src"), path  # where "src" was, as first used
