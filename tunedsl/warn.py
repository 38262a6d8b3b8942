"""Warn once per topic per process (foundation layer): the one warn-once of the package.

A broken cache, a damaged record or binary, an untested Triton: each is worth one warning,
not one per call. Callers name a topic (``"bad:<path>"``, ``"triton-version:3.99"``); the
first ``warn_once`` of a topic warns, later ones are silent until ``forget`` drops it (tests,
and ``bytecode.reset()`` for its own topics).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import warnings
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Literal

from tunedsl.errors import CacheWarning

_topics: set[str] = set()
_lock = threading.Lock()


def warn_once(
    topic: str,
    message: str,
    category: type[Warning] = CacheWarning,
    stacklevel: int | Literal["user"] = 2,
) -> bool:
    """Warn ``message`` unless ``topic`` was warned about already; True when it warned.
    ``stacklevel`` counts from the caller of this function, as for ``warnings.warn``;
    ``"user"`` points the warning at the user's line that led to it (the nearest frame
    outside tunedsl), however deep inside tunedsl it is raised."""
    with _lock:
        if topic in _topics:
            return False
        _topics.add(topic)
    place = getattr(_place, "at", None) if stacklevel == "user" else None
    if place is not None:  # code torch.compile made: no frame of the user's is at the site
        warn_at(message, category, *place)
        return True
    level = user_stacklevel(sys._getframe(1)) if stacklevel == "user" else stacklevel
    warnings.warn(message, category, stacklevel=level + 1)
    return True


_place = threading.local()  # .at: (filename, line) the user's line is, where no frame says it


def warnings_at(place: tuple[str, int] | None) -> tuple[str, int] | None:
    """Point this thread's ``stacklevel="user"`` warnings at ``place``, the user's file and
    line (a site called from a compiled graph, whose frames name no line of the user's), or
    back at the stack with None; returns the place in force before."""
    before: tuple[str, int] | None = getattr(_place, "at", None)
    _place.at = place
    return before


def warn_at(message: str, category: type[Warning], filename: str, line: int) -> None:
    """Warn ``message`` at ``filename``'s ``line`` rather than at a frame of the stack."""
    # The module whose file it is gives the filters and the registry its name and dict.
    module = next(
        (m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == filename), None
    )
    if module is None:  # a file no imported module has (a notebook cell, an exec'd script)
        # Leave ``module=`` out: an explicit ``None`` makes CPython drop the warning unseen.
        warnings.warn_explicit(message, category, filename, line)
        return
    globs = vars(module)
    warnings.warn_explicit(
        message,
        category,
        filename,
        line,
        module=globs.get("__name__"),
        registry=globs.setdefault("__warningregistry__", {}),
        module_globals=globs,
    )


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_EXAMPLES = os.path.join(_PACKAGE, "examples") + os.sep  # shipped examples are user code
_PLUMBING = {os.path.abspath(contextlib.__file__), os.path.abspath(threading.__file__)}


def is_own_file(filename: str) -> bool:
    """Is ``filename`` tunedsl's own code (the shipped examples are user code)?"""
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE) and not path.startswith(_EXAMPLES)


def is_internal(filename: str) -> bool:
    """Is ``filename`` tunedsl's own code, or plumbing between it and the user's code (the
    shipped examples are user code)? PyTorch's own frames and the code ``torch.compile``
    generates are plumbing too: a site inside a compiled model is the user's model."""
    if filename.startswith(("<frozen ", "<eval_with_key>")):
        return True
    path = os.path.abspath(filename)
    return is_own_file(path) or path in _PLUMBING or path.startswith(_torch_dir())


def without_frames(
    tb: TracebackType | None, drop: Callable[[str], bool] = is_internal
) -> TracebackType | None:
    """The traceback chain with the frames of the files ``drop`` names unlinked (``tb_next``
    is writable): what a user's error shows of it."""
    kept: list[TracebackType] = []
    while tb is not None:
        if not drop(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    for earlier, later in itertools.pairwise(kept):
        earlier.tb_next = later
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def _torch_dir() -> str:
    """PyTorch's package directory once it is imported (never imported here), else a
    prefix no path has."""
    torch = sys.modules.get("torch")
    where = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.abspath(where)) + os.sep if where else "\0"


def user_stacklevel(frame: FrameType | None) -> int:
    """The ``stacklevel`` of the nearest frame outside tunedsl (and the standard library's
    ``contextlib`` and ``threading``, which a ``with`` or a thread puts between, and
    PyTorch's, which ``torch.compile`` and custom operators put between), counted
    from ``frame`` as 1; the outermost frame's when every frame is internal."""
    level = 1
    while frame is not None:
        if not is_internal(frame.f_code.co_filename) or frame.f_back is None:
            return level
        frame = frame.f_back
        level += 1
    return level


def forget(prefix: str = "") -> None:
    """Warn again about the topics that start with ``prefix`` (every topic by default)."""
    with _lock:
        if not prefix:
            _topics.clear()
        else:
            _topics.difference_update([t for t in _topics if t.startswith(prefix)])
