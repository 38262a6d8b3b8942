"""``tunedsl cache import``: a bundle's records into this user's cache, one at a time.

Each record is validated on its own (``cli/bundle.py``) and written whole. A key whose
record here was measured after the bundle's keeps it (``--overwrite`` replaces it). A key
keeps one record per space (``runtime/space_records.py``): a bundle's record of another
space than the one here goes beside it, under its space's own digest, as tuning would have
put it, so neither hides the other.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tunedsl.cli.bundle import BundleReader
from tunedsl.errors import UsageError
from tunedsl.runtime.space_records import stored_beside


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a file holding exactly ``data``."""
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def import_bundle(args: argparse.Namespace) -> int:
    """Streamed: each record of the bundle is validated and written, one at a time; a
    damaged line of the bundle is skipped with a warning."""
    from tunedsl.store import atomic, paths, records

    reader = BundleReader(args.file)
    root = paths.records_dir()
    try:  # checked from the cache root down, and nothing made in a directory not trusted
        os.close(paths.open_or_make_private_dir(root))
    except paths.UntrustedDir as why:
        raise UsageError(
            f"{root} is not a private directory of this user ({why}); nothing imported; "
            "set TUNEDSL_CACHE_DIR to a directory of your own"
        ) from None
    except OSError as err:
        raise UsageError(
            f"cannot make the records directory {root}: {err.strerror or err}; nothing "
            "imported; set TUNEDSL_CACHE_DIR to a directory you can write"
        ) from None
    count = kept = 0
    in_flight: tuple[Path, bytes, int] | None = None
    written: dict[str, float] = {}  # a key listed twice (bundles joined): its newest line
    try:
        for record in reader:
            here = _read(records.record_path(record.digest, root))
            placed = stored_beside(record, here)
            if placed is not record:  # another space's record is here: beside it
                record, here = placed, _read(records.record_path(placed.digest, root))
            path = records.record_path(record.digest, root)
            if written.get(record.digest, record.timestamp) > record.timestamp:
                continue
            if (
                record.digest not in written
                and not getattr(args, "overwrite", False)
                and _newer(here, record)
            ):
                kept += 1  # this user's own later tuning of the key is not thrown away
                continue
            # Not flushed one by one (a bundle of 10^5 records would wait on 10^5 flushes):
            # the directory is flushed once at the end, and a record torn by a crash
            # before that is a miss, never a wrong choice (every load validates it).
            data = (json.dumps(record.to_json(), separators=(",", ":")) + "\n").encode()
            in_flight = (path, data, count)  # a Ctrl-C may land after the rename, before +1
            try:
                atomic.write_bytes(path, data, durable=False)
            except OSError as err:  # a full disk, say: each record written is whole
                raise UsageError(
                    f"cannot write records to {root}: {err.strerror or err}; imported "
                    f"{count} of the bundle's records before it; free space there, or set "
                    "TUNEDSL_CACHE_DIR to a directory you can write, and import again"
                ) from None
            count += 1
            written[record.digest] = record.timestamp
    except KeyboardInterrupt:
        if in_flight is not None and in_flight[2] == count and _holds(*in_flight[:2]):
            count += 1  # the record being written when Ctrl-C came is whole on disk
        print(
            f"cache import: interrupted after importing {count} of the bundle's records into "
            f"{root}, each whole; import the bundle again for the rest (its records already "
            "here are written again, or kept where newer)",
            file=sys.stderr,
        )
        raise
    finally:
        if count:
            os.sync()
    skipped = f"; skipped {reader.skipped} damaged line{'s' if reader.skipped != 1 else ''}"
    newer = (
        f"; kept {kept} local record{'s' if kept != 1 else ''} newer than the bundle's "
        "(--overwrite replaces them)"
    )
    print(
        f"imported {count} record{'s' if count != 1 else ''}"
        + (skipped if reader.skipped else "")
        + (newer if kept else "")
    )
    return 0


def _read(path: Path) -> Any:
    """The valid record of this user at ``path``; None for none, or a damaged or foreign
    file (replaced, as any miss would be)."""
    from tunedsl.store import records

    try:
        return records.read_record_file(path)
    except (OSError, ValueError):
        return None


def _newer(here: Any, incoming: Any) -> bool:
    """Whether the cache already holds a record of the key measured after ``incoming`` was:
    an older bundle does not replace it."""
    return (
        here is not None and here.digest == incoming.digest and here.timestamp > incoming.timestamp
    )
