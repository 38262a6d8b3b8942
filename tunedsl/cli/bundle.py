"""Record bundles on disk, for ``tunedsl cache export/import`` with or without ``--remote``
(CLI layer): ``{"tunedsl_records": 1, "records": [record, ...]}``.

Reading takes a regular file of bounded size only (``-``: stdin): ``/dev/zero``, a FIFO or a
huge file is refused, and a hostile one (nested thousands deep, too big to parse) is an
error. Every record is validated before any is returned, so a bad bundle adds nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tunedsl.errors import UsageError
from tunedsl.store import atomic
from tunedsl.store.records import (
    BUNDLE_VERSION,
    MAX_BUNDLE_BYTES,
    InvalidRecord,
    Record,
    parse_json,
)


def read_bundle(file: str) -> list[Record]:
    """Every record of the bundle ``file`` (``-``: stdin), validated, or a UsageError."""
    try:
        if file == "-":
            raw = sys.stdin.buffer.read(MAX_BUNDLE_BYTES + 1)
            if len(raw) > MAX_BUNDLE_BYTES:
                raise InvalidRecord(f"more than {MAX_BUNDLE_BYTES} bytes")
        else:
            raw = atomic.read_regular_file(file, limit=MAX_BUNDLE_BYTES)
        data = parse_json(raw)
    except (OSError, InvalidRecord) as err:
        raise UsageError(f"cannot read bundle {file}: {err}") from None
    if not isinstance(data, dict) or data.get("tunedsl_records") != BUNDLE_VERSION:
        raise UsageError(
            f"{file} is not a tunedsl records bundle (version {BUNDLE_VERSION}); "
            "write one with `tunedsl cache export`"
        )
    items = data.get("records")
    if not isinstance(items, list):
        raise UsageError(f"{file}: 'records' must be a list")
    parsed = []
    for i, item in enumerate(items):
        try:
            parsed.append(Record.from_json(item))
        except ValueError as err:
            raise UsageError(f"{file}: record {i} is invalid: {err}; nothing imported") from None
    return parsed


def write_bundle(file: str, records: Sequence[Record]) -> bool:
    """Write ``records`` as a bundle to ``file`` (``-``: stdout), whole or not at all; True
    when it went to a file (the caller then says so), or a UsageError saying why not."""
    bundle = {"tunedsl_records": BUNDLE_VERSION, "records": [r.to_json() for r in records]}
    text = json.dumps(bundle, indent=1) + "\n"
    if file == "-":
        sys.stdout.write(text)
        return False
    target = Path(file)
    if target.is_dir():
        raise UsageError(f"cannot export to {file}: it is a directory; name a file")
    if not target.parent.is_dir():
        raise UsageError(f"cannot export to {file}: no directory {target.parent}")
    try:
        atomic.write_text(target, text)
    except OSError as err:
        raise UsageError(f"cannot export to {file}: {err.strerror or err}") from None
    return True
