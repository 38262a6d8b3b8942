"""Module-level job functions for the forked compile workers' tests (pickled by reference)."""

from __future__ import annotations

import os
import time
from typing import Any

from tunedsl.backends import compile_processes


def whoami(payload: Any) -> tuple[int, Any]:
    return os.getpid(), payload


def registered(key: int) -> str:
    return str(compile_processes.lookup(key))


def fail(message: str) -> None:
    raise ValueError(message)


def die(status: int) -> None:
    os._exit(status)


def sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def note_order(path_and_tag: tuple[str, str]) -> str:
    """Append ``tag`` to the file ``path``: the order jobs ran in, across processes."""
    path, tag = path_and_tag
    with open(path, "a") as fh:
        fh.write(tag + "\n")
    return tag


def note_after(path_tag_seconds: tuple[str, str, float]) -> str:
    """Sleep, then append ``tag`` to ``path``: a compile that takes a while."""
    path, tag, seconds = path_tag_seconds
    time.sleep(seconds)
    return note_order((path, tag))


def _refuse_to_load() -> None:
    raise ValueError("this result cannot be loaded here")


class _Unloadable:
    def __reduce__(self) -> tuple[Any, ...]:
        return (_refuse_to_load, ())


def unloadable(_: Any) -> _Unloadable:
    """A result the worker pickles and the parent cannot unpickle."""
    return _Unloadable()
