"""Record bundles on disk, for ``tunedsl cache export/import`` with or without ``--remote``
(CLI layer).

A bundle is JSON Lines: a header line ``{"tunedsl_records": 2}``, then one record per line.
Both directions stream, one record at a time, so a bundle of any size is read and written
in bounded memory. Each line is validated on its own: a damaged line (torn, not a record,
too long) is skipped with a warning naming the file and line, and the others are imported.

Bundles of the previous format (``{"tunedsl_records": 1, "records": [record, ...]}``, one
JSON document) are still read: whole, up to ``MAX_BUNDLE_BYTES``, and all or nothing (every
record is validated before any is returned).

Reading takes a regular file only (``-``: stdin), opened without following a final symbolic
link or blocking on a FIFO: ``/dev/zero`` or a FIFO is refused, and a hostile file (nested
thousands deep, too big to parse) is an error, never a crash.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from tunedsl.errors import UsageError
from tunedsl.store import atomic, paths
from tunedsl.store.records import (
    LINES_VERSION,
    MAX_BUNDLE_BYTES,
    MAX_RECORD_BYTES,
    InvalidRecord,
    Record,
    bundle_lines,
    parse_json,
)

#: Warnings printed for damaged lines of one bundle before they are only counted.
MAX_LINE_WARNINGS = 20


class BundleReader:
    """The records of the bundle ``file`` (``-``: stdin), one at a time; ``skipped``: how
    many damaged lines were skipped (each with a warning on stderr). A file that is not a
    bundle at all is a UsageError before any record is returned."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.skipped = 0

    def __iter__(self) -> Iterator[Record]:
        with _open_bundle(self.file) as (fh, size):
            first = fh.readline(MAX_RECORD_BYTES + 1)
            if _header(first) == LINES_VERSION:
                yield from self._lines(fh)
                return
            if size is not None and size > MAX_BUNDLE_BYTES:
                raise UsageError(
                    f"cannot read bundle {self.file}: {size} bytes, over the "
                    f"{MAX_BUNDLE_BYTES}-byte limit of a bundle that is not JSON Lines"
                )
            yield from _single_document(self.file, first + fh.read(MAX_BUNDLE_BYTES + 1))

    def _lines(self, fh: IO[bytes]) -> Iterator[Record]:
        for number, line in enumerate(_bounded_lines(fh), start=2):
            if line is None:
                self._skip(number, f"longer than {MAX_RECORD_BYTES} bytes")
                continue
            if not line.strip():
                continue
            try:
                yield Record.from_json(parse_json(line)).from_elsewhere()
            except (InvalidRecord, ValueError) as err:
                self._skip(number, str(err))

    def _skip(self, number: int, why: str) -> None:
        self.skipped += 1
        if self.skipped <= MAX_LINE_WARNINGS:
            print(f"tunedsl: warning: {self.file}:{number}: skipped: {why}", file=sys.stderr)
        elif self.skipped == MAX_LINE_WARNINGS + 1:
            print(f"tunedsl: warning: {self.file}: more damaged lines skipped", file=sys.stderr)


def read_bundle(file: str) -> list[Record]:
    """Every valid record of the bundle ``file`` (``-``: stdin), or a UsageError. Holds them
    all in memory: iterate a ``BundleReader`` to stream."""
    return list(BundleReader(file))


def _header(line: bytes) -> int | None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return data.get("tunedsl_records") if isinstance(data, dict) and len(data) == 1 else None


def _bounded_lines(fh: IO[bytes]) -> Iterator[bytes | None]:
    """The lines of ``fh``; None for a line over ``MAX_RECORD_BYTES`` (read past, not kept)."""
    while True:
        line = fh.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_RECORD_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = fh.readline(1 << 20)
            yield None
            continue
        yield line


def _single_document(file: str, raw: bytes) -> list[Record]:
    """A bundle of the previous format: validated whole before any record is returned."""
    try:
        if len(raw) > MAX_BUNDLE_BYTES:
            raise InvalidRecord(f"over the {MAX_BUNDLE_BYTES}-byte limit")
        data = parse_json(raw)
    except InvalidRecord as err:
        raise UsageError(f"cannot read bundle {file}: {err}") from None
    version = data.get("tunedsl_records") if isinstance(data, dict) else None
    if isinstance(version, int) and version > LINES_VERSION:
        raise UsageError(
            f"{file} is not a tunedsl records bundle this tunedsl reads: its format "
            f"{version} is newer than {LINES_VERSION}; upgrade tunedsl to import it"
        )
    if version != 1:
        raise UsageError(
            f"{file} is not a tunedsl records bundle; write one with `tunedsl cache export`"
        )
    items = data.get("records")
    if not isinstance(items, list):
        raise UsageError(f"{file}: 'records' must be a list")
    parsed = []
    for i, item in enumerate(items):
        try:
            parsed.append(Record.from_json(item).from_elsewhere())
        except ValueError as err:
            raise UsageError(f"{file}: record {i} is invalid: {err}; nothing imported") from None
    return parsed


@contextlib.contextmanager
def _open_bundle(file: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """The bundle opened for reading, and its size (None: stdin)."""
    if file == "-":
        yield sys.stdin.buffer, None
        return
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(file, flags)
    except OSError as err:
        why = "a symbolic link, not read" if err.errno == errno.ELOOP else err.strerror or err
        raise UsageError(f"cannot read bundle {file}: {why}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # before fdopen, which refuses a directory itself
        os.close(fd)
        raise UsageError(f"cannot read bundle {file}: not a regular file")
    with os.fdopen(fd, "rb", buffering=1 << 20) as fh:
        yield fh, st.st_size


def export_bundle(file: str, records: Iterable[Record]) -> int:
    """Write ``records`` as a bundle to ``file`` (``-``: stdout), streaming; a file is
    replaced whole or not at all. Returns how many were written, or a UsageError."""
    if file == "-":
        return _write_lines(sys.stdout.buffer, records)
    target = Path(file)
    if target.is_dir():
        raise UsageError(f"cannot export to {file}: it is a directory; name a file")
    if not target.parent.is_dir():
        raise UsageError(f"cannot export to {file}: no directory {target.parent}")
    why = redirected_bundle(file)
    if why is not None:
        raise UsageError(f"cannot export to {file}: {why}")
    try:
        with atomic.replacing(target) as fh:
            count = _write_lines(fh, records)
    except OSError as err:
        raise UsageError(f"cannot export to {file}: {err.strerror or err}") from None
    return count


def redirected_bundle(file: str) -> str | None:
    """Why another user could have the bundle ``file`` land in a place of theirs, where they
    could replace it before it is imported (its directory theirs, or reached through a link
    of theirs), or None. A link planted at ``file`` itself is replaced by the bundle, never
    followed."""
    why = paths.redirected_destination(Path(os.path.abspath(file)).parent)
    if why is None:
        return None
    return (
        f"another user could redirect or replace it ({why}); name a file in a directory of your own"
    )


def write_bundle(file: str, records: Iterable[Record]) -> bool:
    """``export_bundle``; True when it went to a file (the caller then says so)."""
    export_bundle(file, records)
    return file != "-"


def _write_lines(fh: IO[bytes], records: Iterable[Record]) -> int:
    count = -1  # the header is a line too
    for line in bundle_lines(records):
        fh.write(line)
        count += 1
    fh.flush()
    return count
