"""A sweep's local Ray instance is its own (``precompile/ray_instance.py``): ``ray.init()``
without an address joins the cluster that Ray's shared directory names, a file any local
user can write there. Real Ray, a real second local user, real files."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import running_in_session

from tunedsl.precompile.sweep import sweep
from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "integration" / "sweep_fixtures" / "sweep_vadd.py")

# Another user's `ray start` (or the user alone) leaves the address of their cluster in Ray's
# directory, which Ray opens to every user: here, an address nothing answers on.
PLANT_CLUSTER = """
import os, sys
ray_dir, address = sys.argv[1:3]
os.mkdir(ray_dir)
os.chmod(ray_dir, 0o777)
with open(os.path.join(ray_dir, "ray_current_cluster"), "w") as fh:
    fh.write(address)
"""


def test_a_sweep_never_joins_the_ray_cluster_another_user_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tunedsl sweep` without --ray called `ray.init()`, which joined the cluster named in
    # Ray's shared directory: another user's, whose actors would run the tasks and whose
    # pickled answers this process would load (here it waited on a dead address, then
    # failed: "cannot join a Ray cluster"). Its own instance starts, and keeps nothing in
    # that directory.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    swap_attack.need_second_user()
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with swap_attack.shared_tmp() as base:
        ray_dir = base / "ray"
        swap_attack.attacker_step(PLANT_CLUSTER, str(ray_dir), f"127.0.0.1:{port}")
        monkeypatch.setenv("RAY_TMPDIR", str(base))  # Ray's directory: base/ray
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 100}]))
        env = {
            "TRITON_INTERPRET": "1",
            "TUNEDSL_QUIET": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        written, outcomes = sweep(
            SCRIPT, str(shapes), use_ray=True, gpus_per_task=0, actors=1, runner_env=env,
            out=io.StringIO(),
        )  # fmt: skip
        assert [o.error for o in outcomes] == [None] and len(written) == 1
        assert os.listdir(ray_dir) == ["ray_current_cluster"]  # nothing of this sweep's
    left = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("tunedsl-ray-")]
    assert left == [], "the instance's private directory outlived the sweep"


# Each path it is given that it can create a file in (as another user), a line each.
TRY_WRITE = """
import os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(os.path.join(path, "planted"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        continue
    print(path)
"""


def test_no_other_user_can_write_in_the_sweeps_ray_instance_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ray opens the temporary directory it is given to every user (mode 0777, with its
    # session, sockets and runtime_resources directories below): the sweep gave it its
    # private scratch directory itself, so another user could plant files and swap the
    # instance's directories while it ran, and a killed sweep left it so. It now gets a
    # directory inside that private one.
    ray = pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    swap_attack.need_second_user()
    from tunedsl.precompile.ray_instance import ray_instance

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    # A directory like /tmp (sticky, open to all), named short: Ray's sockets go below it.
    base = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    base.chmod(0o1777)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(base))
        cwd = os.getcwd()
        with ray_instance(ray, None, {}) as local:
            assert local and os.getcwd() == cwd
            assert ray.get(ray.remote(lambda: 7).remote()) == 7
            (scratch,) = base.glob("tunedsl-ray-*")
            places = [str(scratch)] + [str(p) for p in scratch.rglob("*") if p.is_dir()]
            assert any("sockets" in p for p in places), places  # the instance's own
            proc = swap_attack.as_attacker(TRY_WRITE, *places)
            planted, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert planted.split() == [], "another user could write in the Ray instance's directory"
        assert list(base.glob("tunedsl-ray-*")) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    ("phase", "sig"),
    [("starting", signal.SIGINT), ("starting", signal.SIGKILL), ("running", signal.SIGKILL)],
)
def test_no_process_of_the_sweeps_ray_instance_outlives_the_sweep(
    tmp_path: Path, phase: str, sig: signal.Signals
) -> None:
    # A sweep killed (SIGKILL) or interrupted while ray.init started its instance runs no
    # ray.shutdown: Ray's agents lived on for about a minute after (one listening on the
    # network), and a killed sweep's instance directory was left until the next sweep.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    markers = tmp_path / "markers"
    markers.mkdir()
    scratch = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))  # short: Ray's sockets go below
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1", "TMPDIR": str(scratch),
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 300, "fail": "hang"}]))
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--gpus-per-task", "0",
            "--shapes", str(shapes)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C, as at a shell
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (
            any("gcs_server" in p for p in running_in_session(proc.pid))
            if phase == "starting"
            else (markers / "hang-started").exists()
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(sig)
        proc.communicate(timeout=120)
        deadline = time.monotonic() + 30
        while (
            running_in_session(proc.pid) or list(scratch.iterdir())
        ) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert running_in_session(proc.pid) == [], (
            "a process of the sweep's Ray instance outlived it"
        )
        assert [p.name for p in scratch.iterdir() if p.name.startswith("tunedsl-ray-")] == []
    finally:
        for line in running_in_session(proc.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)


# What another user can read of the victim's Ray token files: a line per file read.
READ_TOKENS = """
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path) as fh:
            print(path, len(fh.read()))
    except OSError:
        pass
"""


def test_the_sweeps_ray_instance_token_is_never_in_a_file_another_user_can_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray's token for a new local instance was written to ~/.ray/auth_token (mode 0644, in
    # a 0755 ~/.ray): in a home directory other users can enter (0755, as many are), any of
    # them could read it, join the instance (it listens on every interface) and run code as
    # the user. The instance now gets a token of its own in its processes' environment.
    # Two sweeps in one process: the second gets a token of its own too, and runs.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        home = base / "home"
        home.mkdir(mode=0o755)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
        monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
        monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 100}]))
        env = {
            "TRITON_INTERPRET": "1",
            "TUNEDSL_QUIET": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        for _ in range(2):
            written, outcomes = sweep(
                SCRIPT, str(shapes), use_ray=True, gpus_per_task=0, actors=1, runner_env=env,
                out=io.StringIO(),
            )  # fmt: skip
            assert [o.error for o in outcomes] == [None] and len(written) == 1
        files = [str(p) for p in home.rglob("*") if p.is_file()]
        proc = swap_attack.as_attacker(READ_TOKENS, *files)
        read, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert read.split() == [], f"another user read the Ray instance's token: {read}"
        assert "RAY_AUTH_TOKEN" not in os.environ


def test_a_tmpdir_too_long_for_rays_sockets_is_named_before_ray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray raised "OSError: validate_socket_filename failed: AF_UNIX path length cannot exceed
    # 107 bytes" from inside ray.init, a traceback naming neither TMPDIR nor a fix.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    from tunedsl.errors import UsageError

    long_tmp = Path(tempfile.mkdtemp(prefix="t" * 60, dir="/tmp"))
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(long_tmp))
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 100}]))
        with pytest.raises(UsageError, match=r"TMPDIR=.* shorter path .* or pass --no-ray"):
            sweep(SCRIPT, str(shapes), use_ray=True, gpus_per_task=0, out=io.StringIO())
        assert os.listdir(long_tmp) == []  # its scratch directory removed, nothing started
    finally:
        shutil.rmtree(long_tmp, ignore_errors=True)


def _stop_a_ray_sweep(tmp_path: Path, sig: signal.Signals) -> tuple[int, str, list[str]]:
    """A sweep on Ray of two tasks, sent ``sig`` once the first is done and the second runs:
    its status, what it said, and the processes of its session left 30 s after it ended."""
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}, {"n": 300, "fail": "slow"}]))
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--gpus-per-task", "0",
            "--actors", "1", "--shapes", str(shapes)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C, as at a shell
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (markers / "slow-started").exists():  # the first task is done by then
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        deadline = time.monotonic() + 30
        while running_in_session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        return proc.returncode, err.decode(), running_in_session(proc.pid)
    finally:
        for line in running_in_session(proc.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def _kept_records(tmp_path: Path) -> list[records.Record]:
    return [records.read_record_file(p) for p in (tmp_path / "cache").glob("records/*.json")]


def test_ctrl_c_of_a_ray_sweep_writes_the_finished_tasks_records(tmp_path: Path) -> None:
    # Ctrl-C cancelled the running tasks with ray.cancel(force=True), which Ray refuses for
    # an actor's task: its ValueError replaced the interrupt, a traceback and status 1, and
    # the finished tasks' records were never written.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    status, said, _ = _stop_a_ray_sweep(tmp_path, signal.SIGINT)
    assert status == 130, said
    assert "Traceback" not in said and "interrupted after 1 of 2 tasks" in said, said
    kept = _kept_records(tmp_path)
    assert kept and all("100" in str(r.key) for r in kept), said


def test_sigterm_of_a_ray_sweep_stops_as_ctrl_c_does(tmp_path: Path) -> None:
    # ray.init takes SIGTERM for Ray's C++ core, which dumped a stack and aborted: status
    # 134, the finished task's records never written, the actors left to the reaper.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    status, said, left = _stop_a_ray_sweep(tmp_path, signal.SIGTERM)
    assert status == 143, said
    assert "SIGTERM received" not in said and "Traceback" not in said, said
    assert "sweep: terminated (SIGTERM) after 1 of 2 tasks; wrote the 1 records" in said, said
    assert said.rstrip().splitlines()[-1] == "tunedsl: terminated (SIGTERM)", said
    kept = _kept_records(tmp_path)  # each validates as it is read
    assert len(kept) == 1 and "100" in str(kept[0].key), said
    assert left == [], "a process of the sweep outlived it"


def _naming(text: str) -> list[str]:
    """The processes whose command line holds ``text`` (Ray's name the instance's directory)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in argv:
            found.append(f"{cmdline.parent.name} {argv[:200]}")
    return found


def test_sigterm_while_ray_starts_its_instance_stops_as_ctrl_c_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    # SIGTERM inside ray.init met Ray's own handler, sys.exit(15): the sweep left with status
    # 15 and not a word.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    short = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # Ray's socket paths stay short
    try:
        env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1", "TMPDIR": str(short),
               "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
        env.pop("RAY_ADDRESS", None)
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 100}]))
        argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--gpus-per-task", "0",
                "--actors", "1", "--shapes", str(shapes)]  # fmt: skip
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not list(short.glob("tunedsl-ray-*/r/session_*")):  # ray.init has begun
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            _, said = proc.communicate(timeout=120)
            deadline = time.monotonic() + 40  # the reaper's limit, and more
            while (_naming(str(short)) or running_in_session(proc.pid)) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.2)
            left = _naming(str(short)) + running_in_session(proc.pid)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            for line in _naming(str(short)) + running_in_session(proc.pid):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        assert proc.returncode == 143, said
        assert "Traceback" not in said, said
        assert said.rstrip().splitlines()[-1] == "tunedsl: terminated (SIGTERM)", said
        assert left == [], f"a process of the Ray instance outlived the sweep: {left}"
        assert os.listdir(short) == [], "the instance's directory was left"
    finally:
        shutil.rmtree(short, ignore_errors=True)


