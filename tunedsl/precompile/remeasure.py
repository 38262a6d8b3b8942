"""Measuring a script's keys again for rules (``tunedsl rules build`` and ``rules check``).

A rule is built from records; measuring a key needs its call, which only the script's
workloads can make. So both commands run the workloads of ``--script`` over ``--shapes``
(``precompile/sweep.py``'s tasks, in this process), each task in a private empty cache with
no ``TUNEDSL_RECORDS_PATH`` (no record or rule decides for it), tuning on and the
exhaustive search: every configuration of the site's space is timed on each key a task
reaches, on this machine's device, by the tuner a miss uses. Tasks run in order until the
caller has what it needs or the time budget is spent (a task started is finished). The
variables of ``TASK_ENV`` are the process's while the tasks run: the ``tunedsl rules``
commands measure in a process of their own, with no other thread calling sites.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedsl.environ import environ_set

#: The environment of a measuring task (None: unset).
TASK_ENV: Mapping[str, str | None] = {
    "TUNEDSL_RECORDS_PATH": None,
    "TUNEDSL_AUTOTUNE": "on",
    "TUNEDSL_SEARCH": "exhaustive",
    "TUNEDSL_FORCE_RETUNE": None,
}


def cannot_measure(device: Mapping[str, Any]) -> str | None:
    """Why keys cannot be measured here (None: they can). ``device``: ``device_facts()``."""
    if device.get("type") in (None, "cpu"):
        return (
            "this machine has no GPU and TRITON_INTERPRET is not set (set TRITON_INTERPRET=1 "
            "to measure under Triton's interpreter)"
        )
    return None


@dataclass
class Measured:
    """What the tasks measured: their records, the tasks run and left, and failures."""

    records: list[Any] = field(default_factory=list)
    ran: int = 0
    left: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def measure(
    script: str,
    shapes: Sequence[dict[str, Any]],
    budget_s: float,
    enough: Callable[[list[Any]], bool] = lambda _: False,
    only: Sequence[str] | None = None,
) -> Measured:
    """Run the workloads of ``script`` (those named in ``only``, where given) over
    ``shapes`` and return every record they tuned, until ``enough(records)`` or
    ``budget_s`` seconds have passed."""
    from tunedsl.precompile.sweep import plan, run_task
    from tunedsl.store.records import Record
    from tunedsl.store.scratch import check_scratch

    check_scratch()  # each task keeps its records in a scratch directory
    tasks = plan(script, shapes, only)
    out = Measured()
    start = time.monotonic()
    with environ_set(TASK_ENV):
        for i, task in enumerate(tasks):
            if enough(out.records) or time.monotonic() - start >= budget_s:
                out.left = len(tasks) - i
                break
            try:
                out.records += [Record.from_json(r) for r in run_task(task)]
            except Exception as err:  # one shape failing does not end the measuring
                out.failures.append(f"{task.label()}: {type(err).__name__}: {err}")
            out.ran += 1
    out.seconds = time.monotonic() - start
    return out
