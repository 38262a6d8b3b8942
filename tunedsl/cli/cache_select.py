"""What ``tunedsl cache`` accepts, and how it prints a record's text: shared by the local
commands (``cli/cache.py``) and ``--remote`` (``cli/cache_remote.py``), so both check the
same way and escape the same way."""

from __future__ import annotations

import argparse
from typing import Any

from tunedsl.errors import UsageError

MIN_ID = 4


def check_id(ident: str) -> str:
    """A record id as the CLI accepts it: at least MIN_ID hex digits (lower-cased)."""
    low = ident.lower()
    if len(low) < MIN_ID or any(c not in "0123456789abcdef" for c in low):
        raise UsageError(
            f"record id {ident!r} is "
            + ("too short" if len(low) < MIN_ID else "not a record id")
            + f": give at least {MIN_ID} hex digits "
            "of a digest, as `tunedsl cache ls` prints"
        )
    return low


_CONTROL = {i: f"\\x{i:02x}" for i in (*range(32), 127)} | {
    i: f"\\x{i:02x}" for i in range(128, 160)
}


def terminal_text(value: Any) -> str:
    """A record's text for a terminal: control characters escaped (a record could carry
    escape sequences that rewrite the screen)."""
    return str(value).translate(_CONTROL)


def clear_selection(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The checked ids of ``cache clear`` and whether it clears everything (``--all``),
    for the local records and ``--remote`` alike; a UsageError for an empty filter, a bad
    id, no selection at all, or ``--all`` beside a filter."""
    for name, value in (("--kernel", args.kernel), ("--site", args.site)):
        if value is not None and not value.strip():
            raise UsageError(
                f"cache clear {name} with an empty value would match every record; "
                "to remove everything, run `tunedsl cache clear --all`"
            )
    ids = [check_id(i) for i in args.ids]
    named = bool(ids) or args.kernel is not None or args.site is not None
    if args.all and named:
        raise UsageError(
            "cache clear --all removes every record: give it no ID, --kernel or --site"
        )
    if not (args.all or named):
        raise UsageError(
            "cache clear needs the records to remove: IDs (as `tunedsl cache ls` prints), "
            "--kernel NAME, --site TEXT, or --all for every record"
        )
    return ids, bool(args.all)


def no_match(args: argparse.Namespace, removed: int, where: str = "") -> str:
    """What ``cache clear`` adds when its selection matched nothing (a misspelt id, kernel
    or site), "" otherwise; ``where``: the listing's option (``" --remote"``)."""
    if removed or args.all:
        return ""
    return f": none matches {selection_text(args)} (`tunedsl cache ls{where}` lists the records)"


def selection_text(args: argparse.Namespace) -> str:
    """What ``cache clear`` was asked to remove, as typed: ``abab, --site 'model.py'``."""
    asked = [*args.ids, *(f"--{n} {v!r}" for n in ("kernel", "site") if (v := getattr(args, n)))]
    return ", ".join(asked)
