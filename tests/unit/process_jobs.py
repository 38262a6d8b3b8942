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
