"""One process per GPU (precompile layer): sweeps and ``precompile --tune`` over a host's GPUs.

``GpuChildren`` starts one child process per GPU (``CUDA_VISIBLE_DEVICES`` names its GPU,
``TUNEDSL_TUNE_DEVICES=1`` keeps each tuning on it); ``run_on_gpus`` hands them the tasks
from one shared queue: whichever child is free takes the next, so each GPU tunes different
keys and no task runs twice. A task that fails is tried once more on another GPU, then
reported with the GPU it failed on; a child that dies is started again for the next task.
The children answer on a pipe of their own (what a workload prints goes to stderr), with the
records of each task as plain JSON, validated by the caller like any record file. A sweep
starts the children (``GpuChildren``) before it imports the script itself, and each child
imports the script and sets up its GPU meanwhile, so their start overlaps the sweep's
planning.

``run.tune_on_gpus`` (``precompile --tune`` on several GPUs, through ``run_jobs``): every GPU's process calls the
workloads, and each key is tuned by the process that claims it first (``ClaimDir``: a file
created exclusively in a directory they share), so the keys spread over the GPUs as they
come, no key is tuned twice, and every record is written by the process that tuned it
(under the record's own lock, as any tuning). A key whose tune failed is reported with its
site, key and GPU.
The children run ``gpu_child.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import IO, Any

from tunedsl.backends.python_child import module_argv, path_left_out
from tunedsl.errors import UsageError

__all__ = [
    "ClaimDir",
    "GpuChildren",
    "child_env",
    "run_jobs",
    "run_on_gpus",
    "sweep_gpus",
    "visible_gpus",
]

#: The last lines of a dead child's stderr quoted in its task's error.
_TAIL_LINES = 6


def visible_gpus() -> list[str]:
    """This host's GPUs as ``CUDA_VISIBLE_DEVICES`` entries (empty without one)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:  # as CUDA reads it: the entries before the first -1
        entries = [d.strip() for d in listed.split(",")]
        entries = entries[: entries.index("-1")] if "-1" in entries else entries
        return [d for d in entries if d]
    counted = _nvidia_smi_count()
    if counted is not None:
        return [str(i) for i in range(counted)]
    try:
        import torch
    except ImportError:
        return []
    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def sweep_gpus(gpus: int | None) -> list[str] | None:
    """The GPUs a sweep without Ray shards its tasks over, or None (this process)."""
    visible = visible_gpus()
    if gpus is None:
        return visible if len(visible) > 1 else None
    if gpus == 1:
        return None
    if visible and gpus > len(visible):
        raise UsageError(f"sweep --gpus {gpus}: this host shows {len(visible)} GPUs ({visible})")
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible and hidden is not None:  # numbering GPUs here would show the ones hidden
        raise UsageError(
            f"sweep --gpus {gpus}: CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU: name "
            "the GPUs to use in it, or leave --gpus out (without a GPU, unset it to run "
            f"{gpus} processes under TRITON_INTERPRET=1)"
        )
    return visible[:gpus] if visible else [str(i) for i in range(gpus)]


def _nvidia_smi_count() -> int | None:
    """The GPUs ``nvidia-smi -L`` lists (tens of milliseconds, where importing torch to ask
    takes seconds and would delay every GPU's process), or None where it cannot tell:
    no ``nvidia-smi``, an error, or MIG instances (numbered differently by CUDA)."""
    import shutil

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        listing = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = listing.stdout.splitlines()
    if listing.returncode != 0 or any("MIG" in line for line in lines):
        return None
    return sum(line.startswith("GPU ") for line in lines)


def child_env(gpu: str) -> dict[str, str]:
    """The environment of the child that owns ``gpu``: that GPU alone, tuned on alone."""
    env = dict(os.environ)
    env.update(CUDA_VISIBLE_DEVICES=gpu, TUNEDSL_TUNE_DEVICES="1", NCCL_NVLS_ENABLE="0")
    return env


#: The fields of the answer to each request (``gpu_child.py``), and their types.
_ANSWERS: dict[str, dict[str, type]] = {
    "task": {"records": list},
    "tune": {"reports": list, "errors": list},
    "warm": {"warm": bool},
}


def _wrong_answer(line: str, request: str) -> str | None:
    """None for no line (the process died: its exit says more), or a line ``gpu_child.py``
    answers ``request`` with (a JSON object of the answer's fields, or an error); else what
    is wrong with it, to name in the task's error."""
    if not line:
        return None
    if not line.endswith("\n"):
        return "ended in the middle of its answer"
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and (
        isinstance(answer.get("error"), str)
        or all(isinstance(answer.get(k), t) for k, t in _ANSWERS[request].items())
    ):
        return None
    return f"answered with {line[:60]!r}, not its answer"


