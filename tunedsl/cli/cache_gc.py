"""``tunedsl cache gc`` (CLI layer): remove the records no run can use any more.

A record written by another Triton (or record schema) is never found by this install (its
digest holds the version): it goes. A run finds every other record by its site's identity
(``model/identity.py``: the file's path from its package root, its function, its kernel),
never by where the file was when the record was tuned, so a record whose stored file is
gone, or no longer has the site's function or kernel, may still be in use: the project was
moved, or the records were imported from a machine where it lives elsewhere, or another
copy of the project still has the function. Such a record goes only once it has also not
been used for ``--unused-days`` days (default 30). Its use is its file's modification time:
written, imported, or found by a run (``store/records.py``, ``MARK_USED_EVERY_S``). gc reads
files and runs no code from them.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import Any

from tunedsl.cli.cache_select import terminal_text as _text

#: How long a record whose stored location says it is gone is kept after its last use.
UNUSED_DAYS = 30
_DAY_S = 86400.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed")
    parser.add_argument(
        "--unused-days",
        type=_days,
        default=UNUSED_DAYS,
        metavar="N",
        help="a record whose file or function is gone where it was tuned goes only once "
        f"unused for N days (default {UNUSED_DAYS}): runs find records wherever the "
        "project lives",
    )


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = -1
    if days < 0:
        raise argparse.ArgumentTypeError(f"not a whole number of days (0 or more): {text!r}")
    return days


def gc(args: argparse.Namespace) -> int:
    from tunedsl.store import records

    unused_days = getattr(args, "unused_days", UNUSED_DAYS)
    triton = _installed_triton()
    now = time.time()
    removed = kept = in_use = 0
    verb = "would remove" if args.dry_run else "removing"
    for path in records.iter_record_files():
        try:
            record = records.read_record_file(path)
            idle_days = (now - os.lstat(path).st_mtime) / _DAY_S
        except (OSError, ValueError):
            continue  # `cache ls` names the files that are not records
        why, final = _gone(record, triton)
        if why and not final and idle_days < unused_days:
            in_use += 1
            kept += 1
            print(_text(f"keeping {_row(record)}: {why}, but the record was {_used(idle_days)}"))
            continue
        if not why:
            kept += 1
            continue
        if not final:
            why += f", and the record was not used for {int(idle_days)} days"
        print(_text(f"{verb} {_row(record)}: {why}"))
        removed += 1
        if not args.dry_run:
            records.remove_record_files(record.digest)
    done = "would remove" if args.dry_run else "removed"
    summary = f"{done} {removed} record{'s' if removed != 1 else ''}, kept {kept}"
    if in_use:
        summary += (
            f" ({in_use} in use though its file or function is gone where it was tuned: runs "
            "find records by site identity wherever the project lives, moved or imported; "
            f"such a record goes once unused for {unused_days} days, now with --unused-days 0)"
        )
    print(summary)
    return 0


def _row(record: Any) -> str:
    return f"{record.id}  {record.site}  {record.kernel.get('qualname')}"


def _used(idle_days: float) -> str:
    days = int(max(idle_days, 0.0))
    when = "today" if days == 0 else "1 day ago" if days == 1 else f"{days} days ago"
    return f"used {when} (found by a run, written or imported)"


def _installed_triton() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def _gone(record: Any, triton: str | None) -> tuple[str, bool]:
    """Why ``record`` may no longer be used here ("" when nothing says so), and whether that
    is final: no run of this install can find it (another Triton). Otherwise it is only what
    the record's stored location shows, and a run may still find the record elsewhere.

    An edited kernel's records are kept: their ``source_hash`` covers what only importing
    the kernel's module (running it) shows, called functions and globals included, and gc
    runs no code."""
    versions = record.versions
    if triton is not None and versions.get("triton") not in (None, triton):
        return f"written by Triton {versions.get('triton')}, this is Triton {triton}", True
    kernel_file = record.kernel.get("file")
    qualname = str(record.kernel.get("qualname") or "")
    if isinstance(kernel_file, str) and os.path.isabs(kernel_file):
        text = _read_text(kernel_file)
        if text is None:
            return f"its kernel's file {kernel_file} is gone", False
        if qualname and f"def {qualname.rpartition('.')[2]}(" not in text:
            return f"its kernel {qualname} is no longer in {kernel_file}", False
    where = record.location.rsplit(":", 2)[0] if record.location else ""
    if where and os.path.isabs(where):
        text = _read_text(where)
        if text is None:
            return f"its site's file {where} is gone", False
        parts = record.site.split(":")
        if len(parts) >= 3:  # the default identity: file:scope:kernel[#n]
            scope, kernel_text = parts[-2], parts[-1].partition("#")[0]
            name = scope.rpartition(".")[2]
            if scope != "<module>" and not re.search(rf"\b(def|class) {re.escape(name)}\b", text):
                return f"its function {scope} is no longer in {where}", False
            if kernel_text and kernel_text not in text:
                return f"its site no longer launches {kernel_text} in {where}", False
    return "", False


def _read_text(path: str) -> str | None:
    from tunedsl.store import atomic

    try:
        return atomic.read_regular_file(path, limit=64 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
