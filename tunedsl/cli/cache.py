"""``tunedsl cache``: list, show, clear, export and import tuning records.

    tunedsl cache ls [--json]            every record: id, site, location, kernel, key,
                                         choice, device; also those of
                                         TUNEDSL_RECORDS_PATH (read-only)
    tunedsl cache show ID [--json]       one record (ID: a unique prefix of the digest)
    tunedsl cache clear [ID...] [--kernel NAME] [--site TEXT]
                                         remove the records named
    tunedsl cache clear --all            remove every record and the stored kernel binaries
    tunedsl cache gc [--dry-run] [--unused-days N]
                                         remove records of another Triton or record schema,
                                         and records whose site or kernel is gone where
                                         they were tuned and unused for N (30) days
    tunedsl cache export FILE [ID...]    write records to a bundle ('-': stdout)
    tunedsl cache import FILE            validate and add the records of a bundle ('-': stdin)

``clear`` and ``gc`` remove only what tunedsl wrote: regular ``<digest>.json`` files of the
cache's own records directory (never through a symbolic link), with their lock files.

Every command streams, one record at a time, so its memory does not grow with the number
of records. A bundle is JSON Lines (``cli/bundle.py``): each line is validated on its own,
and a damaged one is skipped with a warning.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tunedsl.cli.bundle import export_bundle
from tunedsl.cli.cache_clear import clear as _clear
from tunedsl.cli.cache_clear import record_names
from tunedsl.cli.cache_gc import add_arguments as add_gc_arguments
from tunedsl.cli.cache_gc import gc as _gc
from tunedsl.cli.cache_import import import_bundle as _import
from tunedsl.cli.cache_select import check_id as _check_id
from tunedsl.cli.cache_select import terminal_text as _text
from tunedsl.errors import UsageError


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cache", help="list, show, clear, export and import tuning records"
    )
    sub = parser.add_subparsers(dest="cache_command", metavar="ACTION")
    ls = sub.add_parser("ls", help="list tuning records")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    show = sub.add_parser("show", help="show one record")
    show.add_argument("id", help="record id (a unique prefix of its digest)")
    show.add_argument("--json", action="store_true", help="print the record's JSON")
    show.add_argument(
        "--plot",
        metavar="FILE",
        type=Path,
        help="also draw every configuration's time into FILE (PNG, as the gallery does)",
    )
    clear = sub.add_parser("clear", help="remove the named records, or --all of them")
    clear.add_argument("ids", nargs="*", metavar="ID")
    clear.add_argument(
        "--all", action="store_true", help="every record (and the stored kernel binaries)"
    )
    clear.add_argument("--kernel", help="only records of this kernel (qualified name)")
    clear.add_argument("--site", help="only records whose site contains this text")
    add_gc_arguments(
        sub.add_parser(
            "gc", help="remove records no run uses any more (cli/cache_gc.py says which)"
        )
    )
    export = sub.add_parser("export", help="write records to a JSON bundle")
    export.add_argument("file", help="output file ('-' for standard output)")
    export.add_argument("ids", nargs="*", metavar="ID", help="only these records")
    imp = sub.add_parser("import", help="validate and add the records of a bundle")
    imp.add_argument("file", help="bundle written by `tunedsl cache export` ('-' for stdin)")
    imp.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a key's local record even where it is newer than the bundle's",
    )
    for action in (ls, show, clear, export, imp):  # the Redis store: tunedsl/cli/cache_remote.py
        action.add_argument("--remote", action="store_true", help="the Redis record store")
    parser.set_defaults(_cache_parser=parser)
    return parser


def main(args: argparse.Namespace) -> int:
    action = getattr(args, "cache_command", None)
    if action is None:
        args._cache_parser.print_help()
        return 2
    if getattr(args, "remote", False):
        from tunedsl.cli import cache_remote

        return cache_remote.main(args)
    handler = {
        "ls": _ls,
        "show": _show,
        "clear": _clear,
        "gc": _gc,
        "export": _export,
        "import": _import,
    }
    return handler[action](args)


def _iter_all(roots: list[Path] | None = None) -> Iterator[tuple[Path, Any, str]]:
    """Each record file of the cache (or of ``roots``) in name order, one at a time:
    ``(path, record, "")``, or ``(path, None, why)`` for a file that is not a valid record."""
    from tunedsl.store import records

    for path in records.iter_record_files(roots):
        try:
            yield path, records.read_record_file(path), ""
        except (OSError, ValueError) as err:
            yield path, None, str(err)


def _load_all(
    roots: list[Path] | None = None,
) -> tuple[list[tuple[Path, Any]], list[tuple[Path, str]]]:
    """Records of the cache (or of ``roots``), and the files that are not valid records."""
    good, bad = [], []
    for path, record, why in _iter_all(roots):
        if record is None:
            bad.append((path, why))
        else:
            good.append((path, record))
    return good, bad


def _load_read_only() -> tuple[list[tuple[Path, Any]], list[tuple[Path, str]]]:
    """Records of the ``TUNEDSL_RECORDS_PATH`` directories (looked up after the cache)."""
    from tunedsl.store import records

    return _load_all(records.extra_record_dirs())


def _find(ident: str) -> tuple[Path, Any]:
    _check_id(ident)
    good, _ = _load_all()
    if not any(r.digest.startswith(ident.lower()) for _, r in good):
        good = _load_read_only()[0]
    hits = [(p, r) for p, r in good if r.digest.startswith(ident.lower())]
    if not hits:
        raise UsageError(f"no tuning record with id {ident!r}; `tunedsl cache ls` lists them")
    if len(hits) > 1:
        raise UsageError(
            f"record id {ident!r} is ambiguous ({len(hits)} records): give more digits"
        )
    return hits[0]


def _summary(record: Any, path: Path) -> dict[str, Any]:
    return {
        "id": record.id,
        "digest": record.digest,
        "site": record.site,
        "location": _location(record),
        "kernel": record.kernel.get("qualname"),
        "key": record.key,
        "chosen": record.chosen.to_json(),
        "device": record.device.get("name"),
        "configs": len(record.results),
        "tuning_s": record.tuning_s,
        "timestamp": record.timestamp,
        "path": str(path),
    }


def _location(record: Any) -> str:
    """Where the site is, with a 1-based column. Records of tunedsl 0.1 have none; their
    site id was ``file:line:col`` with a 0-based column, shown here 1-based."""
    if record.location:
        return str(record.location)
    head, sep, col = record.site.rpartition(":")
    line = head.rpartition(":")[2]
    if sep and col.isdigit() and line.isdigit():
        return f"{head}:{int(col) + 1}"
    return ""


def _key_text(key: Any) -> str:
    # Whole: two keys of one site may differ only at the end (a value prune= reads).
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


LS_HEADER = "ID  TUNED  SITE (LOCATION)  KERNEL  key KEY  [CHOICE]  DEVICE"


def _ls(args: argparse.Namespace) -> int:
    """Streamed: the cache's records one at a time, then the read-only ones."""
    from tunedsl.runtime.space_records import stated

    extra_good, extra_bad = _load_read_only()
    # As run time decides: the cache's record, unless the first shipped record of the same
    # digest is newer; every later shipped copy is shadowed. A key keeps one record per
    # space: a record of another space shadows none (run time takes its space's own).
    first_shipped: dict[tuple[str, str | None], float] = {}
    for _, record in extra_good:
        first_shipped.setdefault((record.digest, stated(record)), record.timestamp)
    mine: dict[tuple[str, str | None], float] = {}  # the cache's, of digests shipped too
    bad: list[tuple[Path, str]] = []
    out = _Rows(args.json)
    for path, record, why in _iter_all():
        if record is None:
            bad.append((path, why))
            continue
        which = (record.digest, stated(record))
        shipped = first_shipped.get(which)
        if shipped is not None:
            mine[which] = record.timestamp
        newer = shipped is not None and shipped > record.timestamp
        out.add({**_summary(record, path), "read_only": False, "shadowed": newer})
    seen: set[tuple[str, str | None]] = set()
    for path, record in extra_good:
        which = (record.digest, stated(record))
        first = which not in seen
        seen.add(which)
        ours = mine.get(which)
        shadowed = not first or (ours is not None and record.timestamp <= ours)
        out.add({**_summary(record, path), "read_only": True, "shadowed": shadowed})
    out.close()
    for path, why in [*bad, *extra_bad]:
        print(_text(f"invalid: {path}: {why}"), file=sys.stderr)
    return 0


