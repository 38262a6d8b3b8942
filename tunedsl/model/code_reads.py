"""What a Python function's code reads (model layer, pure): the names its code and the code
nested in it name, the values its closure holds, and a module's attribute looked up without
side effects. Kernel identity (``backends/kernel_source.py``) and the digest of a Triton
function given as a value (``model/jit_digest.py``) both walk what a function reads."""

from __future__ import annotations

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