class _Child:
    """One child process on one GPU: a task in, its records (or its error) out."""

    def __init__(self, gpu: str, warm: dict[str, Any] | None = None) -> None:
        self.gpu = gpu
        self.warm = warm
        self.proc: subprocess.Popen[str] | None = None
        self.log: IO[str] | None = None
        self.warming = False  # the answer to the warm-up request is still to be read

    def start(self) -> None:
        self.log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(
            module_argv("tunedsl.precompile.gpu_child"),  # no import from the working dir
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=child_env(self.gpu),
            text=True,
        )
        self.warming = False
        if self.warm is not None:  # it warms up while the caller prepares the tasks
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(json.dumps({"warm": self.warm}) + "\n")
                self.proc.stdin.flush()
                self.warming = True
            except OSError:  # it died at once: the first task says so
                pass

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``task`` (whose one key names the answer's, ``_ANSWERS``), or an
        ``{"error": ...}`` when the process died or answered out of turn (then it is
        stopped: its answers no longer follow its requests)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        wrong, line = None, ""
        try:
            if self.warming:  # a failed warm-up is met again, and reported, by the task
                self.warming = False
                wrong = _wrong_answer(self.proc.stdout.readline(), "warm")
            if wrong is None:
                self.proc.stdin.write(json.dumps(task) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
                wrong = _wrong_answer(line, next(iter(task)))
        except (BrokenPipeError, OSError):
            line = ""
        if wrong is None and line:
            answer: dict[str, Any] = json.loads(line)
            return answer
        if wrong is not None:
            self.proc.kill()
        code = self.proc.wait()
        self.proc = None
        if wrong is not None:
            return {"error": f"the GPU {self.gpu} process {wrong} (exit code {code}){self._tail()}"}
        return {"error": f"the GPU {self.gpu} process died (exit code {code}){self._tail()}"}

    def _tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        lines = [line.rstrip() for line in self.log.read().splitlines() if line.strip()]
        return (":\n  " + "\n  ".join(lines[-_TAIL_LINES:])) if lines else ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()  # end of tasks: the child leaves
                except OSError:
                    pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


class GpuChildren:
    """One child process per GPU, started at once; with ``warm`` each first imports a
    script and sets up its GPU, while the caller still prepares the tasks
    (``gpu_child.py``). Hand them to ``run_on_gpus``; ``stop()`` ends those never used."""

    def __init__(self, gpus: Sequence[str], warm: dict[str, Any] | None = None) -> None:
        if not gpus:
            raise UsageError("no GPU to shard the work over (CUDA_VISIBLE_DEVICES is empty)")
        self.children = [_Child(gpu, warm) for gpu in gpus]
        try:
            for child in self.children:
                child.start()
        except BaseException:
            self.stop(kill=True)
            raise

    def stop(self, *, kill: bool = False) -> None:
        """End the children (``kill``: at once, not after their current request)."""
        for child in self.children:
            if kill and child.proc is not None:
                child.proc.kill()
            child.stop()


def run_on_gpus(
    tasks: Sequence[Any],
    gpus: GpuChildren,
    to_json: Callable[[Any], dict[str, Any]],
    done: Callable[[Any, list[dict[str, Any]] | None, str | None, int], None],
) -> None:
    """Run ``tasks`` on the children of ``gpus`` (one a GPU) from one shared queue;
    ``done(task, records, error, attempts)`` is called once per task, in completion order,
    from one thread at a time. A failed task is tried once more on another GPU (when there
    is one). The children have ended when it returns."""
    cond = threading.Condition()
    # (task, attempt, the GPU that failed it)
    queue: list[tuple[Any, int, str | None]] = [(t, 1, None) for t in tasks]
    running = [0]
    children = gpus.children
    stopping = threading.Event()

    def take(gpu: str) -> tuple[Any, int, str | None] | None:
        with cond:
            while not stopping.is_set():
                for n, item in enumerate(queue):
                    # a retry waits for another GPU, unless this one is all that is left
                    if item[2] != gpu or len(children) == 1 or not others_alive(gpu):
                        running[0] += 1
                        return queue.pop(n)
                if not queue and not running[0]:
                    return None
                cond.wait(0.5)
            return None

    alive = {child.gpu: True for child in children}

    def others_alive(gpu: str) -> bool:
        return any(ok for g, ok in alive.items() if g != gpu)

    def serve(child: _Child) -> None:
        try:
            while (item := take(child.gpu)) is not None:
                task, attempt, _ = item
                answer = child.run({"task": to_json(task)})
                error = answer.get("error")
                with cond:
                    running[0] -= 1
                    if error is not None and attempt == 1 and len(children) > 1:
                        queue.insert(0, (task, 2, child.gpu))  # once more, on another GPU
                    elif error is not None:
                        left = path_left_out() if "ModuleNotFoundError" in error else ""
                        error += left and f" ({left})"
                        done(task, None, f"on GPU {child.gpu}: {error}", attempt)
                    else:
                        done(task, answer["records"], None, attempt)
                    cond.notify_all()
        finally:
            with cond:
                alive[child.gpu] = False
                cond.notify_all()
            child.stop()

    threads = [threading.Thread(target=serve, args=(c,), daemon=True) for c in children]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        stopping.set()
        for child in children:
            if child.proc is not None:
                child.proc.kill()
        raise


class ClaimDir:
    """``claim(site, key)``: True for the process that claims a key first (an exclusive
    file in a directory that every GPU's process shares), and again for that process."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.mine: set[str] = set()

    def __call__(self, site: str, key: Hashable) -> bool:
        from tunedsl.model.keys import json_safe

        text = json.dumps([site, json_safe(key)], sort_keys=True, default=repr)
        name = hashlib.sha256(text.encode()).hexdigest()[:32]
        if name in self.mine:
            return True
        try:
            os.close(os.open(self.path / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return False
        self.mine.add(name)
        return True


def run_jobs(gpus: Sequence[str], job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Run ``job`` once on each of ``gpus`` (one child each, side by side); each GPU's
    answer (``{"error": ...}`` for a child that died)."""
    children = [_Child(gpu) for gpu in gpus]
    answers: dict[str, dict[str, Any]] = {}

    def serve(child: _Child) -> None:
        try:
            answers[child.gpu] = child.run(job)
        finally:
            child.stop()

    threads = [threading.Thread(target=serve, args=(c,), daemon=True) for c in children]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        for child in children:
            if child.proc is not None:
                child.proc.kill()
        raise
    return answers
