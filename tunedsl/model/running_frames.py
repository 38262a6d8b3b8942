"""Which frames run now, as the prune checks need them: the user's code that called the
site, the function whose lines hold a code object (a call still in progress made it), the
top-level code running a namespace; and whether a caller's call binds a method's ``self``.
Frames are looked for at most ``MAX_FRAMES`` out."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from tunedsl.warn import is_own_file

#: How far up the stack a prune's defining function is looked for.
MAX_FRAMES = 200


def user_frame() -> types.FrameType | None:
    """The innermost running frame outside tunedsl: the code that called the site."""
    frame = sys._getframe(1)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if not is_own_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def running_frame(code: types.CodeType) -> types.FrameType | None:
    """The frame of a function (not a module or class body) whose lines hold ``code``'s
    first line, in its file, running now: ``code`` was made by a call still in progress."""
    return enclosing(code, lambda outer: bool(outer.co_flags & FUNCTION_FLAGS))


def enclosing(
    code: types.CodeType, kind: Callable[[types.CodeType], bool]
) -> types.FrameType | None:
    """The innermost running frame (up to ``MAX_FRAMES`` out) of ``kind``, in ``code``'s
    file, whose lines hold ``code``'s first line."""
    frame = sys._getframe(2)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        outer = frame.f_code
        if (
            outer is not code
            and outer.co_filename == code.co_filename
            and kind(outer)
            and spans(outer, code.co_firstlineno)
        ):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def line_of(frame: types.FrameType, code: types.CodeType, line: int) -> str:
    """``line`` of the code ``frame`` runs, named with its file where that is not ``code``'s
    (a later notebook cell rebinding what an earlier cell's function reads)."""
    filename = frame.f_code.co_filename
    return f"line {line}" if filename == code.co_filename else f"{filename}, line {line}"


def top_level_running(namespace: Any) -> types.FrameType | None:
    """The innermost frame (up to ``MAX_FRAMES`` out) running top-level code whose globals
    are ``namespace``: the script's own, or a notebook's cell (every cell of a session
    shares one namespace, so a later cell's loop rebinds what an earlier cell's function
    reads)."""
    frame = sys._getframe(2)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


# A function's code has CO_NEWLOCALS; a module's and a class body's do not.
FUNCTION_FLAGS = 0x0002


def spans(outer: types.CodeType, line: int) -> bool:
    lines = [n for _, _, n in outer.co_lines() if n is not None]
    return bool(lines) and min(outer.co_firstlineno, *lines) <= line <= max(lines)


def bound_arguments(
    form: tuple[str, ...] | None, caller: types.FrameType, code: types.CodeType
) -> int | None:
    """How many of the method ``code``'s first parameters the caller's call binds before its
    positional arguments (1: ``obj.m(x, p)``, ``super().m(x, p)``, a classmethod; 0:
    ``Cls.m(obj, x, p)``), or None where the call does not show it (then only its keywords
    are read). The called object is looked up statically in the caller's names, never run."""
    if form is None:
        return None
    if form[0] == "super":
        return 1
    names = {**caller.f_builtins, **caller.f_globals, **caller.f_locals}
    if form[0] == "name":
        called = names.get(form[1])
        if inspect.ismethod(called) and called.__func__.__code__ is code:
            return 1
        return 0 if getattr(called, "__code__", None) is code else None
    if form[1] not in names:
        return None
    owner = names[form[1]]
    try:
        found = inspect.getattr_static(owner, form[2])
    except AttributeError:
        return None
    if isinstance(found, classmethod | staticmethod):
        bound = int(isinstance(found, classmethod))
        return bound if getattr(found.__func__, "__code__", None) is code else None
    if getattr(found, "__code__", None) is not code:
        return None
    return 0 if isinstance(owner, type) else 1
