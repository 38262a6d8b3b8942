"""Literal analysis for the expander: which macro parts are known when the module compiles.

A literal is built from constants, signed numbers, list/tuple displays, dict displays with
constant keys and (while the module does not rebind ``dict``) ``dict(name=literal, ...)``.
Literal parts go into the hoisted ``make_site(...)``; the rest is read lazily at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from tunedsl.frontend.nodes import at_all, const, node_span


def literal_of(node: ast.expr, dict_ok: bool) -> ast.expr | None:
    """A fresh, normalised copy of a literal expression (``dict(k=...)`` becomes a display), else None."""
    if isinstance(node, ast.Constant):
        return const(node.value)
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float, complex)
    ):
        return ast.UnaryOp(op=node.op, operand=const(node.operand.value))
    if isinstance(node, (ast.List, ast.Tuple)):
        elts = _literals(node.elts, dict_ok)
        if elts is None:
            return None
        cls = ast.List if isinstance(node, ast.List) else ast.Tuple
        return cls(elts=elts, ctx=ast.Load())
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        values = _literals(node.values, dict_ok)
        if len(keys) != len(node.keys) or values is None:
            return None
        return ast.Dict(keys=[const(k) for k in keys], values=values)
    if (
        dict_ok
        and isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
        and all(kw.arg is not None for kw in node.keywords)
        # a keyword given twice is no literal: left as code, Python's compile names it
        and len({kw.arg for kw in node.keywords}) == len(node.keywords)
    ):
        values = _literals([kw.value for kw in node.keywords], dict_ok)
        if values is None:
            return None
        return ast.Dict(keys=[const(kw.arg) for kw in node.keywords], values=values)
    return None


def _literals(nodes: Sequence[ast.expr], dict_ok: bool) -> list[ast.expr] | None:
    out = []
    for node in nodes:
        found = literal_of(node, dict_ok)
        if found is None:
            return None
        out.append(found)
    return out


def literal_space(node: ast.expr, dict_ok: bool) -> tuple[ast.expr | None, list[str] | None]:
    """(normalised literal space, its field names) or (None, None) when it is not literal."""
    value = literal_of(node, dict_ok)
    if isinstance(value, ast.Dict):
        dicts = [value]
    elif isinstance(value, ast.List) and all(isinstance(e, ast.Dict) for e in value.elts):
        dicts = value.elts  # type: ignore[assignment]
    else:
        return None, None
    fields: list[str] = []
    for d in dicts:
        for k in d.keys:
            name = k.value  # type: ignore[union-attr]
            if not isinstance(name, str):
                return None, None  # the runtime reports non-string field names
            if name not in fields:
                fields.append(name)
    return at_all(value, node_span(node)), fields
