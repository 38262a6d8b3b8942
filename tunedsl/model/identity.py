"""A site's identity: the name its records are stored under (runtime layer, pure Python).

The identity is part of every record's digest, so it must survive edits that cannot
change what the site launches. ``file:line:col`` did not: an import added above a call
re-tuned every key. The default identity is

    <file's base name>:<enclosing function's qualified name>:<kernel text>[#<ordinal>]

e.g. ``model.py:Attention.forward:flash_fwd`` (``<module>`` at module level). The ordinal
counts earlier macros with the same kernel text in the same function (``#1`` for the
second), so two launches of one kernel in one function stay apart. ``name=`` replaces the
whole identity. A macro moved to another function, or a renamed function or file, is a new
site (``tunedsl cache gc`` removes the old records).

The front end knows the enclosing function; it passes ``scope=`` and ``ordinal=`` to
``make_site``, which declares them here before building the ``Site``. The plain API
(``autotune_launch``) has no expander: its scope is found by parsing the caller's file
with ``ast`` (plain Python), and its ordinal counts the ``autotune_launch`` calls before it
in that function.

Records written by tunedsl 0.1 (identity ``file:line:col`` or ``name=``, every tool
version in the digest) are migrated on first use: ``migrate`` finds a site's record
under its legacy digest and stores it under the new one.
"""

from __future__ import annotations

import ast
import os
import threading
from typing import Any

LEGACY = "legacy"
MODULE_SCOPE = "<module>"

_lock = threading.Lock()
# (filename, line, col) -> (scope, ordinal), declared by make_site before Site() runs.
_declared: dict[tuple[str, int, int], tuple[str, int]] = {}
# site id -> (legacy site id, "/abs/file.py:line:col" with a 1-based col)
_sites: dict[str, tuple[str, str]] = {}


def declare(filename: str, line: int, col: int, scope: str, ordinal: int) -> None:
    """The expander's facts about the macro at ``filename:line:col`` (0-based col)."""
    with _lock:
        _declared[(filename, line, col)] = (scope, ordinal)


def site_id(filename: str, line: int, col: int, kernel_text: str, name: Any) -> str:
    """The identity of the site at ``filename:line:col`` (0-based col) launching
    ``kernel_text``; ``name`` (a string given as ``name=``) replaces it."""
    with _lock:
        declared = _declared.get((filename, line, col))
    if declared is None:
        declared = _scope_from_file(filename, line, kernel_text)
    if isinstance(name, str):
        ident = name
    else:
        scope, ordinal = declared
        ident = f"{os.path.basename(filename)}:{scope}:{kernel_text}"
        if ordinal:
            ident += f"#{ordinal}"
    # 0.1 named a site by name= too, but keyed every tool version: its records migrate.
    legacy = name if isinstance(name, str) else legacy_id(filename, line, col)
    with _lock:
        _sites[ident] = (legacy, f"{filename}:{line}:{col + 1}")
    return ident


def legacy_id(filename: str, line: int, col: int) -> str:
    """The identity before 0.2: ``base name:line:col`` (0-based col)."""
    return f"{os.path.basename(filename)}:{line}:{col}"


def location(ident: str) -> str:
    """``/abs/file.py:line:col`` (1-based col) of the site called ``ident`` in this process."""
    with _lock:
        return _sites.get(ident, ("", ""))[1]


def scope_of(tree: ast.Module, line: int) -> str:
    """The qualified name of the innermost function or class around ``line``."""
    parts: list[str] = []
    body: list[ast.stmt] = list(tree.body)
    while True:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                node.lineno <= line <= (node.end_lineno or node.lineno)
            ):
                parts.append(node.name)
                body = list(node.body)
                break
        else:
            return ".".join(parts) or MODULE_SCOPE


def _scope_from_file(filename: str, line: int, kernel_text: str) -> tuple[str, int]:
    """(scope, ordinal) of a call at ``line`` of a plain Python file; when the file cannot
    be read or parsed, the line stands in for the scope (the old behaviour)."""
    try:
        with open(filename, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
        return f"line {line}", 0
    scope = scope_of(tree, line)
    callee = kernel_text.rpartition(".")[2]
    starts = sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _callee_name(node.func) == callee
        and scope_of(tree, node.lineno) == scope
    )
    return scope, sum(1 for s in starts if s < line)


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def legacy_of(ident: str) -> str:
    """The tunedsl 0.1 identity (``file:line:col``) of the site now called ``ident``."""
    with _lock:
        return _sites.get(ident, ("", ""))[0]
