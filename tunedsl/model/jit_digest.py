"""The digest of a Triton function where it is a value of a key: an epilogue passed as a
``tl.constexpr`` argument (``ACT=leaky_relu``) or a parameter's default (``OP: tl.constexpr =
step``). As Triton's own cache key of a function, it covers the function's source and,
recursively, the Triton functions it calls by name (a global, a closure cell, or an
attribute of a module it reads: ``lib.helper``) with the ``tl.constexpr`` and ``tl.dtype``
globals each reads: a helper edited two calls down is another kernel, so a decision stored
for the old one is not reused for it.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from tunedsl.model.code_reads import closure_values, module_attribute, names_read


def function_digest(fn: Any, constant: Callable[[Any], bool]) -> str:
    """16 hex digits of ``fn``'s source and what it calls (``constant(value)``: whether a
    global it reads is a ``tl.constexpr`` or ``tl.dtype``, which is part of it)."""
    text = _source(fn)
    calls = called_parts(fn, constant)
    if calls:  # (a function that calls and reads none keeps the digest of its source alone)
        text = b"\0".join([text, *calls])
    return hashlib.sha256(text).hexdigest()[:16]


def called_parts(fn: Any, constant: Callable[[Any], bool]) -> list[bytes]:
    """What ``fn``'s digest adds to its source: each Triton function it calls, recursively,
    as ``name:`` and its source, and each ``tl.constexpr``/``tl.dtype`` global read."""
    return _calls(fn, constant, {id(fn)})


def _source(fn: Any) -> bytes:
    try:
        return inspect.getsource(fn).encode("utf-8")
    except (OSError, TypeError):  # no source file: the compiled code stands in for it
        return fn.__code__.co_code + repr(fn.__code__.co_names).encode("utf-8")


def _calls(fn: Any, constant: Callable[[Any], bool], seen: set[int]) -> list[bytes]:
    out: list[bytes] = []
    for name, value in _reads(fn):
        inner = None if isinstance(value, types.ModuleType) else getattr(value, "fn", None)
        if inspect.isfunction(inner):
            if id(inner) not in seen:
                seen.add(id(inner))
                out += [f"{name}:".encode(), _source(inner), *_calls(inner, constant, seen)]
        elif constant(value) and " at 0x" not in (text := repr(value)):
            out.append(f"{name}={text}".encode())
    return out


def _reads(fn: Any) -> list[tuple[str, Any]]:
    """The globals ``fn``'s code names (sorted), then its closure's values, then the
    attributes of those names on the modules among them (``lib.helper``)."""
    names = names_read(fn)
    scope = getattr(fn, "__globals__", {})
    found = [(n, scope[n]) for n in names if n in scope] + closure_values(fn)
    modules = [v for _, v in found if isinstance(v, types.ModuleType)]
    for module in modules:  # grows: ``pkg.lib.helper`` reaches ``lib`` through ``pkg``
        if module.__name__.split(".")[0] == "triton":
            continue  # tl.arange, tl.float16: Triton's own
        for n in names:
            value = module_attribute(module, n)
            if isinstance(value, types.ModuleType):
                if all(value is not m for m in modules):
                    modules.append(value)
            elif value is not None:
                found.append((f"{module.__name__}.{n}", value))
    return found
