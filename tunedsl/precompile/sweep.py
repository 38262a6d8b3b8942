"""Offline tuning sweeps: a script's workloads over many shapes, on Ray or in this process
(sweep layer, pure Python; Ray, torch and triton only in the workers).

A **task** is one ``@tunedsl.workload`` of the script called with one shape (the keyword
arguments of one entry of the shapes file; no shapes file: each workload once, without
arguments). A task runs with its own empty records directory and no other record store (no
``TUNEDSL_RECORDS_PATH`` record or Redis decides a key for it, and it writes none to Redis), so
it measures every key it meets, and everything it tunes (one record per (site, key) it reaches)
comes back to the driver as plain JSON records, validated there like any record file; the rest
of the cache (bytecode, binaries, compile locks) is the user's, and a process imports the
script once for all its tasks, so processes tuning side by side compile each variant once and a
process loads each kernel once. Nothing is merged until every task has ended: then the records
go to this machine's record files (and the Redis store when ``TUNEDSL_REDIS_URL`` is set), and
optionally into one bundle. Ctrl-C cancels the running tasks and writes the records of the
tasks that finished (each a whole tuning), but no bundle: a bundle holds a whole sweep.

On Ray (``tunedsl[ray]``) each actor holds ``gpus_per_task`` GPUs (``num_gpus=0`` actors on a
machine without GPUs, for tests); a task that fails is retried once on another actor, then
reported. Without Ray, on a host with several GPUs (or with ``gpus``), one process per GPU
takes the tasks from one shared queue (``gpu_shards.py``): each GPU tunes different keys, a
failed task is tried once more on another GPU, then reported with the GPU it failed on.
Otherwise the tasks run one after the other in this process.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from tunedsl.errors import Terminated, TuningError, UsageError
from tunedsl.model.canonical import canonical_json
from tunedsl.precompile.shapes import check_arguments, read_shapes, tasks_left
from tunedsl.precompile.sweep_tasks import Outcome, Progress, Task
from tunedsl.store.scratch import (
    ChildScratch,
    adopt_scratch_dir,
    check_scratch,
    child_scratch_dir,
)

if TYPE_CHECKING:
    from tunedsl.precompile.gpu_shards import GpuChildren


def plan(
    script: str, shapes: Sequence[dict[str, Any]], only: Sequence[str] | None = None
) -> list[Task]:
    """One task per (workload, shape), of the workloads named in ``only`` where given; the
    script is imported here to list its workloads (the tasks this process runs use that
    import)."""
    from tunedsl.precompile.workload import registered_workloads

    try:
        module = imported_script(os.path.abspath(script))
    except SyntaxError as err:  # the script's, not tunedsl's: its place, not a traceback
        from tunedsl.frontend.source import describe_syntax_error

        render = getattr(err, "render", None)
        text = render() if callable(render) else describe_syntax_error(err, script, _bytes(script))
        raise UsageError(f"{script} does not compile:\n{text.rstrip()}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # its import raised (SystemExit too): one line, as precompile
        from tunedsl.precompile.summary import describe_error

        raise UsageError(
            f"{script}: import failed: {describe_error(err)}; the script must import without "
            "error for its workloads to be swept"
        ) from None
    workloads = registered_workloads(module.__name__)
    if not workloads:
        raise UsageError(f"{script} declares no @tunedsl.workload function to sweep")
    if only:
        names = [wl.qualname for wl in workloads]
        unknown = [name for name in only if name not in names]
        if unknown:
            raise UsageError(
                f"--workload {unknown[0]}: {script} declares no such @tunedsl.workload; it "
                f"declares {', '.join(names)}"
            )
        workloads = [wl for wl in workloads if wl.qualname in only]
    check_arguments(shapes, workloads)  # before any task: a bad entry fails every task it is in
    # A shape listed twice is one task: each process (a GPU's, a Ray actor) tuned its copy.
    distinct = {canonical_json(shape): shape for shape in shapes}.values()
    path = os.path.abspath(script)
    tasks = [Task(0, path, wl.qualname, dict(shape)) for shape in distinct for wl in workloads]
    return [Task(i, t.script, t.workload, t.shape) for i, t in enumerate(tasks)]


class WorkloadExit(Exception):
    """A task's workload called ``sys.exit``: that task failed."""


