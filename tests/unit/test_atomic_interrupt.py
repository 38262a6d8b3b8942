"""A Ctrl-C that lands just as a writer has made its temporary file leaves no temporary file
behind: ``store/atomic`` (records, bytecode entries, rules, ``cache import``, stored binaries) and
the bundle ``cache export`` writes. The interrupt is raised the moment ``os.open`` returns, before its
descriptor or name reaches the writer: the window a real Ctrl-C of ``cache import`` hit in
about half of its runs (real files, a real ``KeyboardInterrupt``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tunedsl.store import atomic


@contextmanager
def interrupted_after_open(made_by: object = os.open) -> Iterator[list[int]]:
    """Raise KeyboardInterrupt as the block's first call of ``made_by`` (``os.open``,
    ``os.mkdir``) returns: the file or directory made, its name not yet returned."""
    fired: list[int] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "c_return" and arg is made_by:
            sys.setprofile(None)
            fired.append(1)
            raise KeyboardInterrupt

    sys.setprofile(profile)
    try:
        yield fired
    finally:
        sys.setprofile(None)


def _export(directory: Path, dir_fd: int) -> None:
    from tunedsl.cli.bundle import export_bundle

    export_bundle(str(directory / "bundle.jsonl"), [])


# Each writer, given the directory and a descriptor of it (opened before the interrupt is armed).
WRITERS: dict[str, Callable[[Path, int], None]] = {
    "write_bytes": lambda d, fd: atomic.write_bytes(d / "entry.json", b"{}"),
    "write_bytes through a directory descriptor": lambda d, fd: atomic.write_bytes(
        d / "entry.json", b"{}", dir_fd=fd
    ),
    "write_json": lambda d, fd: atomic.write_json(d / "entry.json", {"a": 1}),
    "cache export's bundle": _export,
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_ctrl_c_as_the_temporary_file_is_made_leaves_nothing(tmp_path: Path, writer: str) -> None:
    write = WRITERS[writer]
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with interrupted_after_open() as fired, pytest.raises(KeyboardInterrupt):
            write(tmp_path, dir_fd)
        assert fired == [1]
        assert sorted(os.listdir(tmp_path)) == []
        write(tmp_path, dir_fd)  # and the next write goes through
    finally:
        os.close(dir_fd)
    assert len(os.listdir(tmp_path)) == 1


def test_ctrl_c_as_a_binaries_entrys_temporary_directory_is_made_leaves_nothing(
    tmp_path: Path,
) -> None:
    entry = tmp_path / ("ab" * 32)
    with interrupted_after_open(os.mkdir) as fired, pytest.raises(KeyboardInterrupt):
        atomic.write_directory(entry, {"k.cubin": b"\x00"})
    assert fired == [1]
    assert sorted(os.listdir(tmp_path)) == []
    atomic.write_directory(entry, {"k.cubin": b"\x00"})
    assert sorted(os.listdir(tmp_path)) == [entry.name]
