"""Running code once ``torch._dynamo`` is imported (backends layer): Dynamo traces nothing
before then, and importing it ourselves would cost every process that never compiles.

:func:`when_dynamo_loaded` runs a callback at once when Dynamo is loaded already, else right
after its module has run, through a ``sys.meta_path`` finder that finds nothing itself and
removes itself on the first import of ``torch._dynamo``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_callbacks: list[Callable[[], None]] = []  # to run once Dynamo is loaded, in order


def when_dynamo_loaded(callback: Callable[[], None]) -> None:
    """Run ``callback`` now if ``torch._dynamo`` is imported, else once it is (a callback
    given again before then runs once)."""
    if "torch._dynamo" in sys.modules:
        callback()
        return
    with _lock:
        if callback not in _callbacks:
            _callbacks.append(callback)
        if _watch not in sys.meta_path:
            sys.meta_path.insert(0, _watch)


def _loaded() -> None:
    with _lock:
        callbacks = list(_callbacks)
        _callbacks.clear()
    for callback in callbacks:
        callback()


class _DynamoWatch:
    """A ``sys.meta_path`` finder that runs the callbacks once ``torch._dynamo`` is
    imported, and otherwise finds nothing."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch._dynamo":
            return None
        _unwatch()
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _loaded()

        loader.exec_module = exec_module
        return spec


_watch = _DynamoWatch()


def _unwatch() -> None:
    try:
        sys.meta_path.remove(_watch)
    except ValueError:
        pass
