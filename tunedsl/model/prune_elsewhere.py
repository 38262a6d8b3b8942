"""Data a ``prune=`` reads from a module that the running top-level code of another module
sets as it runs: a script's loop setting ``kern.LIVE = n`` for a prune in ``kern`` that
reads ``LIVE``, or ``settings.state.live = n`` for one that reads
``settings.state.live``. A decision made for one value would be reused for a call with
another (``prune_closure.check`` names it). The prune's own module's top-level code is
``prune_closure.rebound_globals_read``'s."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

from tunedsl.model.code_reads import (
    GLOBAL_OPS,
    attribute_chains,
    first_data,
    globals_loaded,
    is_data,
)
from tunedsl.model.running_frames import MAX_FRAMES
from tunedsl.warn import is_own_file


def set_elsewhere(
    prune: Any, rebound: Callable[..., Mapping[str, int]]
) -> list[tuple[str, Any, str]]:
    """The (name, value, where) of data ``prune`` reads from its module's globals, itself
    or through an object they hold, where the top-level code of another module running now
    may still set an attribute or item of the module or of an object on the way (``where``
    names that code's file, the name it sets through and a line that does)."""
    code = getattr(prune, "__code__", None)
    namespace = getattr(prune, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(namespace, dict):
        return []
    frames = _other_top_levels(namespace)
    if not frames:
        return []
    module = sys.modules.get(str(namespace.get("__name__")))
    on_the_way = [module] if module is not None and vars(module) is namespace else []
    reads = _reads(code, namespace, on_the_way)
    out = []
    for frame in frames:
        names = rebound(frame.f_code.co_filename, frame.f_lineno)
        held = {
            id(frame.f_globals[n]): n
            for n in names
            if n in frame.f_globals and not is_data(frame.f_globals[n])
        }
        for label, value, path in reads:
            through = next((held[id(o)] for o in path if id(o) in held), None)
            if through is not None:
                where = (
                    f"{frame.f_code.co_filename}, which sets it through `{through}` as it "
                    f"runs (line {names[through]})"
                )
                out.append((label, value, where))
    return out


def _reads(
    code: types.CodeType, namespace: Mapping[str, Any], module: list[Any]
) -> list[tuple[str, Any, list[Any]]]:
    """What ``code`` reads of its globals: (name, data, the objects it is read through)."""
    reads: list[tuple[str, Any, list[Any]]] = []
    objects = {}
    for name in sorted(n for n in globals_loaded(code) if n in namespace):
        if is_data(namespace[name]):
            reads.append((name, namespace[name], list(module)))
        elif not isinstance(namespace[name], types.FunctionType | type):
            objects[name] = namespace[name]
    for chain in sorted(attribute_chains(code, set(objects), GLOBAL_OPS), key=repr):
        read = first_data(chain, objects[chain[0]])
        if read is not None:
            reads.append(read)
    return reads


def _other_top_levels(namespace: Mapping[str, Any]) -> list[types.FrameType]:
    """The frames (up to ``MAX_FRAMES`` out) running the top-level code of modules other
    than the one whose globals are ``namespace``, and not tunedsl's."""
    frame = sys._getframe(2)
    found = []
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        if (
            frame.f_code.co_name == "<module>"
            and frame.f_globals is not namespace
            and not is_own_file(frame.f_code.co_filename)
        ):
            found.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return found
