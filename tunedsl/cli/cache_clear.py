"""``tunedsl cache clear`` (CLI layer): which records a command names, and removing them.

``cache_select.clear_selection`` checks what ``clear`` was asked to remove, for the cache and
for ``--remote`` alike: removing everything takes ``--all``. Only what tunedsl wrote is removed:
regular ``<digest>.json`` files of the cache's own records directory (never through a
symbolic link), with their lock files, and, with ``--all``, the stored kernel binaries of a
real ``binaries/`` directory of this user, the verdicts of a real ``stopped/`` directory
(``backends/stopped_compiles.py``), the stored Triton key (``backends/triton_key_cache.py``) and the in-flight files (``store/inflight.py``) of
processes that have ended; the counts printed are what was removed. A
selection (ids, ``--kernel``, ``--site``) that matches no record says so and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from tunedsl.cli.cache_select import clear_selection, no_match, selection_text
from tunedsl.errors import UsageError


def clear(args: argparse.Namespace) -> int:
    from tunedsl.store import paths, records

    ids, everything = clear_selection(args)
    root = paths.records_dir()
    if os.path.lexists(root) and not paths.is_private_dir(root):
        raise UsageError(
            f"{root} is not a private directory of this user (a symbolic link, another "
            "owner, or writable by others); not removing anything in it"
        )
    removed = 0
    for digest in _clear_candidates(args, ids, everything):
        removed += records.remove_record_files(digest)
    shipped = _shipped_matches(args, ids, everything)
    missed = no_match(args, removed)
    if missed and shipped:  # `cache ls` lists them: say why they stay, and where
        missed = f": none in the cache matches {selection_text(args)}; " + _shipped_note(shipped)
    print(f"removed {removed} record{'s' if removed != 1 else ''}" + missed)
    if shipped and not missed:
        print("kept " + _shipped_note(shipped, kept=True))
    if everything:
        # Everything: also what killed writers left behind, however young.
        records.remove_stale_temporaries(older_than_s=0)
        _clear_binaries()
        _clear_stopped_compiles()
        _clear_triton_key()
        from tunedsl.store import inflight

        ended = inflight.remove_dead()  # a live tuning's is kept: it holds its lock
        if ended:
            print(f"removed {ended} in-flight file{'s' if ended != 1 else ''} of ended processes")
    return 1 if missed else 0  # a selection that matched nothing fails, as `show ID` does


def _clear_candidates(args: argparse.Namespace, ids: list[str], everything: bool) -> Iterator[str]:
    """The digests ``clear`` removes, one at a time. Everything, or ids alone, is decided by
    the file names (every ``<digest>.json``, unreadable ones too, is read by no one); a
    --kernel or --site filter reads each record."""
    from tunedsl.store import records

    if everything or (args.kernel is None and args.site is None):
        for path in record_names():
            if everything or any(path.stem.startswith(i) for i in ids):
                yield path.stem
        return
    for path in records.iter_record_files():
        if _selected(path, args, ids):
            yield path.stem


def _selected(path: Path, args: argparse.Namespace, ids: list[str]) -> bool:
    """Whether the record file ``path`` is one ``clear`` names (by its name, for ids alone;
    else by its content: --kernel, --site)."""
    from tunedsl.store import records

    if args.kernel is None and args.site is None:
        return any(path.stem.startswith(i) for i in ids)
    try:
        record = records.read_record_file(path)
    except (OSError, ValueError):
        return False
    if record.digest != path.stem:
        return False
    if ids and not any(record.digest.startswith(i) for i in ids):
        return False
    if args.kernel is not None and record.kernel.get("qualname") != args.kernel:
        return False
    return args.site is None or args.site in record.site


def _shipped_matches(args: argparse.Namespace, ids: list[str], everything: bool) -> dict[Path, int]:
    """How many records of each ``TUNEDSL_RECORDS_PATH`` directory ``clear`` names: listed
    by ``cache ls``, read-only, never removed."""
    from tunedsl.store import records

    counts: dict[Path, int] = {}
    for root in records.extra_record_dirs():
        for path in records.iter_record_files([root]):
            if everything or _selected(path, args, ids):
                counts[root] = counts.get(root, 0) + 1
    return counts


def _shipped_note(counts: dict[Path, int], kept: bool = False) -> str:
    """The shipped records a selection matched, where they are, and how to stop using them."""
    total = sum(counts.values())
    where = " and ".join(f"{d} ({n})" if len(counts) > 1 else str(d) for d, n in counts.items())
    what = f"{total} record{'s' if total != 1 else ''} that match{'es' if total == 1 else ''}"
    it = "it" if total == 1 else "them"
    dirs = "ies" if len(counts) > 1 else "y"
    fix = (
        f"`cache clear` removes the cache's records only: remove {it} from "
        f"th{'ose' if len(counts) > 1 else 'at'} director{dirs}, or take the director{dirs} "
        "off TUNEDSL_RECORDS_PATH"
    )
    if kept:
        return f"{what}, shipped, read-only, in {where} (TUNEDSL_RECORDS_PATH): {fix}"
    are = "is" if total == 1 else "are"
    return f"{what} {are} shipped, read-only, in {where} (TUNEDSL_RECORDS_PATH), and {fix}"


def record_names() -> list[Path]:
    """The cache's ``<digest>.json`` files, by name (nothing read), in name order."""
    from tunedsl.store import paths, records

    root = paths.records_dir()
    if not paths.is_private_dir(root):
        return []
    return [root / n for n in sorted(os.listdir(root)) if records.is_record_name(n)]


