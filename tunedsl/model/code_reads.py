"""What a Python function's code reads (model layer, pure): the names its code and the code
nested in it name, the values its closure holds, and a module's attribute looked up without
side effects, and the source span of an instruction. Kernel identity (``backends/kernel_source.py``) and the digest of a Triton
function given as a value (``model/jit_digest.py``) both walk what a function reads."""

from __future__ import annotations

import dis
import types
import warnings
from typing import Any


def names_read(fn: Any) -> list[str]:
    """The names ``fn``'s code and its nested code (comprehensions, lambdas) read, sorted;
    [] for an object without code."""
    code = getattr(fn, "__code__", None)
    names: set[str] = set()
    stack = [code] if isinstance(code, types.CodeType) else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return sorted(names)


def globals_loaded(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the code nested in it (a comprehension) load."""
    names = {
        str(op.argval)
        for op in dis.get_instructions(code)
        if op.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= globals_loaded(const)
    return names


def closure_values(fn: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of each filled cell of ``fn``'s closure."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    read = []
    for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            read.append((n, cell.cell_contents))
        except ValueError:  # a cell not yet filled
            continue
    return read


def module_attribute(module: types.ModuleType, name: str) -> Any:
    """``module.name`` if it has one; a module whose lookup raises or warns (a deprecated
    or lazily imported name) gives None, quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return getattr(module, name, None)
        except Exception:
            return None


def source_span(code: types.CodeType, lasti: int | None) -> tuple[int, int, int, int] | None:
    """The user's (first line, last line, first column, last column) of the instruction at
    ``lasti`` (a call being made), or of all of ``code`` (a thunk) where ``lasti`` is None."""
    positions = getattr(code, "co_positions", None)  # Python 3.11+
    if positions is None:
        return None
    every = list(positions())
    if lasti is not None:
        every = every[lasti // 2 : lasti // 2 + 1]
    spans = [p for p in every if None not in p]
    if not spans:
        return None
    first, last = min(p[0] for p in spans), max(p[1] for p in spans)
    col = min(p[2] for p in spans if p[0] == first)
    end_col = max(p[3] for p in spans if p[1] == last)
    return first, last, col, end_col  # type: ignore[return-value]