PLANTED = """
import os
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(_here, "planted-code-ran"), "a") as _mark:
    _mark.write(f"pid {os.getpid()} uid {os.getuid()}\\n")
"""

SWEEP_ON_RAY = """
import io, sys
from tunedsl.precompile.sweep import sweep
written, outcomes = sweep(sys.argv[1], sys.argv[2], use_ray=True, gpus_per_task=0, actors=1,
                          out=io.StringIO())
print("ERRORS", [o.error for o in outcomes], "WRITTEN", len(written))
"""


def test_a_package_planted_in_a_shared_working_directory_never_runs_in_a_ray_actor(
    tmp_path: Path,
) -> None:
    # ray.init puts the working directory it runs in on every Ray worker's import path,
    # before the installed packages: a sweep run from a shared directory had each actor
    # import another user's `tunedsl/` there (and run it as this user) instead of its own.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:  # world-writable and sticky, as /tmp itself
        swap_attack.attacker_step(
            "import os, sys; os.mkdir(sys.argv[1]); open(sys.argv[1] + '/__init__.py', 'w')"
            ".write(sys.argv[2])",
            str(shared / "tunedsl"), PLANTED,
        )  # fmt: skip
        driver = tmp_path / "driver.py"
        driver.write_text(SWEEP_ON_RAY)
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 130}]))
        env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
               "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        env.pop("RAY_ADDRESS", None)
        done = subprocess.run(
            [sys.executable, str(driver), SCRIPT, str(shapes)],
            cwd=shared, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        mark = shared / "planted-code-ran"
        assert not mark.exists(), f"the planted package ran: {mark.read_text()}"
        assert done.returncode == 0, done.stderr[-3000:]
        assert "ERRORS [None] WRITTEN 1" in done.stdout, done.stdout + done.stderr[-3000:]


READS_A_RELATIVE_FILE = """
from tunedsl import workload

@workload
def reads():
    with open("relative.txt") as fh:
        assert fh.read() == "here"
"""


def test_ray_actors_run_in_the_sweeps_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No Ray worker has the working directory on its import path; the actors still run their
    # workloads where the sweep runs, as without Ray.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    script = tmp_path / "relative_wl.py"
    script.write_text(READS_A_RELATIVE_FILE)
    (tmp_path / "relative.txt").write_text("here")
    monkeypatch.chdir(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    _, outcomes = sweep(
        str(script), None, use_ray=True, gpus_per_task=0, actors=1, runner_env=env,
        out=io.StringIO(),
    )  # fmt: skip
    assert [o.error for o in outcomes] == [None]
    assert os.getcwd() == str(tmp_path)


def test_a_sweep_refuses_to_start_a_ray_instance_that_takes_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With RAY_AUTH_MODE=disabled in the environment the sweep's own instance took no token,
    # and its processes listen on every interface: another local user could run tasks there.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    from tunedsl.errors import UsageError

    scratch = Path(tempfile.mkdtemp(prefix="ra", dir="/tmp"))  # short: room for Ray's sockets
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(scratch))
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 100}]))
        with pytest.raises(UsageError, match=r"RAY_AUTH_MODE=disabled.*Unset RAY_AUTH_MODE"):
            sweep(SCRIPT, str(shapes), use_ray=True, gpus_per_task=0, out=io.StringIO())
        assert os.listdir(scratch) == []  # nothing started, no directory made
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
