"""Every file tunedsl writes or reads back, written whole or not at all (storage layer).

A writer puts the bytes in a temporary file in the target's directory (named
``.<target>.<random>.tmp``, so sweepers recognise it), flushes it to disk and
``os.replace``s it over the target: a reader sees the old file or the whole new one,
never a torn one, whatever kills the writer. A killed writer leaves only its temporary
file, which no reader takes for an entry (``paths.remove_stale_temporaries`` sweeps them).

A reader opens without following a final symbolic link and without blocking on a FIFO,
and reads only a regular file up to a size cap: a hostile path (``/dev/zero``, a link
planted in a shared directory) is an ``OSError``, never a hang or a ``MemoryError``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIX = ".tmp"


def write_bytes(
    path: Path,
    data: bytes,
    *,
    prefix: str | None = None,
    suffix: str = TEMP_SUFFIX,
    durable: bool = True,
    dir_fd: int | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically. ``durable``: fsync before the rename (the
    records and binaries; a bytecode entry is cheap to rebuild and skips it). ``dir_fd``: a
    descriptor of ``path``'s directory, checked by the caller; the file is written through
    it, so a directory swapped after the check cannot redirect the write."""
    with replacing(path, prefix=prefix, suffix=suffix, durable=durable, dir_fd=dir_fd) as fh:
        fh.write(data)


@contextlib.contextmanager
def replacing(
    path: Path,
    *,
    prefix: str | None = None,
    suffix: str = TEMP_SUFFIX,
    durable: bool = True,
    dir_fd: int | None = None,
) -> Iterator[IO[bytes]]:
    """A new temporary file beside ``path``, open for writing, renamed over ``path`` when
    the block ends without an error (``write_bytes``, and streamed writers: a bundle). An
    error or Ctrl-C at any moment, even as the temporary file is being made, removes it:
    its name is chosen before it is made, inside the clean-up's reach."""
    import secrets  # here: a read (a warm start) never needs it

    if dir_fd is None:
        check_replaceable(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    head = prefix if prefix is not None else f".{path.name}."
    tmp: str | None = None
    fd = -1
    owned = False  # the file object owns fd (and closes it): never closed twice
    try:
        while fd < 0:
            tmp = f"{head}{secrets.token_hex(6)}{suffix}"
            if dir_fd is None:
                tmp = os.path.join(path.parent, tmp)
            try:
                fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                tmp = None  # another writer's: never ours to remove
        owned = True
        with os.fdopen(fd, "wb") as fh:
            yield fh
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        assert tmp is not None  # the loop ends only once it made the file
        target = path.name if dir_fd is not None else path
        os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
    except BaseException:
        if fd >= 0 and not owned:
            os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
        raise


def check_replaceable(path: Path | str) -> None:
    """Raise OSError when ``path`` exists and is neither a regular file nor a symbolic link:
    a file written whole is renamed over its target, which would put a regular file in place
    of a FIFO or a device (``--bundle /dev/null`` run as root: /dev/null itself)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))


def write_directory(path: Path, files: Mapping[str, bytes], *, durable: bool = True) -> None:
    """Create the directory ``path`` holding ``files`` (name -> bytes) atomically: the files
    go into a temporary directory beside it, which is renamed into place (the stored kernel
    binaries: a reader sees no entry or the whole entry). Raises ``OSError`` when ``path``
    exists and is not empty (another writer stored it first: the caller decides)."""
    import secrets

    tmp: Path | None = None
    try:  # named before it is made: a Ctrl-C as it is made still removes it
        while tmp is None:
            tmp = path.parent / f".{path.name[:16]}.{secrets.token_hex(6)}{TEMP_SUFFIX}"
            try:
                os.mkdir(tmp, 0o700)
            except FileExistsError:
                tmp = None  # another writer's: never ours to remove
        for name, data in files.items():
            with open(tmp / name, "wb") as fh:
                fh.write(data)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp)


def write_json(path: Path, obj: Any, *, durable: bool = True, dir_fd: int | None = None) -> None:
    """``obj`` as indented JSON, atomically (records, bundles, results, notes)."""
    data = (json.dumps(obj, indent=1) + "\n").encode("utf-8")
    write_bytes(path, data, durable=durable, dir_fd=dir_fd)


def write_text(path: Path, text: str, *, durable: bool = True) -> None:
    write_bytes(path, text.encode("utf-8"), durable=durable)


def read_regular_file(
    path: Path | str, limit: int, *, dir_fd: int | None = None, private: bool = False
) -> bytes:
    """The bytes of ``path``, read without following a final symbolic link or blocking on a
    FIFO; OSError for anything but a regular file of at most ``limit`` bytes. ``dir_fd``: a
    checked directory's descriptor, ``path`` then a name in it. ``private``: also refuse a
    file that another user owns (root excepted) or that group or others can write, since
    another user may have written it; the file read is the file checked."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_BINARY", 0), dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW on a symbolic link
            raise Refused(errno.ELOOP, "a symbolic link, not read") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())  # what we check is what we read
        if not stat.S_ISREG(st.st_mode):
            raise Refused(errno.EINVAL, "not a regular file")
        if st.st_size > limit:
            raise Refused(errno.EFBIG, f"{st.st_size} bytes, over the {limit}-byte limit")
        if private:
            _check_private_file(st, path)
        data = fh.read(limit + 1)
    if len(data) > limit:  # grew while we read it
        raise Refused(errno.EFBIG, f"over the {limit}-byte limit")
    return data


class Refused(OSError):
    """A file ``read_regular_file`` does not read: its text is the reason alone, as the
    warnings that quote it print it (without Python's ``[Errno N]`` before it)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def _check_private_file(st: os.stat_result, path: Path | str) -> None:
    owner_ok = not hasattr(os, "getuid") or st.st_uid in (os.getuid(), 0)
    if owner_ok and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return
    if owner_ok:
        raise Refused(
            errno.EPERM, f"writable by group or others, so not trusted; fix: chmod go-w {path}"
        )
    raise Refused(
        errno.EPERM,
        f"owned by another user, {_user(st.st_uid)}, so not trusted; fix: remove it, or make "
        f"it yours (chown {_user_name(os.getuid())} {path})",
    )


def _user_name(uid: int) -> str:
    """A user's login name, or the uid where none is known."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _user(uid: int) -> str:
    """``uid 65534 (nobody)``: a file's owner as the warnings name it."""
    name = _user_name(uid)
    return f"uid {uid}" if name == str(uid) else f"uid {uid} ({name})"
