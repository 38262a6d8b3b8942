"""The isolated measurement workers (``isolate=True``) against another user and against
signals, with real processes: a package planted by a second user in a shared working
directory never runs in a worker; a kernel module whose top-level code tunes fails that
tune with a ``TuningError`` instead of waiting on the parent's lock; and no process of a
tune is left 5 s after SIGKILL, SIGTERM or SIGINT of the tuning process while a
configuration spins."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import child_env, write_script
from test_sigint import _session_processes

pytestmark = pytest.mark.needs_triton
HERE = Path(__file__).resolve().parent
INTEGRATION = HERE.parent / "integration"

# Another user's ``tunedsl``: if it is ever imported, it leaves a mark beside itself.
PLANTED = """
import os
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(_here, "planted-code-ran"), "a") as _mark:
    _mark.write(f"pid {os.getpid()} uid {os.getuid()}\\n")
"""

# A tune of ``{kernel}`` (a vector add ``c = a + b`` of ``{module}``, found in ``{here}``) in
# an isolated worker; the result is checked, and the source and statuses printed.
ISOLATED_ADD = """
import sys
sys.path.insert(0, {here!r})
import torch
from {module} import {kernel}
from tunedsl import autotune_launch

n = 300
a, b, c = torch.ones(n), torch.ones(n), torch.zeros(n)
result = autotune_launch(
    {kernel},
    space=dict(TILE=[64, 128]),
    grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
    args=(a, b, c, n),
    kwargs=lambda cfg: dict(TILE=cfg.TILE),
    isolate=True,
    name={name!r},
)
assert torch.equal(c, a + b)
print("RESULT", result.source, sorted(r.status for r in result.timings.values()), flush=True)
"""
TUNED_IN_THE_WORKER = "RESULT tuned ['ok', 'ok']"  # every configuration measured there


def isolated_add(path: Path, here: Path, module: str, kernel: str, name: str | None = None) -> Path:
    """``path``, written with a script that tunes ``module.kernel`` in a worker."""
    text = ISOLATED_ADD.format(here=str(here), module=module, kernel=kernel, name=name)
    return write_script(path, text)


def test_a_package_planted_in_a_shared_working_directory_never_runs_in_the_worker(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user (uid 65534)")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to act as a second user")
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)  # a world-writable, sticky working directory, as /tmp itself
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "sh", "-c", 'mkdir "$1/tunedsl" && cat > "$1/tunedsl/__init__.py"', "sh",
             str(shared)],
            input=PLANTED, text=True, check=True, timeout=30,
        )  # fmt: skip
        planted = shared / "tunedsl" / "__init__.py"
        assert planted.stat().st_uid == 65534 and planted.parent.stat().st_uid == 65534
        script = isolated_add(tmp_path / "victim.py", HERE, "rel_kernels", "vadd", "shared-cwd")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=shared,  # the tune runs from the shared directory
            env=child_env(tmp_path / "cache"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        mark = shared / "planted-code-ran"
        assert not mark.exists(), f"the planted package ran: {mark.read_text()}"
        assert done.returncode == 0, done.stderr[-3000:]
        assert TUNED_IN_THE_WORKER in done.stdout, done.stdout + done.stderr[-3000:]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


IMPORTS_A_TUNING_MODULE = """
import sys
sys.path.insert(0, {here!r})
import tunes_at_import
"""


def test_a_tune_in_the_kernels_module_fails_in_the_worker_and_reaches_the_user_as_tuning_error(
    tmp_path: Path,
) -> None:
    # The parent holds the key's lock while the worker imports the module, whose top-level
    # tune would wait for it: the worker's tune fails at once and the parent says why.
    script = write_script(tmp_path / "main.py", IMPORTS_A_TUNING_MODULE.format(here=str(HERE)))
    done = subprocess.run(
        [sys.executable, str(script)],
        env=child_env(tmp_path / "cache", TUNEDSL_CONFIG_TIMEOUT="20"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tunedsl.errors.TuningError: "), done.stderr[-3000:]
    assert "a tune ran inside tunedsl's measurement worker" in last, last
    assert "WorkerDied" not in done.stderr
    assert "waiting" not in done.stderr  # no one waited for the parent's lock


STDIN_KERNELS = """
import sys
import triton
import triton.language as tl

READ = sys.stdin.read()  # top-level code that reads stdin, run again in the worker


@triton.jit
def add_reading_stdin(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)
"""


# A sweep script whose kernel the isolated worker imports again by the script's name.
SWEPT_ISOLATED = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@workload
def add(n=256):
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    autotune_launch(vadd, space={"tile": [32, 64]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, isolate=True)
    assert torch.equal(c, a + b)
"""


