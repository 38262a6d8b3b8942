"""``tunedsl sweep``: a script's workloads over shapes, in process and on a local Ray cluster
(CPU actors with num_gpus=0, real Triton kernels under the interpreter)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunedsl.errors import UsageError
from tunedsl.precompile.sweep import read_shapes, sweep
from tunedsl.store import paths, records

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).parent
SCRIPT = str(HERE / "sweep_fixtures" / "sweep_vadd.py")


def shapes(tmp_path: Path, items: list[dict]) -> str:
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(items))
    return str(path)


def local_records() -> list[records.Record]:
    return [records.read_record_file(p) for p in records.iter_record_files()]


def test_in_process_sweep_writes_one_record_per_shape_and_a_bundle(tmp_path: Path) -> None:
    out = io.StringIO()
    bundle = tmp_path / "bundle.json"
    written, outcomes = sweep(
        SCRIPT, shapes(tmp_path, [{"n": 100}, {"n": 300}]), use_ray=False, bundle=str(bundle),
        out=out,
    )  # fmt: skip
    assert [o.error for o in outcomes] == [None, None]
    assert len(written) == 2 and len(local_records()) == 2
    # The bundle `cache export` writes: JSON Lines, a header and then a record a line, which
    # `cache import` streams (it was the single-document format of earlier releases).
    header, *lines = bundle.read_text().splitlines()
    assert json.loads(header) == {"tunedsl_records": 2}, header
    assert sorted(json.loads(line)["digest"] for line in lines) == sorted(r.digest for r in written)
    assert "2/2 tasks" in out.getvalue()


def test_the_progress_of_one_task_says_task(tmp_path: Path) -> None:
    out = io.StringIO()
    written, _ = sweep(SCRIPT, shapes(tmp_path, [{"n": 117}]), use_ray=False, out=out)
    assert len(written) == 1
    assert "] 1/1 task: " in out.getvalue(), out.getvalue()


def test_a_shape_listed_twice_is_one_task_tuned_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Two processes (GPUs) each took a copy of the shape and tuned the same key again: a
    # copy per process, or per Ray actor, of a shape listed twice (shapes files joined).
    items = [{"n": 130}, {"n": 130}, {"n": 330}, {"n": 130}, {"n": 330}]
    out = io.StringIO()
    written, outcomes = sweep(SCRIPT, shapes(tmp_path, items), use_ray=False, gpus=2, out=out)
    assert sorted(o.task.shape["n"] for o in outcomes) == [130, 330]
    assert [len(o.records) for o in outcomes] == [1, 1] and len(written) == 2
    assert "2/2 tasks" in out.getvalue()


@pytest.mark.parametrize("gpus", [None, 2])
def test_a_task_that_calls_sys_exit_is_a_failed_task_not_the_end_of_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int | None
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # (Sizes no other test of this process tunes: its decisions stay in the site's memory.)
    items = [{"n": 110}, {"n": 310, "fail": "exit"}, {"n": 510}]
    written, outcomes = sweep(
        SCRIPT, shapes(tmp_path, items), use_ray=False, gpus=gpus, out=io.StringIO()
    )
    by_n = {o.task.shape["n"]: o for o in outcomes}
    assert by_n[110].error is None and by_n[510].error is None
    assert "the workload called sys.exit(4)" in (by_n[310].error or ""), by_n[310].error
    assert len(written) == 2


def test_tunedsl_quiet_silences_the_sweep_progress_and_a_bad_value_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TUNEDSL_QUIET=1 means no progress lines: the sweep printed one per task all the same.
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    out = io.StringIO()
    _, outcomes = sweep(SCRIPT, shapes(tmp_path, [{"n": 100}]), use_ray=False, out=out)
    assert [o.error for o in outcomes] == [None]
    assert out.getvalue() == ""
    monkeypatch.setenv("TUNEDSL_QUIET", "banana")  # named before anything is planned or run
    with pytest.raises(UsageError, match="TUNEDSL_QUIET='banana' is not a boolean"):
        sweep(SCRIPT, shapes(tmp_path, [{"n": 300}]), use_ray=False, out=io.StringIO())


def test_a_bad_shapes_file_says_what_is_expected(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="JSON list of objects"):
        read_shapes(shapes(tmp_path, {"n": 1}))  # type: ignore[arg-type]


def test_a_shape_that_is_no_object_is_named_by_its_entry_and_line(tmp_path: Path) -> None:
    # One bad entry among many (a list where an object belongs): the error said only that
    # the file must hold a list of objects, leaving the user to search for it.
    path = tmp_path / "shapes.json"
    path.write_text('[\n  {"n": 100},\n  {"n": 200},\n  [300],\n  {"n": 400}\n]\n')
    with pytest.raises(UsageError) as err:
        read_shapes(str(path))
    text = str(err.value)
    assert f"shapes file {path}, line 4: entry 3 is [300], not an object" in text, text
    assert '[{"n": 4096}' in text


def test_an_argument_named_twice_in_one_shape_is_an_error(tmp_path: Path) -> None:
    # JSON keeps the last value: the shape {"n": 100} was silently never swept.
    path = tmp_path / "shapes.json"
    path.write_text('[{"n": 100, "n": 200}]')
    with pytest.raises(UsageError, match=r"shapes file .*: an object names 'n' twice: give"):
        read_shapes(str(path))


@pytest.mark.parametrize("command", ["sweep", "rules build"])
def test_an_empty_shapes_file_is_an_error_not_a_sweep_of_nothing(
    tmp_path: Path, command: str
) -> None:
    # `[]` (a generator's bug) planned no task: "0 tasks, 0 records written, 0 failed", exit 0.
    path = shapes(tmp_path, [])
    argv = [SCRIPT, "--no-ray"] if command == "sweep" else ["--out", str(tmp_path / "r")]
    argv += ["--script", SCRIPT] if command != "sweep" else []
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", *command.split(), *argv, "--shapes", path],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"shapes file {path} holds no shapes" in lines[0], lines
    assert '[{"n": 4096}' in lines[0] and "0 tasks" not in done.stdout + done.stderr


def test_ray_sweep_retries_on_another_actor_and_reports_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {
        "TRITON_INTERPRET": "1",
        "TUNEDSL_QUIET": "1",
        "SWEEP_MARKERS": str(markers),
        "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")]),
    }
    monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    items = [{"n": 100}, {"n": 300, "fail": "once"}, {"n": 500, "fail": "always"}]
    written, outcomes = sweep(
        SCRIPT, shapes(tmp_path, items), use_ray=True, gpus_per_task=0, actors=2,
        runner_env=env, out=io.StringIO(),
    )  # fmt: skip
    by_n = {o.task.shape["n"]: o for o in outcomes}
    assert by_n[100].error is None and by_n[100].attempts == 1
    assert by_n[300].error is None and by_n[300].attempts == 2
    # The retry ran on the other actor (another process).
    assert (markers / "once-300").read_text() != (markers / "retried-300").read_text()
    assert by_n[500].attempts == 2 and "always fails" in (by_n[500].error or "")
    assert len(written) == 2 and len(local_records()) == 2


def test_ctrl_c_writes_the_finished_tasks_records_and_no_bundle(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    cache = tmp_path / "cache"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(cache)}  # fmt: skip
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes",
            shapes(tmp_path, [{"n": 100}, {"n": 300, "fail": "slow"}]), "--bundle",
            str(tmp_path / "bundle.json")]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (markers / "slow-started").exists():  # the first task is done by then
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    # The finished task's tuning is kept (valid records of n=100 only); the slow task's is
    # not, nor a bundle, which would claim a whole sweep.
    kept = [records.read_record_file(p) for p in cache.glob("records/*.json")]
    assert kept, err.decode()
    assert all("100" in str(r.key) and "300" not in str(r.key) for r in kept), [r.key for r in kept]
    assert "interrupted after 1 of 2 tasks" in err.decode()
    assert not (tmp_path / "bundle.json").exists()


def test_a_gpu_process_does_not_outlive_a_sweep_killed_in_the_middle_of_its_task(
    tmp_path: Path,
) -> None:
    # SIGKILL gives the sweep no chance to stop its GPU processes: each must notice alone,
    # even in the middle of a task that would run for an hour.
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--gpus", "2",
            "--shapes", shapes(tmp_path, [{"n": 300, "fail": "hang"}])]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    started = markers / "hang-started"
    deadline = time.monotonic() + 300
    while not started.exists() or not started.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    child = int(started.read_text())
    proc.kill()
    proc.communicate(timeout=60)
    try:
        deadline = time.monotonic() + 60
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(child), "the GPU process runs on after its sweep was killed"
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)


def _running(pid: int) -> bool:
    # A zombie has ended (its parent, killed, no longer waits for it).
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_sweep_measures_every_shape_even_where_a_shipped_rule_would_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sweeping more shapes to build a rule again: the rule built from the first sweep must
    # not answer for the shapes the new sweep is there to measure.
    from rule_helpers import rules_cli

    from tunedsl.store import rules as rule_store

    # (Sizes no other test of this process tunes: its decisions stay in the site's memory.)
    sweep(SCRIPT, shapes(tmp_path, [{"n": n} for n in (68, 260, 1040)]), use_ray=False,
          out=io.StringIO())  # fmt: skip
    built = rules_cli("build", "--out", str(tmp_path / "rules"))
    assert built.returncode == 0, built.stderr
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(tmp_path / "rules"))
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "new-cache"))
    rule_store.forget_loaded()
    try:
        written, outcomes = sweep(
            SCRIPT, shapes(tmp_path, [{"n": 330}, {"n": 730}]), use_ray=False,
            out=io.StringIO(),
        )  # fmt: skip
    finally:
        rule_store.forget_loaded()
    assert [o.error for o in outcomes] == [None, None]
    assert len(written) == 2 and len(local_records()) == 2


def sharded_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("SWEEP_MARKERS", str(markers))
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return markers


def test_a_sweep_without_ray_gives_each_gpu_process_different_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two "GPUs" (two real child processes, each told its GPU by CUDA_VISIBLE_DEVICES,
    # tuning under the interpreter) take the shapes from one shared queue.
    markers = sharded_env(tmp_path, monkeypatch)
    monkeypatch.delenv("TUNEDSL_QUIET")  # the progress lines are checked below
    sizes = [100 + 50 * i for i in range(8)]
    out = io.StringIO()
    written, outcomes = sweep(
        SCRIPT, shapes(tmp_path, [{"n": n} for n in sizes]), use_ray=False, gpus=2, out=out
    )
    assert [o.error for o in outcomes] == [None] * len(sizes)
    # One record per shape (one key each), each shape tuned exactly once.
    assert len(written) == len(sizes) and len(local_records()) == len(sizes)
    ran = {n: (markers / f"ran-{n}").read_text().splitlines() for n in sizes}
    assert all(len(lines) == 1 for lines in ran.values()), ran
    pid_gpu = {line for lines in ran.values() for line in lines}
    # Both processes worked, each on its own GPU, neither in this process.
    assert {g for _, g in (x.split() for x in pid_gpu)} == {"0", "1"}
    assert len({p for p, _ in (x.split() for x in pid_gpu)}) == 2
    assert str(os.getpid()) not in {x.split()[0] for x in pid_gpu}
    assert f"{len(sizes)}/{len(sizes)} tasks" in out.getvalue()


def test_a_sharded_task_that_fails_is_retried_on_the_other_gpu_then_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markers = sharded_env(tmp_path, monkeypatch)
    items = [{"n": 100}, {"n": 300, "fail": "always"}, {"n": 500, "fail": "die"}]
    written, outcomes = sweep(
        SCRIPT, shapes(tmp_path, items), use_ray=False, gpus=2, out=io.StringIO()
    )
    by_n = {o.task.shape["n"]: o for o in outcomes}
    assert by_n[100].error is None
    # Tried on both GPUs, then reported with the GPU of the last try and the reason.
    for n in (300, 500):
        gpus = {line.split()[1] for line in (markers / f"ran-{n}").read_text().splitlines()}
        assert gpus == {"0", "1"} and by_n[n].attempts == 2
    assert "on GPU" in (by_n[300].error or "") and "always fails" in (by_n[300].error or "")
    assert "died (exit code 3)" in (by_n[500].error or "")
    assert len(written) == 1  # the shape that worked is written; the others are not


def test_sweep_gpus_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--gpus N"):
        sweep(SCRIPT, shapes(tmp_path, [{"n": 100}]), use_ray=False, gpus=0, out=io.StringIO())


def copied_script(tmp_path: Path) -> str:
    """The sweep fixture at a path of its own (a process imports a script once: a test that
    counts imports needs a path no earlier test imported)."""
    copy = tmp_path / "sweep_vadd_copy.py"
    shutil.copy(SCRIPT, copy)
    return str(copy)


def test_a_process_imports_the_script_once_for_all_its_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markers = sharded_env(tmp_path, monkeypatch)
    sizes = (100, 200, 300)
    written, outcomes = sweep(
        copied_script(tmp_path), shapes(tmp_path, [{"n": n} for n in sizes]), use_ray=False,
        out=io.StringIO(),
    )  # fmt: skip
    assert [o.error for o in outcomes] == [None] * len(sizes) and len(written) == len(sizes)
    # One import, for planning and every task: the kernel is compiled and loaded once.
    assert (markers / "imported").read_text().split() == [str(os.getpid())]


def test_gpu_processes_import_the_script_while_the_sweep_plans_and_share_compile_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markers = sharded_env(tmp_path, monkeypatch)
    # The sweep's own import of the script (its planning) waits until another process has
    # imported it: the GPUs' processes must have started, and be warming up, before it.
    monkeypatch.setenv("SWEEP_WAIT_FOR_ANOTHER", str(os.getpid()))
    sizes = (100, 200, 300, 400)
    written, outcomes = sweep(
        copied_script(tmp_path), shapes(tmp_path, [{"n": n} for n in sizes]), use_ray=False,
        gpus=2, out=io.StringIO(),
    )  # fmt: skip
    assert [o.error for o in outcomes] == [None] * len(sizes) and len(written) == len(sizes)
    imported = (markers / "imported").read_text().split()
    children = [pid for pid in imported if pid != str(os.getpid())]
    assert len(children) == 2 and len(set(children)) == 2  # each imported it once
    # Every task's compile locks are the user's cache's (processes side by side compile a
    # variant once); only its records directory is its own.
    dirs = [line.split() for line in (markers / "dirs").read_text().splitlines()]
    assert len(dirs) == len(sizes)
    assert {locks for locks, _ in dirs} == {str(paths.locks_dir())}
    assert len({records_dir for _, records_dir in dirs}) == len(sizes)
    assert str(paths.records_dir()) not in {records_dir for _, records_dir in dirs}


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        ("GPU 0: NVIDIA H100 (UUID: GPU-a)\nGPU 1: NVIDIA H100 (UUID: GPU-b)\n", ["0", "1"]),
        # MIG instances are numbered differently by CUDA: the count is left to torch (CPU: none)
        ("GPU 0: NVIDIA H100 (UUID: GPU-a)\n  MIG 1g.10gb Device 0: (UUID: MIG-c)\n", []),
    ],
)
def test_the_gpus_are_counted_by_nvidia_smi_where_it_lists_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listing: str, expected: list[str]
) -> None:
    from tunedsl.precompile.gpu_shards import visible_gpus

    # A stand-in for the driver's tool, which this machine lacks: it prints what a host shows.
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\ncat <<'LISTING'\n{listing}LISTING\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus() == expected


def test_after_a_failed_task_the_next_imports_the_script_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the failed task decided in memory is in no record: the next task must not reuse it.
    markers = sharded_env(tmp_path, monkeypatch)
    items = [{"n": 100, "fail": "always"}, {"n": 200}, {"n": 300}]
    written, outcomes = sweep(
        copied_script(tmp_path), shapes(tmp_path, items), use_ray=False, out=io.StringIO()
    )
    assert [o.error is None for o in outcomes] == [False, True, True] and len(written) == 2
    # Planning's import served the failed task; the two tasks after it share a fresh one.
    assert (markers / "imported").read_text().split() == [str(os.getpid())] * 2


def _gpu_children() -> list[int]:
    """This process's children that are GPU processes of a sweep."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"tunedsl.precompile.gpu_child" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_script_without_workloads_ends_the_gpu_processes_started_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sharded_env(tmp_path, monkeypatch)
    script = tmp_path / "no_workloads.py"
    script.write_text("X = 1\n")
    with pytest.raises(UsageError, match=r"declares no @tunedsl\.workload"):
        sweep(str(script), shapes(tmp_path, [{"n": 1}]), use_ray=False, gpus=2, out=io.StringIO())
    assert _gpu_children() == []  # started before planning, and ended with it