def run_task(task: Task) -> list[dict[str, Any]]:
    """Run one task with a private records directory; the records it wrote, as JSON."""
    from tunedsl.precompile.script_import import script_on_path
    from tunedsl.store import paths, records, rules, scratch

    with scratch.scratch_dir(SCRATCH_PREFIX, scratch.adopted_scratch_dir()) as tmp:
        mine = tmp / "records"
        with paths.records_kept_in(mine), rules.measuring():
            try:
                # The script's directory on sys.path while its workload runs (it may import a
                # neighbour then), and off it after: the caller's own imports find their own.
                with script_on_path(task.script):
                    workload_fn(task)(**task.shape)
            except BaseException as err:
                # What the failed task decided in memory is in no record: import afresh.
                _imported.pop(task.script, None)
                if isinstance(err, SystemExit):  # ends this task, not the sweep or its process
                    raise WorkloadExit(f"the workload called sys.exit({err.code!r})") from None
                raise
            return [
                records.read_record_file(p).to_json() for p in records.iter_record_files([mine])
            ]


#: A task's scratch directory, in the temporary directory (``scratch.scratch_dir``: one a
#: killed sweep left is removed by the user's next task).
SCRATCH_PREFIX = "tunedsl-sweep-"


#: The script modules this process imported for its tasks, by path: the tasks of one
#: script share one import, so its kernels, compiled and loaded once, serve every shape.
_imported: dict[str, tuple[tuple[int, int], ModuleType]] = {}


def workload_fn(task: Task) -> Callable[..., Any]:
    """The task's workload function, from the script imported once per process (again
    only when the file changed)."""
    from tunedsl.precompile.workload import registered_workloads

    module = imported_script(task.script)
    found = [w for w in registered_workloads(module.__name__) if w.qualname == task.workload]
    if not found:
        raise UsageError(f"{task.script}: no workload {task.workload}")
    return found[0].fn


def _bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def imported_script(script: str) -> ModuleType:
    """The script's module, imported once per process (again when the file changed)."""
    from tunedsl.precompile.workload import import_script

    stat = os.stat(script)
    kept = _imported.get(script)
    if kept is None or kept[0] != (stat.st_mtime_ns, stat.st_size):
        kept = ((stat.st_mtime_ns, stat.st_size), import_script(script))
        _imported[script] = kept
    return kept[1]


def short_error(err: BaseException) -> str:
    """One line for a failed task: the error's last line; for a tuning error, its first
    (the site and what failed), the key and the last configuration's reason."""
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    if isinstance(err, TuningError) and len(lines) > 1:
        text = f"{lines[0]}; {lines[-1].strip()}"
    if isinstance(err, TuningError) and err.key is not None:
        from tunedsl.model.keys import json_safe

        key = json.dumps(json_safe(err.key), sort_keys=True, default=repr)
        text = f"{text} (key {key[:300]})"
    return f"{type(err).__name__}: {text}"[:1000]


def run_in_process(tasks: Sequence[Task], progress: Progress) -> list[Outcome]:
    outcomes = []
    for task in tasks:
        try:
            outcome = Outcome(task, run_task(task))
        except KeyboardInterrupt:
            raise
        except Exception as err:
            outcome = Outcome(task, error=short_error(err))
        progress.update(outcome)
        outcomes.append(outcome)
    return outcomes


def run_sharded(tasks: Sequence[Task], progress: Progress, gpus: GpuChildren) -> list[Outcome]:
    """One process per GPU of ``gpus``, the tasks from one shared queue (``gpu_shards``)."""
    from dataclasses import asdict

    from tunedsl.precompile.gpu_shards import run_on_gpus

    outcomes: dict[int, Outcome] = {}

    def done(task: Task, found: list[dict[str, Any]] | None, error: str | None, n: int) -> None:
        outcomes[task.index] = Outcome(task, found or [], error, attempts=n)
        progress.update(outcomes[task.index])

    run_on_gpus(tasks, gpus, asdict, done)
    return [outcomes[t.index] for t in tasks]


