"""AST building blocks for the expander: positioned nodes, constants, small displays.

Every node the expander creates gets a position from the user's text, so these helpers
take a ``Span`` (line, byte column, end line, end byte column) as ``ast`` counts them.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any, TypeVar

from tunedsl.frontend.source import SourceText

# (lineno, byte col, end lineno, end byte col): where a generated node says it comes from.
Span = tuple[int, int, int, int]
NodeT = TypeVar("NodeT", bound=ast.AST)
_POSITION = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def span_of(src: SourceText, start: int, end: int) -> Span:
    return (*src.byte_col(start), *src.byte_col(end))  # type: ignore[return-value]


def node_span(node: ast.AST) -> Span:
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined, return-value]


def at(node: NodeT, span: Span) -> NodeT:
    """Give ``node`` and its descendants without a position the position ``span``.

    A node that has a position came from the user's text (or was placed before), and so
    did everything below it: the walk stops there.
    """
    stack: list[ast.AST] = [node]
    while stack:
        child = stack.pop()
        if "lineno" in child._attributes:
            if getattr(child, "lineno", None) is not None:
                continue
            for attr, value in zip(_POSITION, span, strict=True):
                setattr(child, attr, value)
        stack.extend(ast.iter_child_nodes(child))
    return node


def at_all(node: NodeT, span: Span) -> NodeT:
    """Give ``node`` and every descendant the position ``span`` (for fresh literal copies)."""
    for child in ast.walk(node):
        if "lineno" in child._attributes:
            for attr, value in zip(_POSITION, span, strict=True):
                setattr(child, attr, value)
    return node


def const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def dict_display(items: Sequence[tuple[str | None, ast.expr]]) -> ast.Dict:
    return ast.Dict(
        keys=[None if k is None else const(k) for k, _ in items], values=[v for _, v in items]
    )


def arguments(names: list[str]) -> ast.arguments:
    return ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=name) for name in names],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
