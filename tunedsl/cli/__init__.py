"""The ``tunedsl`` command: a thin argparse front over library functions.

Each subcommand lives in its own module ``tunedsl.cli.<name>`` exposing
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``main(args) -> int``; modules are
imported only when their command runs, so ``tunedsl --help`` stays fast and torch-free.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Sequence

# command name -> module; help text comes from each module's add_parser.
COMMANDS: dict[str, str] = {
    "run": "tunedsl.cli.run",
    "expand": "tunedsl.cli.expand",
    "precompile": "tunedsl.cli.precompile",
    "cache": "tunedsl.cli.cache",
    "gallery": "tunedsl.cli.gallery",
    "sweep": "tunedsl.cli.sweep",
    "rules": "tunedsl.cli.rules",
    "lint": "tunedsl.cli.lint",
    "env": "tunedsl.cli.env",
}


def build_parser() -> argparse.ArgumentParser:
    from tunedsl import __version__

    parser = argparse.ArgumentParser(
        prog="tunedsl", description="Autotune Triton kernels with a macro DSL."
    )
    parser.add_argument("--version", action="version", version=f"tunedsl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue  # command not built yet
        sub_parser = mod.add_parser(sub)
        sub_parser.set_defaults(_main=mod.main)
    return parser


def entry() -> int:
    """The ``tunedsl`` command and ``python -m tunedsl``: :func:`main` on the command line,
    its status noted for the compile pool's exit drain, which must leave with ``os._exit``
    where a compile that ran past its limit still runs (``backends/compile_pool.py``)."""
    status = _main(None, command=True)
    if "tunedsl.backends.compile_pool" in sys.modules:  # no compile ran without it
        from tunedsl.backends.compile_pool import note_exit_status

        note_exit_status(status)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """A ``tunedsl`` command (``argv``: its arguments) called in a process that goes on, its
    exit status returned: the process is left as the command found it (``run`` puts back
    ``sys.argv``, ``sys.modules["__main__"]`` and ``sys.path``, as ``runpy.run_path`` does;
    the caller's warnings keep their file and line)."""
    return _main(argv, command=False)


def _main(argv: Sequence[str] | None, command: bool) -> int:
    """``command``: the process is the ``tunedsl`` command itself (:func:`entry`), whose
    ``sys.argv[0]`` is the launcher and which ends with the command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # `tunedsl run SCRIPT ARGS...` hands everything after SCRIPT to the script untouched.
    if argv[:1] == ["run"]:
        from tunedsl.cli import run

        return run.main_argv(argv[1:], restore=not command)
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_main", None) is None:
        parser.print_help()
        return 2
    with _warnings_without_launcher(command):
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    from tunedsl.errors import Terminated, TunedslError

    try:
        return int(args._main(args) or 0)
    except BrokenPipeError:
        # The reader went away (`tunedsl expand x.py | head`): stop quietly, as `cat` does.
        # Point stdout at /dev/null so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except TunedslError as err:
        print(f"tunedsl: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:
        if isinstance(err, Terminated):  # SIGTERM, stopped as Ctrl-C stops (a sweep)
            print("tunedsl: terminated (SIGTERM)", file=sys.stderr)
            return 143
        print("tunedsl: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _warnings_without_launcher(command: bool) -> Iterator[None]:
    """Within, for the command itself: a warning a command raises itself (an untrusted
    directory on TUNEDSL_RECORDS_PATH) points at the nearest frame outside tunedsl: the
    `tunedsl` launcher's own line, or runpy's under `python -m tunedsl`, which say nothing to
    the user. Those show no place; one from a script the command runs (precompile, sweep)
    keeps the script's line. After, the formatter is the one before. Called in a process of
    the caller's (:func:`main`), whose ``sys.argv[0]`` is its own program: left alone."""
    import warnings

    if not command:
        yield
        return
    shown = warnings.formatwarning
    launcher = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""

    def formatted(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if filename.startswith("<frozen runpy") or os.path.realpath(filename) == launcher:
            return f"tunedsl: {category.__name__}: {message}\n"
        return shown(message, category, filename, lineno, line)

    warnings.formatwarning = formatted
    try:
        yield
    finally:
        if warnings.formatwarning is formatted:  # (one set meanwhile by others: theirs)
            warnings.formatwarning = shown
