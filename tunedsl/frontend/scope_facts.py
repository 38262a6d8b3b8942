"""Facts about one function's own code that the front end's checks share: its nodes (not
those of the functions and classes inside it), and the locals it binds to one literal."""

from __future__ import annotations

import ast
from typing import Any


def own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope``'s own code, not those of the functions and classes in it."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def constant_locals(scope: ast.AST) -> set[str]:
    """The locals of the function ``scope`` that hold one literal value on every call: no
    parameter, every binding an assignment of that same literal (``low = 64``), so a prune
    made from one is fixed for the process. Any other binding of the name (a branch giving
    another value, a loop, ``+=``, unpacking, ``nonlocal`` in an inner function) leaves it
    out."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    values: dict[str, list[Any]] = {}
    covered: set[int] = set()
    unknown = object()
    for node in own_nodes(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    covered.add(id(target))
                    values.setdefault(target.id, []).append(_literal(node.value, unknown))
    for node in ast.walk(scope):  # every other binding, inner functions' `nonlocal` too
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            if id(node) not in covered:
                values.setdefault(node.id, []).append(unknown)
        elif isinstance(
            node, (ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.ExceptHandler)
        ):
            names = getattr(node, "names", None) or [getattr(node, "name", None)]
            for name in names:
                name = getattr(name, "asname", None) or getattr(name, "name", name)
                if isinstance(name, str):
                    values.setdefault(name.split(".")[0], []).append(unknown)
    arguments = scope.args
    params = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    return {
        name
        for name, seen in values.items()
        if name not in params
        and unknown not in seen
        and all(v == seen[0] for v in seen)
        and all(type(v) is type(seen[0]) for v in seen)
    }


def _literal(expr: ast.expr, unknown: object) -> Any:
    """The value of a literal that cannot change in place (a number, a string, a tuple of
    them), else ``unknown``: a list made per call may be changed from the call's data."""
    try:
        value = ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return unknown
    return value if _immutable(value) else unknown


def _immutable(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(map(_immutable, value))
    return value is None or isinstance(value, (bool, int, float, complex, str, bytes))
