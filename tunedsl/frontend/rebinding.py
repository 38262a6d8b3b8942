"""Names a module's top-level code rebinds as it runs, read from its source.

At a script's or a notebook cell's top level the variables are the module's globals; a
function made there (a ``prune=`` lambda) that reads one the code rebinds (a loop's
variable) sees a value that changes from call to call. The runtime asks this module which
names those are: a ``for`` loop's target or a name bound in a loop's body, a name given an
augmented assignment (``+=``), or a name bound by two statements of one block. A module
constant, and a name bound once in each branch of an ``if`` or ``try``, are not.
"""

from __future__ import annotations

import ast
import linecache

from tunedsl.frontend.compile import expand_to_ast

__all__ = ["rebound_at_top_level"]

# filename -> (the linecache lines the answer was made from, the answer)
_SEEN: dict[str, tuple[list[str], dict[str, int]]] = {}


def rebound_at_top_level(filename: str) -> dict[str, int]:
    """The names the top-level code of the module in ``filename`` rebinds, each with a line
    that rebinds it. Empty where the source is not to be had or does not parse."""
    lines = linecache.getlines(filename)
    seen = _SEEN.get(filename)
    if seen is not None and seen[0] is lines:
        return seen[1]
    found: dict[str, int] = {}
    try:
        tree = expand_to_ast("".join(lines), filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the DSL's errors too
        tree = ast.Module(body=[], type_ignores=[])
    _scan_block(tree.body, in_loop=False, found=found)
    _SEEN[filename] = (lines, found)
    return found


def _scan_block(block: list[ast.stmt], in_loop: bool, found: dict[str, int]) -> None:
    """Adds to ``found`` the names ``block`` rebinds (``in_loop``: the block repeats)."""
    seen: set[str] = set()
    for stmt in block:
        bound = _bound_by(stmt)
        for name, line in bound.items():
            if in_loop or name in seen or isinstance(stmt, ast.AugAssign):
                found.setdefault(name, line)
        seen |= bound.keys()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # their bodies are scopes of their own
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            for name, line in _names_stored(stmt.target).items():
                found.setdefault(name, line)
        for inner, repeats in _blocks_of(stmt):
            _scan_block(inner, in_loop or repeats, found)


def _blocks_of(stmt: ast.stmt) -> list[tuple[list[ast.stmt], bool]]:
    """The statement blocks ``stmt`` holds, each with whether it runs repeatedly."""
    loop = isinstance(stmt, (ast.For, ast.AsyncFor, ast.While))
    out = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block:
            out.append((block, loop and field == "body"))
    for part in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
        out.append((part.body, False))
    return out


def _bound_by(stmt: ast.stmt) -> dict[str, int]:
    """The names one statement binds in its own scope (not in the blocks it holds)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name: stmt.lineno}
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0]: stmt.lineno for a in stmt.names}
    else:
        targets = []
    out: dict[str, int] = {}
    for target in targets:
        out.update(_names_stored(target))
    return out


def _names_stored(target: ast.expr) -> dict[str, int]:
    return {
        n.id: n.lineno
        for n in ast.walk(target)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