class _Rows:
    """``cache ls`` output, one row at a time (a JSON list with ``--json``)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        if self.as_json:
            sys.stdout.write(("[\n" if self.count == 0 else ",\n") + json.dumps(row))
        else:
            sys.stdout.write((LS_HEADER + "\n" if self.count == 0 else "") + _row_text(row) + "\n")
        self.count += 1

    def close(self) -> None:
        if self.as_json:
            print("[]" if self.count == 0 else "\n]")
        elif self.count == 0:
            print("no tuning records")


def _row_text(row: dict[str, Any]) -> str:
    when = datetime.datetime.fromtimestamp(row["timestamp"]).strftime("%Y-%m-%d %H:%M")
    chosen = ", ".join(f"{k}={v}" for k, v in row["chosen"].items())
    where = ""
    if row["read_only"]:
        where = f"  (read-only: {Path(row['path']).parent}"
        where += ", shadowed by another record)" if row["shadowed"] else ")"
    elif row["shadowed"]:
        where = "  (shadowed by a newer read-only record)"
    at = f" ({row['location']})" if row["location"] and row["location"] != row["site"] else ""
    return _text(
        f"{row['id']}  {when}  {row['site']}{at}  {row['kernel']}  "
        f"key {_key_text(row['key'])}  [{chosen}]  {row['device']}{where}"
    )


def _show(args: argparse.Namespace) -> int:
    path, record = _find(args.id)
    if getattr(args, "plot", None) is not None:
        from tunedsl.gallery.plots import matplotlib_available, plot_record

        if not matplotlib_available():
            raise UsageError(
                "--plot needs matplotlib: install it with `pip install 'tunedsl[gallery]'`"
            )
        if not plot_record(record, args.plot):
            raise UsageError(f"record {record.id} has no timings to plot")
        print(f"plot: {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps(record.to_json(), indent=1))
        return 0
    print(f"record {record.id} ({_text(path)})")
    print(_text(f"  site:    {record.site}"))
    if _location(record):
        print(_text(f"  at:      {_location(record)}"))
    print(_text(f"  kernel:  {record.kernel.get('qualname')} ({record.kernel.get('file')})"))
    print(f"  key:     {json.dumps(record.key)}")
    print(_text(f"  device:  {record.device.get('name')} ({record.device.get('type')})"))
    print(f"  versions: {json.dumps(record.versions)}")
    print(f"  tuned in {record.tuning_s:.2f} s, effort {record.effort}")
    print(f"  chosen:  {record.chosen}")
    for r in sorted(record.results, key=lambda r: (r.status != "ok", r.median_ms or 0.0)):
        mark = "*" if r.config == record.chosen else " "
        if r.status == "ok":
            print(f"  {mark} {r.config!s:<50} {r.median_ms:10.4f} ms  ±{r.spread:.1%}  x{r.reps}")
        else:
            print(_text(f"  {mark} {r.config!s:<50} {r.status}: {r.reason}"))
    return 0


def _export(args: argparse.Namespace) -> int:
    """Streamed: each record is read, checked and written, one at a time."""
    from tunedsl.store import records

    ids = [_check_id(i) for i in args.ids]
    names = [p for p in record_names() if not ids or any(p.stem.startswith(i) for i in ids)]
    for ident in ids:
        if not any(p.stem.startswith(ident) for p in names):
            raise UsageError(f"no tuning record with id {ident!r}; `tunedsl cache ls` lists them")

    def picked() -> Iterator[Any]:
        for path in names:
            try:
                record = records.read_record_file(path)
            except (OSError, ValueError) as err:
                print(_text(f"tunedsl: warning: not exported: {path}: {err}"), file=sys.stderr)
                continue
            if record.digest == path.stem:
                yield record

    count = export_bundle(args.file, picked())
    if args.file != "-":
        print(f"exported {count} record{'s' if count != 1 else ''} to {args.file}")
    return 0
