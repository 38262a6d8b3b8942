"""Values worked out from the process environment, kept until a variable changes.

A snapshot of ``os.environ`` is compared with the environment (one dict comparison) instead
of reading each variable again; ``per_environ`` keeps a function's value under one. Within a
scope of one thread (``environ_checks``: a miss's decision), a snapshot found equal to the
environment is not compared again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TypeVar

_T = TypeVar("_T")


def environ_snapshot() -> object:
    """The process environment as it is now, for ``environ_unchanged`` (None where the
    platform's ``os.environ`` keeps no plain mapping: then it never compares unchanged).
    Equal snapshots are one object: one comparison answers for all (``environ_checks``)."""
    global _latest
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and _latest != data:
        _latest = dict(data)
    return _latest if isinstance(data, dict) else None


def environ_unchanged(snapshot: object) -> bool:
    """Whether no variable was set, changed or removed since ``snapshot`` was taken: what
    is worked out from the environment then (knobs, Triton's cache-invalidating variables)
    still holds, at the cost of one dict comparison instead of reading each variable."""
    if snapshot is not None and snapshot is _scope.same:
        return True
    data = getattr(os.environ, "_data", None)
    if snapshot is None or not isinstance(data, dict) or data != snapshot:
        return False
    _scope.same = snapshot if _scope.open else None
    return True


def environ_checks(open_: bool) -> None:
    """Open (True) or close a scope of this thread (a miss's decision) in which a snapshot
    found equal to the environment is not compared again: a change reaches the next scope."""
    _scope.open, _scope.same = open_, None


class _Scope(threading.local):
    open = False
    same: object = None  # the snapshot found equal to the environment in the open scope


_scope = _Scope()
_latest: dict[bytes, bytes] | None = None


def per_environ(fn: Callable[[], _T]) -> Callable[[], _T]:
    """``fn`` (no arguments, a function of the environment only) worked out again only when
    the environment changed since its last result."""
    last: tuple[object, _T] | None = None

    def cached() -> _T:
        nonlocal last
        memo = last  # one read: another thread may replace it
        if memo is not None and environ_unchanged(memo[0]):
            return memo[1]
        snapshot = environ_snapshot()
        value = fn()
        last = (snapshot, value)
        return value

    cached.__doc__ = fn.__doc__
    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached


def unknown_settings(
    known: Collection[str], prefix: str = "TUNEDSL_"
) -> list[tuple[str, str | None]]:
    """The variables of the environment named ``prefix...`` that are none of ``known``, each
    with the known name it most likely misspells (None where none is close)."""
    import difflib

    return [
        (name, next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.85)), None))
        for name in sorted(os.environ)
        if name.startswith(prefix) and name not in known
    ]


@contextlib.contextmanager
def environ_set(values: Mapping[str, str | None]) -> Iterator[None]:
    """Within: each variable of ``values`` set (None: removed); after, each as it was."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        _set(values)
        yield
    finally:
        _set(saved)


def _set(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
