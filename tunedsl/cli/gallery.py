"""``tunedsl gallery``: run every example, each in a fresh process, and write a report.

Writes ``report.md``, ``report.json``, ``plots/NAME.png``, ``results/NAME.json`` and
``logs/NAME.log`` under ``--out``. Exit status 0 only if every example ran and was correct.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from tunedsl.backends.python_child import python_argv
from tunedsl.errors import UsageError

DEFAULT_TIMEOUT_S = 900.0

_CUDA_PROBE = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gallery",
        help="run the example gallery and write a report",
        description=(
            "Run every example script (each in a fresh `tunedsl run` process), check it "
            "against PyTorch and write a report: report.md (table), report.json and one "
            "PNG per example of every configuration's time. Without a GPU the examples run "
            "through the Triton interpreter at small sizes."
        ),
    )
    parser.add_argument(
        "--examples",
        metavar="DIR",
        type=Path,
        help="directory of example scripts (default: the examples shipped with tunedsl)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=Path("gallery-report"),
        help="where to write the report (default: gallery-report)",
    )
    parser.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        default=[],
        help="run only this example (repeatable; NAME or NAME.py)",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"per-example time limit (default: {DEFAULT_TIMEOUT_S:g})",
    )
    return parser


def gpu_available() -> bool:
    """Whether the examples will find a CUDA GPU (asked in a subprocess: the CLI stays torch-free)."""
    from tunedsl import knobs

    if knobs.triton_interpret_env():
        return False
    from tunedsl.autointerp import gpu_driver_present

    if not gpu_driver_present():
        return False  # no driver: no need to start torch to learn that
    try:
        probe = subprocess.run(
            python_argv(_CUDA_PROBE),  # no import from the working directory
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def main(args: argparse.Namespace) -> int:
    from tunedsl import knobs
    from tunedsl.gallery.plots import matplotlib_available, write_plots
    from tunedsl.gallery.report import write_report
    from tunedsl.gallery.runner import default_examples_dir, discover, run_gallery, trusted
    from tunedsl.knobs import finite_number
    from tunedsl.store import paths

    finite_number(args.timeout, "--timeout", unit=" of seconds")
    # Every example's `tunedsl run` refuses a bad one: named once, before any example runs.
    knobs.quiet()
    knobs.no_auto_interpret()
    examples_dir = args.examples if args.examples is not None else default_examples_dir()
    scripts = discover(examples_dir.resolve(), args.only)
    if args.examples is not None:  # the package's own examples are as trusted as its code
        scripts, notes = trusted(scripts)
        for note in notes:
            print(f"tunedsl gallery: {note}", file=sys.stderr)
        if not scripts:
            raise UsageError(f"--examples {args.examples}: no example there can be trusted")
    out_dir: Path = args.out.resolve()
    # Logs and results are written by name in it: another user who can write there (or
    # above) could plant symbolic links that make this run overwrite files of yours.
    why = paths.redirected_destination(args.out)  # before a link of another user's is followed
    try:
        if why is None:
            paths.make_dirs(out_dir)
    except paths.UntrustedDir as err:  # nothing was made in a directory another user's
        why = str(err)
    except OSError as err:
        raise UsageError(
            f"--out {args.out}: cannot make the directory: {err.strerror or err}"
        ) from None
    why = why or paths.untrusted_output_dir(out_dir)
    if why is not None:
        raise UsageError(
            f"--out {args.out}: not private to you ({why}); another user could redirect "
            "what the gallery writes there. Name a directory of your own (it is created "
            "with mode 700), or fix this one (chown to yourself, chmod go-w)"
        )

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    interpret = not gpu_available()
    if interpret:
        say(
            "tunedsl gallery: no CUDA GPU found: running the examples through the Triton "
            "interpreter (TRITON_INTERPRET=1) at small sizes; times are not GPU speeds"
        )
    else:
        say("tunedsl gallery: CUDA GPU found: running the examples at full size")
    say(f"tunedsl gallery: {len(scripts)} example(s) from {examples_dir}, report in {out_dir}")

    runs = run_gallery(scripts, out_dir, timeout_s=args.timeout, interpret=interpret)
    if matplotlib_available():
        plots = write_plots(runs, out_dir)
    else:
        say(
            "tunedsl gallery: warning: matplotlib is not installed, so no plots were written "
            "(pip install 'tunedsl[gallery]')"
        )
        plots = {}
    report = write_report(runs, out_dir, plots)

    failed = [run for run in runs if not run.passed]
    say(f"tunedsl gallery: {len(runs) - len(failed)}/{len(runs)} passed; report: {report}")
    for run in failed:
        say(f"  {run.name}: {run.status}: {run.message} (log: {run.log_path})")
    return 1 if failed else 0