def run_on_ray(
    tasks: Sequence[Task],
    progress: Progress,
    address: str | None,
    gpus_per_task: float,
    actors: int | None,
    env: dict[str, str] | None = None,
) -> list[Outcome]:
    """One actor per ``gpus_per_task`` GPUs (``actors`` of them when given, else as many as
    the cluster's GPUs allow, at least one); a failed task is retried once on another
    actor. Ctrl-C cancels everything still running."""
    from tunedsl.precompile.ray_instance import process_settings_kept, ray_instance

    # Each actor's directory, held open while it lasts: all closed once the actors are gone.
    dirs: list[ChildScratch] = []
    with process_settings_kept():  # what importing Ray and ray.init set, put back after
        import ray

        try:
            with ray_instance(ray, address, dict(env or {})) as private:
                return _run_on_ray(ray, private, dirs, tasks, progress, gpus_per_task, actors)
        finally:
            for scratch in dirs:
                scratch.remove()


def _run_on_ray(
    ray: Any,
    private: Path | None,
    dirs: list[ChildScratch],
    tasks: Sequence[Task],
    progress: Progress,
    gpus_per_task: float,
    actors: int | None,
) -> list[Outcome]:
    """``run_on_ray`` once Ray is there (``private``: the scratch directory of the sweep's
    own instance, where the actors' directories go, in ``dirs``)."""
    gpus = ray.cluster_resources().get("GPU", 0)
    if private is not None and gpus < gpus_per_task:
        # A local instance gains no GPU later: no actor could ever start.
        raise UsageError(
            f"sweep: this machine's Ray instance has {gpus:g} GPUs and each actor asks "
            f"--gpus-per-task {gpus_per_task:g}, so no actor could start: pass "
            "--gpus-per-task 0 to tune on CPU actors (Triton's interpreter), or --no-ray"
        )
    if actors is None:
        actors = max(1, int(gpus // gpus_per_task)) if gpus_per_task > 0 else 1
    worker_cls = ray.remote(num_gpus=gpus_per_task, max_restarts=0)(_Worker)
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # removed
        cwd = None
    # A local instance's actors keep their temporary files in directories made here,
    # removed when an actor dies and with the instance: a killed actor leaves none.
    if private is not None:
        dirs.extend(child_scratch_dir(private, "actor-") for _ in range(actors))
    pool = [worker_cls.remote(cwd, dirs[i].identity if dirs else None) for i in range(actors)]

    def lost(actor: int) -> None:  # what it left goes now
        if dirs:
            dirs[actor].remove()

    return _schedule(ray, pool, list(tasks), progress, lost)


class _Worker:
    """A Ray actor: runs tasks one at a time (it owns its GPU), in the sweep's working
    directory where it has one (not on its import path: ``ray_instance``), keeping its
    temporary files in ``scratch`` (path, device, inode) where given (``run_on_ray``)."""

    def __init__(self, cwd: str | None, scratch: tuple[str, int, int] | None = None) -> None:
        if scratch is not None:
            adopt_scratch_dir(scratch[0], identity=scratch[1:])
        if cwd is not None:
            try:
                os.chdir(cwd)
            except OSError:  # another machine of a cluster: no such directory there
                pass

    def run(self, task: Task) -> list[dict[str, Any]]:
        return run_task(task)


def _schedule(
    ray: Any, pool: list[Any], tasks: list[Task], progress: Progress, lost: Callable[[int], None]
) -> list[Outcome]:
    """The tasks on the actors of ``pool``; ``lost(i)`` once actor ``i`` has died."""
    idle = list(range(len(pool)))
    # (task, attempt, the actor that failed it)
    queue: list[tuple[Task, int, int | None]] = [(t, 1, None) for t in tasks]
    running: dict[Any, tuple[Task, int, int]] = {}
    outcomes: dict[int, Outcome] = {}
    try:
        while queue or running:
            while queue and idle:
                task, attempt, avoid = queue[0]
                choices = [i for i in idle if i != avoid]
                if not choices and len(pool) > 1 and running:
                    break  # a retry waits for an actor other than the one that failed it
                actor = (choices or idle)[0]
                idle.remove(actor)
                queue.pop(0)
                running[pool[actor].run.remote(task)] = (task, attempt, actor)
            if not running:
                raise UsageError("sweep: every Ray actor died; see the Ray logs")
            done, _ = ray.wait(list(running), num_returns=1)
            ref = done[0]
            task, attempt, actor = running.pop(ref)
            try:
                outcome = Outcome(task, ray.get(ref), attempts=attempt)
                idle.append(actor)
            except Exception as err:
                if not isinstance(err, ray.exceptions.RayActorError):
                    idle.append(actor)  # the task failed, the actor lives on
                else:
                    lost(actor)
                if attempt == 1:
                    queue.insert(0, (task, 2, actor))  # once more, on another actor
                    continue
                outcome = Outcome(task, error=short_error(err), attempts=attempt)
            outcomes[task.index] = outcome
            progress.update(outcome)
    except KeyboardInterrupt:
        # Ray cancels no actor task by force (a ValueError that replaced this interrupt,
        # and the finished tasks' records were lost): the running tasks end with their actors.
        for actor in pool:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # gone already: the interrupt is what the user sees
                pass
        raise
    return [outcomes[t.index] for t in tasks]


def merge(
    outcomes: Sequence[Outcome], bundle: str | None = None, kept: list[Any] | None = None
) -> list[Any]:
    """Validate every record first, then write them (local files, Redis when configured,
    and ``bundle``); a bad record stops everything before anything is written. ``kept``
    gets each record once every store has it (what an interrupted write did)."""
    from tunedsl.runtime.space_records import put_beside, stated
    from tunedsl.store.layered import LayeredStore, default_stores
    from tunedsl.store.records import Record

    parsed: dict[tuple[str, str | None], Any] = {}  # a key keeps one record per space
    for outcome in outcomes:
        for i, item in enumerate(outcome.records):
            try:
                record = Record.from_json(item)
            except ValueError as err:
                raise UsageError(
                    f"sweep task {outcome.task.label()} returned an invalid record {i}: {err}; "
                    "nothing written"
                ) from None
            parsed[record.digest, stated(record)] = record
    stores = LayeredStore(default_stores(), memory=False)
    for record in parsed.values():
        # In each store, beside a record of another space that store holds for the key, as
        # tuning puts it: a sweep of a changed space keeps the earlier one's, in the cache
        # and in the fleet's Redis alike. The local files are written before Redis is asked.
        put_beside(stores, record)
        if kept is not None:
            kept.append(record)
    if bundle is not None:  # JSON Lines, as `tunedsl cache export` writes (and import streams)
        from tunedsl.store import atomic
        from tunedsl.store.records import bundle_lines

        try:
            with atomic.replacing(Path(bundle)) as fh:  # whole or not at all
                fh.writelines(bundle_lines(parsed.values()))
        except OSError as err:
            raise UsageError(
                f"cannot write the bundle {bundle}: {err.strerror or err}; the "
                f"{len(parsed)} records are in the cache (`tunedsl cache export` writes them)"
            ) from None
    return list(parsed.values())


def sweep(
    script: str,
    shapes_file: str | None = None,
    *,
    ray_address: str | None = None,
    use_ray: bool | None = None,
    gpus_per_task: float = 1.0,
    actors: int | None = None,
    bundle: str | None = None,
    out: TextIO = sys.stderr,
    runner_env: dict[str, str] | None = None,
    gpus: int | None = None,
    workloads: Sequence[str] | None = None,
) -> tuple[list[Any], list[Outcome]]:
    """Plan, run and merge a sweep; the records written and every task's outcome.
    ``use_ray`` None: Ray when it is installed (a local instance without ``ray_address``).
    Without Ray: one process per GPU when the host has several (``gpus``: that many
    processes, the first ``gpus`` GPUs; on a host without a GPU, that many processes
    tuning under the interpreter), else this process. ``workloads``: sweep only these (by
    name), as a sweep resumed after an interrupt does. SIGTERM in the main thread, where the
    program set no handler of its own, stops it as Ctrl-C does: the finished tasks' records
    are written and ``tunedsl.Terminated`` (a ``KeyboardInterrupt``) is raised."""
    import importlib.util

    from tunedsl import knobs
    from tunedsl.precompile.gpu_shards import GpuChildren, sweep_gpus

    quiet = knobs.quiet()  # no progress lines; a bad value is named before anything runs
    shapes = read_shapes(shapes_file)
    if use_ray is False and (ray_address or actors is not None):
        what = f"--ray {ray_address}" if ray_address else f"--actors {actors}"
        raise UsageError(f"sweep: {what} runs the sweep on Ray, and --no-ray asks not to: drop one")
    if use_ray is None:
        use_ray = importlib.util.find_spec("ray") is not None
    if ray_address and not use_ray:
        raise UsageError("--ray needs Ray: pip install 'tunedsl[ray]'")
    if actors is not None and actors < 1:
        raise UsageError(f"sweep: actors={actors}: give 1 or more Ray actors (--actors N)")
    if gpus is not None and gpus < 1:
        raise UsageError(f"sweep: gpus={gpus}: give 1 or more processes (--gpus N)")
    shards = None if use_ray else sweep_gpus(gpus)
    if not use_ray:  # the tasks keep their records in scratch directories here
        check_scratch()
    from tunedsl.precompile.sigterm import sigterm_as_interrupt

    # SIGTERM (a scheduler's time limit, `kill`) stops it as Ctrl-C does: what finished is
    # written, and ``Terminated`` raised (in the main thread, where the program set no handler)
    with sigterm_as_interrupt():
        # The GPUs' processes start first: they import the script while this process plans.
        children = GpuChildren(shards, {"script": os.path.abspath(script)}) if shards else None
        try:
            tasks = plan(script, shapes, workloads)
        except BaseException:
            if children is not None:
                children.stop(kill=True)
            raise
        progress = Progress(len(tasks), out, quiet=quiet)
        try:
            if use_ray:
                ray_args = (ray_address, gpus_per_task, actors, runner_env)
                outcomes = run_on_ray(tasks, progress, *ray_args)
            elif children is not None:
                outcomes = run_sharded(tasks, progress, children)
            else:
                outcomes = run_in_process(tasks, progress)
        except KeyboardInterrupt as err:
            how = "terminated (SIGTERM)" if isinstance(err, Terminated) else ""
            _keep_finished(progress, out, how, tasks)
            raise
        return _write(outcomes, bundle, out, "while writing the records"), outcomes


def _write(outcomes: Sequence[Outcome], bundle: str | None, out: TextIO, when: str) -> list[Any]:
    """``merge``; Ctrl-C during it leaves at once, saying how many records are written."""
    kept: list[Any] = []
    try:
        return merge(outcomes, bundle, kept=kept)
    except KeyboardInterrupt:
        out.write(
            f"sweep: interrupted {when}: {len(kept)} were written, each whole; the others "
            f"may be missing from the cache or Redis{', and no bundle' if bundle else ''} "
            "(sweep their shapes again)\n"
        )
        raise


def _keep_finished(progress: Progress, out: TextIO, how: str, tasks: list[Task]) -> None:
    """An interrupted sweep writes what its finished tasks tuned (hours of measuring, each
    record a whole tuning), never a bundle; a record that does not validate writes none.
    ``how``: what stopped it, where not Ctrl-C."""
    finished = [o for o in progress.finished if o.records]
    ok = {o.task.index for o in progress.finished if o.error is None}  # need not run again
    if 0 < progress.done < progress.total and not progress.quiet and out.isatty():
        out.write("\n")  # below the progress line, not at its end
    try:
        when = "again while writing the finished tasks' records"
        written = _write(finished, None, out, when) if finished else []
    except Exception as err:  # the interrupt is what the user sees, this is its footnote
        out.write(f"sweep: interrupted; the finished tasks' records were not written: {err}\n")
        return
    out.write(
        f"sweep: {how or 'interrupted'} after {progress.done} of {progress.total} tasks; wrote the "
        f"{len(written)} records they tuned (no bundle: it holds a whole sweep)"
        f"{tasks_left([(t.workload, t.shape) for t in tasks if t.index not in ok], tasks)}\n"
    )
