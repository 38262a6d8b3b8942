"""The compile limit in force (backends layer): ``TUNEDSL_CONFIG_TIMEOUT`` (default 300 s),
or the limit a caller gives its own compiles (``tunedsl precompile --timeout``).

:func:`compile_limit` sets a limit for the calls made inside it, in this thread (a context
variable: another thread's compiles keep their own limit). A stage that compiles on threads
of its own (``host_compile.HostCompiler``, a measurement worker) reads the limit where it
is made, in the caller's thread, and passes it to its compiles; a record states it
(``runtime/timeouts.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from tunedsl import knobs

__all__ = ["compile_limit", "compile_limit_s"]

_limit: ContextVar[float | None] = ContextVar("tunedsl_compile_limit", default=None)


def compile_limit_s() -> float:
    """The seconds a compile may take here: the innermost :func:`compile_limit`'s, else
    ``TUNEDSL_CONFIG_TIMEOUT``'s."""
    limit = _limit.get()
    return knobs.compile_timeout_s() if limit is None else limit


@contextlib.contextmanager
def compile_limit(seconds: float | None) -> Iterator[None]:
    """Within (this thread only), compiles are bounded by ``seconds`` (None: unchanged)."""
    if seconds is None:
        yield
        return
    token = _limit.set(float(seconds))
    try:
        yield
    finally:
        _limit.reset(token)