def _is_binary_entry(name: str) -> bool:
    """A stored binary's directory (``<sha256 hex>``), or the temporary directory a killed
    writer left for one (``.<its first 16 hex>.<random>.tmp``: ``store/atomic.py``)."""
    from tunedsl.store.atomic import TEMP_SUFFIX

    hex_digits = set("0123456789abcdef")
    if len(name) == 64 and set(name) <= hex_digits:
        return True
    head = name[1:].partition(".")[0]
    return (
        name[:1] == "."
        and name.endswith(TEMP_SUFFIX)
        and len(head) == 16
        and set(head) <= hex_digits
    )


def _clear_binaries() -> None:
    """Stored kernel binaries (``tunedsl/backends/triton_binaries.py``): a later process
    compiles and stores them again."""
    from tunedsl.store import paths

    root = paths.binaries_dir()
    if not os.path.lexists(root):
        return
    if not paths.is_private_dir(root):
        print(
            f"not removing stored kernel binaries: {root} is not a private directory of "
            "this user (a symbolic link, another owner, or writable by others)"
        )
        return
    removed = failed = 0
    for entry in sorted(os.listdir(root)):
        path = root / entry
        # Only what tunedsl writes there: TUNEDSL_CACHE_DIR may name a directory of the
        # user's own, whose binaries/ holds other files.
        if not _is_binary_entry(entry) or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            shutil.rmtree(path)
        except OSError:
            failed += 1
            continue
        removed += not entry.startswith(".")  # temporaries of killed writers are not counted
    print(f"removed {removed} stored kernel binar{'ies' if removed != 1 else 'y'}")
    if failed:
        print(f"could not remove {failed} entr{'ies' if failed != 1 else 'y'} of {root}")


def _clear_stopped_compiles() -> None:
    """Verdicts on compiles stopped over a GPU's shared memory: a later process stops them
    in a compile worker again. Only ``<sha256 hex>.json`` files and their temporaries."""
    from tunedsl.store import paths
    from tunedsl.store.atomic import TEMP_SUFFIX

    root = paths.stopped_compiles_dir()
    if not os.path.lexists(root) or not paths.is_private_dir(root):
        return
    hex_digits = set("0123456789abcdef")
    removed = 0
    for name in os.listdir(root):
        stem = name[1:].split(".json.")[0] if name.endswith(TEMP_SUFFIX) else name[:-5]
        if not (
            name.endswith((".json", TEMP_SUFFIX)) and len(stem) == 64 and set(stem) <= hex_digits
        ):
            continue
        try:
            os.unlink(root / name)
        except OSError:
            continue
        removed += not name.startswith(".")
    if removed:
        print(
            f"removed {removed} verdict{'s' if removed != 1 else ''} on compiles over shared memory"
        )


def _clear_triton_key() -> None:
    """Triton's stored key: a later process hashes Triton again."""
    from tunedsl.store import paths

    root = paths.cache_root()
    stored = root / "triton_key.json"
    if not paths.is_private_dir(root) or stored.is_symlink() or not stored.is_file():
        return
    with contextlib.suppress(OSError):
        stored.unlink()
        print("removed the stored Triton key")
