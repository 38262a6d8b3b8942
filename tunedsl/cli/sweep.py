"""``tunedsl sweep``: tune a script's workloads over many shapes, on Ray or in this process.

    tunedsl sweep SCRIPT [--shapes FILE] [--ray ADDRESS] [--gpus-per-task 1]
                  [--actors N] [--bundle FILE] [--no-ray] [--gpus N]

See ``tunedsl/precompile/sweep.py`` and docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tunedsl.errors import UsageError

if TYPE_CHECKING:
    from tunedsl.precompile.sweep_tasks import Outcome


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sweep", help="tune a script's workloads over many shapes (on Ray when installed)"
    )
    parser.add_argument("script", help="a script declaring @tunedsl.workload functions")
    parser.add_argument(
        "--shapes",
        metavar="FILE",
        help="a JSON file holding a list of objects: the keyword arguments of each workload call",
    )
    parser.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help="sweep only this @tunedsl.workload (repeat for several; default: every one)",
    )
    parser.add_argument("--ray", metavar="ADDRESS", help="a Ray cluster (default: local Ray)")
    parser.add_argument("--no-ray", action="store_true", help="run the tasks in this process")
    parser.add_argument(
        "--gpus-per-task", type=float, default=1.0, help="GPUs per Ray actor (0: CPU actors)"
    )
    parser.add_argument("--actors", type=int, help="number of Ray actors (default: from GPUs)")
    parser.add_argument("--bundle", help="also write every record to this bundle file")
    parser.add_argument(
        "--gpus",
        type=int,
        help="without Ray: one process per GPU, this many (default: every visible GPU)",
    )
    return parser


def main(args: argparse.Namespace) -> int:
    from tunedsl.cli.bundle import redirected_bundle
    from tunedsl.knobs import finite_number
    from tunedsl.precompile.sweep import sweep
    from tunedsl.store import atomic

    finite_number(args.gpus_per_task, "--gpus-per-task", zero_ok=True, unit=" of GPUs")
    if args.bundle is not None:  # checked now, not after the whole sweep has run
        if not args.bundle.strip():
            raise UsageError("--bundle is empty: name the file the records go to")
        if os.path.isdir(args.bundle):
            raise UsageError(f"--bundle {args.bundle}: it is a directory; name a file")
        parent = os.path.dirname(os.path.abspath(args.bundle))
        if not os.path.isdir(parent):
            raise UsageError(f"--bundle {args.bundle}: no directory {parent}; name a file in one")
        why = redirected_bundle(args.bundle)
        if why is not None:
            raise UsageError(f"--bundle {args.bundle}: {why}")
        try:
            atomic.check_replaceable(args.bundle)
        except OSError as err:
            raise UsageError(
                f"--bundle {args.bundle}: {err.strerror}, which the bundle would replace; "
                "name a regular file"
            ) from None
    from tunedsl.frontend.source import read_source, unreadable_reason

    try:
        read_source(args.script)  # a FIFO or a device is named, never waited on
    except OSError as err:
        why = unreadable_reason(args.script, err)
        raise UsageError(f"sweep: cannot open script {args.script!r}: {why}") from None
    if args.no_ray and not args.gpus:  # here, in this process: as `tunedsl run` would
        from tunedsl.autointerp import enable_if_no_gpu

        enable_if_no_gpu("tunedsl sweep")
    from tunedsl.precompile.sigterm import sigterm_as_interrupt

    with sigterm_as_interrupt():  # SIGTERM stops it as Ctrl-C does: what finished is written
        written, outcomes = sweep(
            args.script,
            args.shapes,
            ray_address=args.ray,
            use_ray=False if args.no_ray else None,
            gpus_per_task=args.gpus_per_task,
            actors=args.actors,
            bundle=args.bundle,
            gpus=args.gpus,
            workloads=args.workload,
        )
    failed = [o for o in outcomes if o.error is not None]
    for o in failed:
        print(f"failed after {o.attempts} attempts: {o.task.label()}: {o.error}", file=sys.stderr)
    for note in _idle_workloads(outcomes):
        print(note, file=sys.stderr)
    tasks, records = _count(len(outcomes), "task"), _count(len(written), "record")
    print(f"sweep: {tasks}, {records} written, {len(failed)} failed")
    return 1 if failed else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _idle_workloads(outcomes: Sequence[Outcome]) -> list[str]:
    """A note for each workload whose every task finished and tuned no key: it reached no
    site at the shapes swept (a sweep tunes every key a task meets first), as precompile
    names a workload that reached none."""
    by_workload: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        by_workload.setdefault((o.task.script, o.task.workload), []).append(o)
    return [
        f"sweep: note: workload {name} of {script} tuned no key in its {_count(len(done), 'task')}: "
        "it reached no autotune(...) or autotune_launch site (or only keys another task had "
        "tuned), so nothing of it was measured; check that the shapes (--shapes, else its "
        "defaults) call its sites"
        for (script, name), done in by_workload.items()
        if all(o.error is None and not o.records for o in done)
    ]
