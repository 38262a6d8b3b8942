"""Warn once per topic per process (foundation layer): the one warn-once of the package.

A broken cache, a damaged record or binary, an untested Triton: each is worth one warning,
not one per call. Callers name a topic (``"bad:<path>"``, ``"triton-version:3.99"``); the
first ``warn_once`` of a topic warns, later ones are silent until ``forget`` drops it (tests,
and ``bytecode.reset()`` for its own topics).
"""

from __future__ import annotations

import threading
import warnings

from tunedsl.errors import CacheWarning

_topics: set[str] = set()
_lock = threading.Lock()


def warn_once(
    topic: str, message: str, category: type[Warning] = CacheWarning, stacklevel: int = 2
) -> bool:
    """Warn ``message`` unless ``topic`` was warned about already; True when it warned.
    ``stacklevel`` counts from the caller of this function, as for ``warnings.warn``."""
    with _lock:
        if topic in _topics:
            return False
        _topics.add(topic)
    warnings.warn(message, category, stacklevel=stacklevel + 1)
    return True


def forget(prefix: str = "") -> None:
    """Warn again about the topics that start with ``prefix`` (every topic by default)."""
    with _lock:
        if not prefix:
            _topics.clear()
        else:
            _topics.difference_update([t for t in _topics if t.startswith(prefix)])
