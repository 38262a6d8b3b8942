"""``tunedsl expand SCRIPT``: print the Python a DSL script expands to (Julia's @macroexpand).

``--check`` only validates, any number of scripts (as a pre-commit hook passes them): exit 0
when each expands and compiles, 1 with each error rendered (file:line:col, the line, a caret,
a hint) when one does not, 2 when one cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DESCRIPTION = (
    "Print the plain Python that a DSL script expands to, or with --check only validate it. "
    "SCRIPT may be - to read standard input."
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "expand", help="print the expanded Python of a DSL script", description=DESCRIPTION
    )
    parser.add_argument("script", metavar="SCRIPT", nargs="+", help="the DSL script (- for stdin)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that each SCRIPT expands and compiles (exit 0) or show the errors "
        "(exit 1)",
    )
    return parser


def _read(script: str, check: bool) -> tuple[bytes, str] | None:
    if script == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    from tunedsl.frontend.source import read_source, unreadable_reason

    path = os.path.abspath(script)
    try:
        return read_source(path), path  # a FIFO or a device is refused, never waited on
    except OSError as err:
        command = "tunedsl expand --check" if check else ""  # printing takes one SCRIPT
        reason = unreadable_reason(script, err, "- to read standard input", command)
        print(f"tunedsl expand: error: cannot open {script!r}: {reason}", file=sys.stderr)
        return None


def main(args: argparse.Namespace) -> int:
    if not args.check and len(args.script) > 1:
        print(
            "tunedsl expand: error: it prints one expanded module: give one SCRIPT, or "
            "--check to validate several",
            file=sys.stderr,
        )
        return 2
    status = 0
    for script in args.script:
        status = max(status, _expand(script, args.check))
    return status


def _expand(script: str, check: bool) -> int:
    from tunedsl.errors import TunedslSyntaxError
    from tunedsl.frontend.compile import compile_source, expand_source
    from tunedsl.frontend.source import describe_syntax_error

    read = _read(script, check)
    if read is None:
        return 2
    source, filename = read
    try:
        if check:
            compile_source(source, filename)
        else:
            text = expand_source(source, filename)
    except TunedslSyntaxError as err:
        print(err.render(), file=sys.stderr)
        return 1
    except SyntaxError as err:  # plain Python syntax errors, NUL bytes
        print(describe_syntax_error(err, filename, source), end="", file=sys.stderr)
        return 1
    if check:
        print(f"{script}: ok", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