def test_the_worker_imports_a_swept_script_from_its_source_not_a_pyc_beside_it() -> None:
    # `tunedsl sweep` of a script in a shared sticky directory: the script was read from
    # its source, but the isolated worker imported it again by name through sys.path, and
    # ran the pyc another user put in a `__pycache__` they made beside it (their code, then
    # the script's, so the sweep went on as if nothing had happened).
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        script = write_script(shared / "swept_isolated.py", SWEPT_ISOLATED)
        script.chmod(0o644)
        marker = shared / "pwned"
        more = script.read_text()
        pyc = swap_attack.stage_pyc(script, shared / "staged.pyc", marker, more)
        swap_attack.attacker_step(swap_attack.PLANT_PYCACHE, str(shared / "staged.pyc"), pyc)
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "sweep", "--no-ray", str(script)],
            env=child_env(shared / "cache"), capture_output=True, text=True, timeout=300,
            cwd="/",
        )  # fmt: skip
        assert not marker.exists(), "another user's pyc ran in the isolated worker"
        assert done.returncode == 0, done.stderr[-3000:]
        assert "1 record written, 0 failed" in done.stdout + done.stderr, done.stderr[-3000:]


def test_a_kernel_module_that_reads_stdin_reads_nothing_in_the_worker(tmp_path: Path) -> None:
    # The worker imports the kernel's module, whose top-level code reads stdin: it read the
    # worker's request pipe and waited there until the configuration timed out, every time.
    write_script(tmp_path / "stdin_kernels.py", STDIN_KERNELS)
    script = isolated_add(tmp_path / "main.py", tmp_path, "stdin_kernels", "add_reading_stdin")
    done = subprocess.run(
        [sys.executable, str(script)],
        env=child_env(tmp_path / "cache", TUNEDSL_CONFIG_TIMEOUT="10"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert TUNED_IN_THE_WORKER in done.stdout, done.stdout + done.stderr[-3000:]


SPINNING = """
import sys
import threading
sys.path.insert(0, {integration!r})
import torch
from isolate_kernels import double_or_die
from tunedsl import autotune_launch, cdiv

n = 100
x, y = torch.randn(n), torch.empty(n)
marker = sys.argv[1]


def announce(args):  # in the worker, just before a repetition that spins
    open(marker, "a").close()


def tune():
    autotune_launch(
        double_or_die,
        space={{"tile": [32, 64]}},  # every configuration spins (MODE 2)
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, y, n),
        kwargs=lambda cfg: {{"TILE": cfg.tile, "MODE": 2}},
        pre_hook=announce,
        isolate=True,
    )


if sys.argv[2] == "thread":  # the worker is started by another thread than the main one
    worker = threading.Thread(target=tune)
    worker.start()
    worker.join()
else:
    tune()
print("FINISHED", flush=True)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="looks for stray processes via /proc")
@pytest.mark.parametrize(
    ("signum", "where"),
    [
        (signal.SIGKILL, "main"),
        (signal.SIGTERM, "main"),
        (signal.SIGINT, "main"),
        # Started from another thread, the worker has no parent-death signal (it would come
        # when that thread ends): its watch on the request pipe ends it.
        (signal.SIGKILL, "thread"),
        (signal.SIGTERM, "thread"),
    ],
)
def test_no_process_of_an_isolated_tune_outlives_a_signal(
    tmp_path: Path, signum: signal.Signals, where: str
) -> None:
    marker = tmp_path / "spinning"
    script = write_script(tmp_path / "spin.py", SPINNING.format(integration=str(INTEGRATION)))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(marker), where],
        env=child_env(tmp_path / "cache", TUNEDSL_CONFIG_TIMEOUT="600"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session: every process it starts is findable
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the worker never started the configuration"
            time.sleep(0.1)
        others = [p for p in _session_processes(proc.pid) if not p.startswith(f"{proc.pid} ")]
        assert others, "the worker process is running"
        proc.send_signal(signum)
        sent = time.monotonic()
        alive = _session_processes(proc.pid)
        while alive and time.monotonic() < sent + 5.0:
            time.sleep(0.1)
            proc.poll()  # reaps the tuning process once it ended (else a zombie, not counted)
            alive = _session_processes(proc.pid)
        assert alive == [], f"alive 5 s after {signum.name}: {alive}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for straggler in _session_processes(proc.pid):  # left the group, not the session
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(straggler.split()[0]), signal.SIGKILL)
        proc.wait()


def test_a_package_planted_in_a_shared_working_directory_never_runs_in_the_env_probe(
    tmp_path: Path,
) -> None:
    # `tunedsl env` asks a `python -c` child what torch sees of the GPUs: `-c`
    # puts the working directory first on the child's path, so run from a shared directory
    # the child imported another user's `torch/` instead of torch.
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user (uid 65534)")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to act as a second user")
    console = Path(sys.executable).parent / "tunedsl"
    if not console.exists():
        pytest.skip("needs the installed `tunedsl` command")
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "sh", "-c", 'mkdir "$1/torch" && cat > "$1/torch/__init__.py"', "sh",
             str(shared)],
            input=PLANTED, text=True, check=True, timeout=30,
        )  # fmt: skip
        done = subprocess.run(
            [str(console), "env"], cwd=shared, env=child_env(tmp_path / "cache"),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        mark = shared / "planted-code-ran"
        assert not mark.exists(), f"the planted package ran: {mark.read_text()}"
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
