"""A program that ends while a compile in its own threads still runs past its limit (a
small space compiles there, not in compile processes): it cannot be stopped, so the exit
leaves after waiting for it, with the program's own status, under ``tunedsl run`` (and
every ``tunedsl`` command) as under plain ``python``. Real cross-compiles for ``cuda:90``, in real
processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env, running_in_session, write_script

pytestmark = pytest.mark.needs_triton

# 8,000 unrolled steps compile for about 37 s on a 2-core host: far past the 1 s limit and
# the 10 s the exit waits.
SCRIPT = """
import sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tunedsl.backends import compile_pool
from tunedsl.model.config import Config


@triton.jit
def unrolled(x, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    for _ in tl.static_range(STEPS):
        v = v * 1.0001 + 0.5
    tl.store(x + offs, v)


def slow():
    constants = {"STEPS": 8000, "BLOCK": 1024}
    signature = {"x": "*fp32", "STEPS": "constexpr", "BLOCK": "constexpr"}
    return triton.compile(ASTSource(unrolled, signature, constants), target=GPUTarget("cuda", 90, 32))


jobs = [compile_pool.CompileJob(Config(STEPS=8000), slow)]
for job, result in compile_pool.compile_stream(jobs, workers=1, timeout_s=1):
    print("RESULT", type(result).__name__, flush=True)
if sys.argv[1:] == ["ctrl-c"]:
    raise KeyboardInterrupt
if sys.argv[1:]:
    sys.exit(int(sys.argv[1]))
print("ENDED", flush=True)
"""


def _run(tmp_path: Path, *argv: str, via_cli: bool) -> tuple[int, str, str, int]:
    script = write_script(tmp_path / "ends.py", SCRIPT)
    env = child_env(
        tmp_path / "cache", TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_DEFAULT_FP_FUSION="1"
    )
    env.pop("TRITON_INTERPRET")  # cross-compiling needs Triton's real compiler
    env["TUNEDSL_NO_AUTO_INTERPRET"] = "1"  # and `tunedsl run` must not turn it on
    (tmp_path / "tmp").mkdir(mode=0o700)
    env["TMPDIR"] = str(tmp_path / "tmp")
    command = [sys.executable, "-m", "tunedsl", "run"] if via_cli else [sys.executable]
    proc = subprocess.Popen(
        [*command, str(script), *argv], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err, proc.pid


def _left(tmp_path: Path) -> list[str]:
    """Files under the caches that no complete write made (a temporary one), and anything
    left in ``TMPDIR`` (a compile's private directory)."""
    found = [str(p) for p in (tmp_path / "tmp").iterdir()]
    for root in (tmp_path / "cache", tmp_path / "triton"):
        found += [str(p) for p in root.rglob("*") if p.is_file() and "tmp" in p.name]
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
@pytest.mark.parametrize("status", [None, 3], ids=["ends", "sys.exit(3)"])
def test_a_program_ending_under_a_compile_past_its_limit_keeps_its_own_status(
    tmp_path: Path, status: int | None
) -> None:
    """Under ``tunedsl run``, a script whose compile timed out (``CompileTimeout`` after
    1 s) ends while that compile still runs: the exit waits, then leaves with the script's
    own status (0, or its ``sys.exit(3)``) and one line saying the compile was abandoned; it
    left with status 1 whatever the script's status. No process of its session stays, and
    no temporary file in the caches."""
    argv = () if status is None else (str(status),)
    code, out, err, sid = _run(tmp_path, *argv, via_cli=True)
    assert "RESULT CompileTimeout" in out, err[-3000:]
    assert code == (0 if status is None else status), err[-3000:]
    said = [line for line in err.splitlines() if "a compile was still running at exit" in line]
    assert len(said) == 1 and "abandoned it" in said[0], err[-3000:]
    assert "tunedsl run" not in said[0]  # the status is the script's own: no advice
    assert running_in_session(sid) == []
    assert _left(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
@pytest.mark.parametrize("status", [None, 3], ids=["ends", "sys.exit(3)"])
def test_a_plain_script_ending_under_a_compile_past_its_limit_keeps_its_own_status(
    tmp_path: Path, status: int | None
) -> None:
    """The same under plain ``python``, where the program's status is the interpreter's
    until it calls the C library's ``exit``: the process leaves there with it (0, or its
    ``sys.exit(3)``), saying once that the compile was abandoned; it left with status 1
    whatever the script's status. No process of its session stays, and no temporary file."""
    argv = () if status is None else (str(status),)
    code, out, err, sid = _run(tmp_path, *argv, via_cli=False)
    assert "RESULT CompileTimeout" in out, err[-3000:]
    assert ("ENDED" in out) == (status is None), err[-3000:]
    assert code == (0 if status is None else status), err[-3000:]
    said = [line for line in err.splitlines() if "a compile was still running at exit" in line]
    assert len(said) == 1 and "abandoned it" in said[0], err[-3000:]
    assert "status 1" not in said[0] and "terminate called" not in err, err[-3000:]
    assert running_in_session(sid) == []
    assert _left(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="checks for stray processes via /proc")
@pytest.mark.parametrize("via_cli", [True, False], ids=["tunedsl-run", "python"])
def test_a_program_dying_of_ctrl_c_under_a_compile_past_its_limit_leaves_at_once(
    tmp_path: Path, via_cli: bool
) -> None:
    """A script whose compile timed out dies of an uncaught Ctrl-C: the process leaves at
    once with status 130 (the exit's wait for running compiles is skipped, so no line says
    a compile was abandoned after it), under ``tunedsl run`` as under plain ``python``.
    Under ``tunedsl run``, which reports the Ctrl-C itself, the exit waited 10 s for the
    compile first, then said it abandoned it."""
    code, out, err, sid = _run(tmp_path, "ctrl-c", via_cli=via_cli)
    assert "RESULT CompileTimeout" in out, err[-3000:]
    assert code == 130, err[-3000:]
    assert "KeyboardInterrupt" in err, err[-3000:]
    assert "a compile was still running at exit" not in err, err[-3000:]
    assert running_in_session(sid) == []
    assert _left(tmp_path) == []