def test_a_ray_sweep_asking_gpus_of_a_cluster_without_any_says_so_instead_of_waiting(
    tmp_path: Path,
) -> None:
    # No actor asking `--gpus-per-task 1` can ever start on a local Ray instance with no
    # GPU: the sweep waited for one forever, printing nothing.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    from tunedsl.autointerp import gpu_driver_present

    if gpu_driver_present():
        pytest.skip("a machine without a GPU: here a local Ray instance has GPUs")
    env = {**os.environ, "TUNEDSL_QUIET": "1", "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT,
            "--shapes", shapes(tmp_path, [{"n": 100}])]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        pytest.fail("the sweep still waits for a GPU actor after 150 s")
    assert proc.returncode == 1, err.decode()
    assert "--gpus-per-task 0" in err.decode() and "has 0 GPUs" in err.decode()
    assert not list((tmp_path / "cache").glob("records/*.json"))


def test_a_killed_sweeps_scratch_directory_is_removed_by_the_next_sweep(tmp_path: Path) -> None:
    # SIGKILL leaves the task's scratch directory (tunedsl-sweep-*) in the temporary
    # directory; the next sweep of the same user removes it, and only it: not a live one,
    # not another user's, not through a symbolic link.
    markers = tmp_path / "markers"
    markers.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1", "TMPDIR": str(scratch),
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes"]
    proc = subprocess.Popen(
        [*argv, shapes(tmp_path, [{"n": 300, "fail": "slow"}])],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not (markers / "slow-started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    proc.communicate(timeout=60)
    (left,) = scratch.glob("tunedsl-sweep-*")
    # What the next sweep must leave alone: a symbolic link to a directory of this user's,
    # and (as root) a directory of another user's.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "file").write_text("mine")
    os.symlink(kept, scratch / "tunedsl-sweep-link")
    foreign = scratch / "tunedsl-sweep-foreign"
    if os.geteuid() == 0:
        foreign.mkdir()
        (foreign / ".alive").write_text("")
        os.chown(foreign / ".alive", 65534, 65534)
        os.chown(foreign, 65534, 65534)
    again = subprocess.run(
        [*argv, shapes(tmp_path, [{"n": 120}])], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert not left.exists(), "the killed sweep's scratch directory is still there"
    assert (kept / "file").read_text() == "mine" and (scratch / "tunedsl-sweep-link").is_symlink()
    assert foreign.exists() == (os.geteuid() == 0)
    assert sorted(p.name for p in scratch.iterdir()) == sorted(
        ["tunedsl-sweep-link"] + (["tunedsl-sweep-foreign"] if foreign.exists() else [])
    )


PLANTED = """
import os
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(_here, "planted-code-ran"), "a") as _mark:
    _mark.write(f"pid {os.getpid()} uid {os.getuid()}\\n")
"""

SWEEP_ON_TWO_GPUS = """
import io, sys
from tunedsl.precompile.sweep import sweep
written, outcomes = sweep(sys.argv[1], sys.argv[2], use_ray=False, gpus=2, out=io.StringIO())
print("ERRORS", [o.error for o in outcomes], "WRITTEN", len(written))
"""


def test_a_package_planted_in_a_shared_working_directory_never_runs_in_a_gpu_process(
    tmp_path: Path,
) -> None:
    # `python -m` puts the working directory first on the path: a GPU process started that
    # way from a shared directory imported another user's `tunedsl/` before its own.
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as a second user (uid 65534)")
    shared = Path(tempfile.mkdtemp(prefix="tunedsl-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)  # world-writable and sticky, as /tmp itself
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "sh", "-c", 'mkdir "$1/tunedsl" && cat > "$1/tunedsl/__init__.py"', "sh",
             str(shared)],
            input=PLANTED, text=True, check=True, timeout=30,
        )  # fmt: skip
        assert (shared / "tunedsl" / "__init__.py").stat().st_uid == 65534
        driver = tmp_path / "driver.py"
        driver.write_text(SWEEP_ON_TWO_GPUS)
        env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
               "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
               "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent),
                                              os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        env.pop("CUDA_VISIBLE_DEVICES", None)
        done = subprocess.run(
            [sys.executable, str(driver), SCRIPT, shapes(tmp_path, [{"n": 130}, {"n": 330}])],
            cwd=shared, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        mark = shared / "planted-code-ran"
        assert not mark.exists(), f"the planted package ran: {mark.read_text()}"
        assert done.returncode == 0, done.stderr[-3000:]
        assert "ERRORS [None, None] WRITTEN 2" in done.stdout, done.stdout + done.stderr[-3000:]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("kind", ["fifo", "deep", "huge"])
def test_a_hostile_shapes_file_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    # A FIFO (no writer) hung the sweep forever, JSON nested 100,000 deep was a
    # RecursionError traceback, and a file of any size was read whole into memory.
    path = tmp_path / "shapes.json"
    if kind == "fifo":
        os.mkfifo(path)
        why = "not a regular file"
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
        why = "nested too deeply"
    else:
        with path.open("wb") as fh:
            fh.truncate(65 * 1024 * 1024)  # sparse: no disk used
        why = "limit"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_CACHE_DIR": str(tmp_path / "c")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes", str(path)],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"tunedsl sweep hung on a shapes file that is a {kind}")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunedsl: error: cannot read shapes file")
    assert str(path) in lines[0] and why in lines[0], lines[0]


def test_a_shape_naming_an_argument_the_workload_does_not_take_is_named_before_any_task(
    tmp_path: Path,
) -> None:
    # {"m": 3} for add(n, fail) failed as a bare TypeError on its task, after the others had
    # been tuned, naming neither the shapes file, its line, nor the workload's parameters.
    path = tmp_path / "shapes.json"
    path.write_text('[\n  {"n": 100},\n  {"n": 200, "m": 3}\n]\n')
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_CACHE_DIR": str(tmp_path / "c"),
           "SWEEP_MARKERS": str(marks)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes", str(path)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"shapes file {path}, line 3: entry 2 passes m=" in lines[0], lines[0]
    assert "which workload add does not take (its parameters: n=256, fail='')" in lines[0]
    assert not list(marks.glob("ran-*")), "a task ran before the bad entry was named"


def test_a_workload_needing_an_argument_no_shape_gives_is_named(tmp_path: Path) -> None:
    from tunedsl.precompile.shapes import check_arguments
    from tunedsl.precompile.workload import Workload

    def scale(n, factor=2):  # type: ignore[no-untyped-def]
        return n * factor

    wl = [Workload(fn=scale, module="m", qualname="scale", filename="m.py", line=1)]
    with pytest.raises(
        UsageError,
        match=r"entry 2 gives no n=, which workload scale needs \(its parameters: n, factor=2\)",
    ):
        check_arguments(read_shapes(shapes(tmp_path, [{"n": 1}, {"factor": 3}])), wl)
    with pytest.raises(
        UsageError, match=r"no --shapes file.*needs n= \(its.*: list its values in a --"
    ):
        check_arguments(read_shapes(None), wl)
    check_arguments(read_shapes(shapes(tmp_path, [{"n": 1}, {"n": 2, "factor": 3}])), wl)


TWO_WORKLOADS = str(HERE / "sweep_fixtures" / "sweep_two_workloads.py")


def test_an_interrupted_sweep_of_two_workloads_names_only_the_tasks_left_by_workload(
    tmp_path: Path,
) -> None:
    """Interrupted where one workload has finished a shape and the other has not, the sweep
    named the shape alone, so the rerun it advised tuned the finished workload there again.
    It names each workload's tasks left with ``--workload``, which runs only those."""
    markers = tmp_path / "markers"
    markers.mkdir()
    cache = tmp_path / "cache"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_QUIET": "1",
           "SWEEP_MARKERS": str(markers), "TUNEDSL_CACHE_DIR": str(cache)}  # fmt: skip
    argv = [sys.executable, "-m", "tunedsl", "sweep", TWO_WORKLOADS, "--no-ray", "--shapes"]
    first = shapes(tmp_path, [{"n": 100}, {"n": 300, "fail": "slow"}])
    proc = subprocess.Popen([*argv, first], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (markers / "slow-started").exists():  # `double` has finished n=300 by then
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, raw = proc.communicate(timeout=120)
    err = raw.decode()
    assert proc.returncode == 130, err
    assert "interrupted after 3 of 4 tasks" in err, err
    left = '--workload triple --shapes [{"n": 300, "fail": "slow"}]'
    assert left in err and "--workload double" not in err, err
    # The advised rerun: only `triple` at n=300 (its slow marker dropped, as a user would).
    rest = shapes(tmp_path, [{"n": 300}])
    again = subprocess.run(
        [*argv, rest, "--workload", "triple"], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "sweep: 1 task, 1 record written, 0 failed" in again.stdout, again.stdout
    sites = sorted(records.read_record_file(p).site for p in cache.glob("records/*.json"))
    assert len(sites) == 4, sites  # each workload once at each shape, none tuned twice
    wrong = subprocess.run(
        [*argv, rest, "--workload", "quadruple"], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert wrong.returncode == 1, wrong.stdout
    assert "--workload quadruple:" in wrong.stderr and "declares double, triple" in wrong.stderr
