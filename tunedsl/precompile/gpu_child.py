"""A child of ``gpu_shards.py`` (precompile layer): one process on one GPU.

    python -m tunedsl.precompile.gpu_child     # one JSON request a line on stdin

Each request is a sweep task (``{"task": ...}``: its records come back), one GPU's share
of ``precompile --tune`` (``{"tune": ...}``: its reports come back), or a warm-up before
the first task (``{"warm": {"script": ...}}``: the script imported, the GPU set up).
Answers go to the original stdout, one JSON line each; what a workload prints goes to
stderr, and what it reads from stdin is ``/dev/null`` (requests are read from the original).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _tune_share(job: dict[str, Any]) -> dict[str, Any]:
    from dataclasses import asdict

    from tunedsl.model.keys import json_safe
    from tunedsl.precompile.run import tune_claimed

    done = tune_claimed(
        job["paths"], job["claims"], workers=job["workers"], timeout_s=job["timeout_s"]
    )
    reports = [{**asdict(r), "key": json_safe(r.key)} for r in done.reports]
    return {"reports": reports, "errors": done.errors}


def _warm(job: dict[str, Any]) -> dict[str, Any]:
    """Import the sweep's script (kept for its tasks) and set up what a first tune waits
    for: the GPU's context and Triton's hash and C utilities (on threads)."""
    from tunedsl.backends import triton_key_cache
    from tunedsl.backends.triton import warm_up_tuning
    from tunedsl.precompile.sweep import imported_script

    imported_script(job["script"])
    triton_key_cache.use_stored()  # Triton's key as an earlier process kept it, if it can
    warm_up_tuning()
    return {"warm": True}


def _leave_with_parent(requests: int) -> None:
    """Never outlive the sweep, even in the middle of a task that runs for hours: a thread
    leaves when the request pipe (``requests``) has lost its last writer (the parent ended,
    or was killed and could not stop this process). The parent closes the pipe only
    between tasks."""
    import select
    import threading

    def watch() -> None:
        # A poll for no event reports only the hang-up: requests stay for the main loop.
        hangup = select.poll()
        hangup.register(requests, 0)
        while True:
            for _, event in hangup.poll():
                if event & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    os._exit(1)

    threading.Thread(target=watch, name="tunedsl-orphan-watch", daemon=True).start()


def _serve() -> int:
    """A child: run each task of stdin, answer on the original stdout (prints go to stderr)."""
    from tunedsl.precompile.sweep import Task, run_task, short_error

    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    _leave_with_parent(requests.fileno())
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # a workload's prints, even from C, must not corrupt the answers
    sys.stdout = sys.stderr
    # A workload that reads stdin reads nothing, not the next request (or waits for ever).
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.close(empty)
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            if "tune" in request:
                answer: dict[str, Any] = _tune_share(request["tune"])
            elif "warm" in request:
                answer = _warm(request["warm"])
            else:
                answer = {"records": run_task(Task(**request["task"]))}
        except Exception as err:
            answer = {"error": short_error(err)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
