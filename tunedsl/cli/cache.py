"""``tunedsl cache``: list, show, clear, export and import tuning records.

    tunedsl cache ls [--json]            every record: id, site, kernel, choice, device;
                                         also those of TUNEDSL_RECORDS_PATH (read-only)
    tunedsl cache show ID [--json]       one record (ID: a unique prefix of the digest)
    tunedsl cache clear [ID...] [--kernel NAME] [--site TEXT]
                                         remove records (all of them, and the stored
                                         kernel binaries, when nothing is named)
    tunedsl cache export FILE [ID...]    write records to one JSON bundle
    tunedsl cache import FILE            validate every record of a bundle, then add them ('-': stdin)

A bundle is ``{"tunedsl_records": 1, "records": [record, ...]}``. Import checks every
record against the schema before writing any, so a bad bundle changes nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

from tunedsl.errors import UsageError

BUNDLE_VERSION = 1


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
    clear = sub.add_parser("clear", help="remove records (all, unless some are named)")
    clear.add_argument("ids", nargs="*", metavar="ID")
    clear.add_argument("--kernel", help="only records of this kernel (qualified name)")
    clear.add_argument("--site", help="only records whose site contains this text")
    export = sub.add_parser("export", help="write records to a JSON bundle")
    export.add_argument("file", help="output file ('-' for standard output)")
    export.add_argument("ids", nargs="*", metavar="ID", help="only these records")
    imp = sub.add_parser("import", help="validate and add the records of a bundle")
    imp.add_argument("file", help="bundle written by `tunedsl cache export` ('-' for stdin)")
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
    handler = {"ls": _ls, "show": _show, "clear": _clear, "export": _export, "import": _import}
    return handler[action](args)


def _load_all(
    roots: list[Path] | None = None,
) -> tuple[list[tuple[Path, Any]], list[tuple[Path, str]]]:
    """Records of the cache (or of ``roots``), and the files that are not valid records."""
    from tunedsl.store import records

    good, bad = [], []
    for path in records.iter_record_files(roots):
        try:
            good.append((path, records.read_record_file(path)))
        except (OSError, ValueError, UnicodeDecodeError) as err:
            bad.append((path, str(err)))
    return good, bad


def _load_read_only() -> tuple[list[tuple[Path, Any]], list[tuple[Path, str]]]:
    """Records of the ``TUNEDSL_RECORDS_PATH`` directories (looked up after the cache)."""
    from tunedsl.store import records

    return _load_all(records.extra_record_dirs())


def _find(ident: str) -> tuple[Path, Any]:
    if len(ident) < 4:
        raise UsageError(f"record id {ident!r} is too short: give at least 4 hex digits")
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
        "kernel": record.kernel.get("qualname"),
        "chosen": record.chosen.to_json(),
        "device": record.device.get("name"),
        "configs": len(record.results),
        "tuning_s": record.tuning_s,
        "timestamp": record.timestamp,
        "path": str(path),
    }


def _ls(args: argparse.Namespace) -> int:
    good, bad = _load_all()
    extra_good, extra_bad = _load_read_only()
    rows = [{**_summary(r, p), "read_only": False, "shadowed": False} for p, r in good]
    # Run time looks in the cache first, then the extra directories in order: a digest
    # seen earlier shadows the later copies.
    seen = {r.digest for _, r in good}
    for path, record in extra_good:
        rows.append(
            {**_summary(record, path), "read_only": True, "shadowed": record.digest in seen}
        )
        seen.add(record.digest)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print("no tuning records")
    for row in rows:
        when = datetime.datetime.fromtimestamp(row["timestamp"]).strftime("%Y-%m-%d %H:%M")
        chosen = ", ".join(f"{k}={v}" for k, v in row["chosen"].items())
        where = ""
        if row["read_only"]:
            where = f"  (read-only: {Path(row['path']).parent}"
            where += ", shadowed by an earlier record)" if row["shadowed"] else ")"
        print(
            f"{row['id']}  {when}  {row['site']}  {row['kernel']}  [{chosen}]  "
            f"{row['device']}{where}"
        )
    for path, why in [*bad, *extra_bad]:
        print(f"invalid: {path}: {why}", file=sys.stderr)
    return 0


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
    print(f"record {record.id} ({path})")
    print(f"  site:    {record.site}")
    print(f"  kernel:  {record.kernel.get('qualname')} ({record.kernel.get('file')})")
    print(f"  key:     {json.dumps(record.key)}")
    print(f"  device:  {record.device.get('name')} ({record.device.get('type')})")
    print(f"  versions: {json.dumps(record.versions)}")
    print(f"  tuned in {record.tuning_s:.2f} s, effort {record.effort}")
    print(f"  chosen:  {record.chosen}")
    for r in sorted(record.results, key=lambda r: (r.status != "ok", r.median_ms or 0.0)):
        mark = "*" if r.config == record.chosen else " "
        if r.status == "ok":
            print(f"  {mark} {r.config!s:<50} {r.median_ms:10.4f} ms  ±{r.spread:.1%}  x{r.reps}")
        else:
            print(f"  {mark} {r.config!s:<50} {r.status}: {r.reason}")
    return 0


def _clear(args: argparse.Namespace) -> int:
    good, bad = _load_all()
    chosen = []
    for path, record in good:
        if args.ids and not any(record.digest.startswith(i.lower()) for i in args.ids):
            continue
        if args.kernel and record.kernel.get("qualname") != args.kernel:
            continue
        if args.site and args.site not in record.site:
            continue
        chosen.append(path)
    if not (args.ids or args.kernel or args.site):
        chosen.extend(p for p, _ in bad)  # clearing everything removes unreadable files too
    for path in chosen:
        path.unlink(missing_ok=True)
    print(f"removed {len(chosen)} record{'s' if len(chosen) != 1 else ''}")
    if not (args.ids or args.kernel or args.site):
        from tunedsl.store import records

        # Everything: also what killed writers left behind, however young.
        records.remove_stale_temporaries(older_than_s=0)
        _clear_binaries()
    return 0


def _clear_binaries() -> None:
    """Stored kernel binaries (``tunedsl/backends/triton_binaries.py``): a later process
    compiles and stores them again."""
    import shutil

    from tunedsl.backends.triton_binaries import binaries_dir

    root = binaries_dir()
    if root.is_dir():
        count = sum(1 for p in root.iterdir() if not p.name.startswith("."))
        shutil.rmtree(root, ignore_errors=True)
        print(f"removed {count} stored kernel binar{'ies' if count != 1 else 'y'}")


def _export(args: argparse.Namespace) -> int:
    good, _ = _load_all()
    picked = [
        r for _, r in good if not args.ids or any(r.digest.startswith(i.lower()) for i in args.ids)
    ]
    bundle = {"tunedsl_records": BUNDLE_VERSION, "records": [r.to_json() for r in picked]}
    text = json.dumps(bundle, indent=1) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
    else:
        Path(args.file).write_text(text, encoding="utf-8")
        print(f"exported {len(picked)} record{'s' if len(picked) != 1 else ''} to {args.file}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from tunedsl.store import paths, records

    try:
        if args.file == "-":
            data = json.loads(sys.stdin.buffer.read().decode("utf-8"))
        else:
            data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        # RecursionError: a hostile bundle nested thousands deep (found by tests/reliability).
        raise UsageError(f"cannot read bundle {args.file}: {err}") from None
    if not isinstance(data, dict) or data.get("tunedsl_records") != BUNDLE_VERSION:
        raise UsageError(
            f"{args.file} is not a tunedsl records bundle (version {BUNDLE_VERSION}); "
            "write one with `tunedsl cache export`"
        )
    items = data.get("records")
    if not isinstance(items, list):
        raise UsageError(f"{args.file}: 'records' must be a list")
    parsed = []
    for i, item in enumerate(items):
        try:
            parsed.append(records.Record.from_json(item))
        except ValueError as err:
            raise UsageError(
                f"{args.file}: record {i} is invalid: {err}; nothing imported"
            ) from None
    root = paths.ensure_private_dir(paths.records_dir())
    for record in parsed:
        records.write_json_atomic(records.record_path(record.digest, root), record.to_json())
    print(f"imported {len(parsed)} record{'s' if len(parsed) != 1 else ''}")
    return 0
