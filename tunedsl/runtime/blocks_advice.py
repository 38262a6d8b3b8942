"""How to write in ``blocks=`` a grid that the user's ``blocks=`` computes as one value.

``mistakes.grid_dims`` refuses ``blocks=g`` with ``g = (x, y)``: one dimension holding a
tuple. Its error quotes the ``blocks=`` text as Python writes it (``python_text``: a
generator that is a call's only argument keeps its one pair of parentheses, which
``ast.unparse`` doubles) and, for a tuple built by a generator or a list comprehension
(``tuple(cdiv(d, $tile) for d in (M, N))``), says how to write it (``for_comprehension``):
unrolled over a literal tuple or list, ``blocks=(cdiv(M, $tile), cdiv(N, $tile))``, else in
a sentence that names the generator's parts (indexing it would run it once per dimension).
"""

from __future__ import annotations

import ast
import copy

DOLLAR = "__tunedsl_dollar__"  # `$` in a text given to ast.parse


def python_text(node: ast.AST) -> str:
    """``node`` as Python writes it, with ``$`` fields written back."""
    text = ast.unparse(node)
    for call in ast.walk(node):  # outermost first: each doubled text is still in `text`
        if (
            isinstance(call, ast.Call)
            and len(call.args) == 1
            and not call.keywords
            and isinstance(call.args[0], ast.GeneratorExp)
        ):
            alone = ast.unparse(call.func) + ast.unparse(call.args[0])
            text = text.replace(ast.unparse(call), alone)
    return text.replace(DOLLAR, "$")


def for_comprehension(written: str, count: int) -> str | None:
    """How to write ``blocks=tuple(E for d in ITEMS)`` (or ``list``, or a list
    comprehension) as a tuple of ``count`` dimensions, or None for any other ``written``."""
    try:
        node = ast.parse(written.replace("$", DOLLAR), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("tuple", "list")
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.GeneratorExp | ast.ListComp)
    ):
        return None
    comp = node.args[0]
    names = ", ".join(f"d{i}" for i in range(count))
    if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
        return f"blocks=({names}), one expression each, in place of `{python_text(comp)}`"
    gen = comp.generators[0]
    items = gen.iter.elts if isinstance(gen.iter, ast.Tuple | ast.List) else None
    target = gen.target.id if isinstance(gen.target, ast.Name) else None
    nested = any(isinstance(n, ast.Lambda | ast.comprehension) for n in ast.walk(comp.elt))
    if (
        items is not None
        and target is not None
        and len(items) == count
        and not nested
        and not any(isinstance(item, ast.Starred) for item in items)
    ):
        parts = [python_text(_Put(target, item).visit(copy.deepcopy(comp.elt))) for item in items]
        return f"blocks=({', '.join(parts)})"
    return (
        f"blocks=({names}), where each is "
        f"`{python_text(comp.elt)}` for one `{python_text(gen.target)}` of "
        f"`{python_text(gen.iter)}`"
    )


class _Put(ast.NodeTransformer):
    """Each read of the name ``target`` replaced by ``value``."""

    def __init__(self, target: str, value: ast.expr) -> None:
        self.target, self.value = target, value

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.value) if node.id == self.target else node
