"""Parser layer: where the module can reach the macro: the names that bind it
(``find_bindings``), and the places where a call of such a name is no call (the class
patterns of a ``match`` statement's ``case``, ``pattern_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedsl.frontend.lexer import NAME, NEWLINE, OP, Token

MACRO_NAME = "autotune"
MODULE_NAME = "tunedsl"


@dataclass(frozen=True)
class Bindings:
    """Names under which a module can reach the macro."""

    macro_names: frozenset[str]  # ``autotune`` or its alias: ``autotune(...)``
    module_names: frozenset[str]  # ``tunedsl`` or its alias: ``td.autotune(...)``

    def __bool__(self) -> bool:
        return bool(self.macro_names or self.module_names)


def find_bindings(tokens: list[Token]) -> Bindings:
    """Names bound by ``from tunedsl import autotune [as x]`` / ``import tunedsl [as td]``.

    A binding anywhere in the module (any scope) counts for the whole module.
    """
    macro: set[str] = set()
    module: set[str] = set()
    n = len(tokens)
    i = 0
    while i < n:
        kind, _, _, text = tokens[i]
        if kind == NAME and text == "from":
            if (
                i + 2 < n
                and tokens[i + 1][3] == MODULE_NAME
                and tokens[i + 1][0] == NAME
                and tokens[i + 2][3] == "import"
            ):
                i = _from_import_names(tokens, i + 3, macro)
                continue
        elif kind == NAME and text == "import":
            i = _import_names(tokens, i + 1, module)
            continue
        i += 1
    return Bindings(frozenset(macro), frozenset(module))


def _from_import_names(tokens: list[Token], i: int, macro: set[str]) -> int:
    n = len(tokens)
    if i < n and tokens[i][3] == "(":
        i += 1
    while i < n:
        kind, _, _, text = tokens[i]
        if kind == OP and text == "*":
            macro.add(MACRO_NAME)
            i += 1
        elif kind == NAME:
            bound = text
            if i + 2 < n and tokens[i + 1][3] == "as" and tokens[i + 2][0] == NAME:
                bound = tokens[i + 2][3]
                i += 2
            if text == MACRO_NAME:
                macro.add(bound)
            i += 1
        else:
            return i
        if i < n and tokens[i][3] == ",":
            i += 1
        else:
            return i
    return i


def _import_names(tokens: list[Token], i: int, module: set[str]) -> int:
    n = len(tokens)
    while i < n and tokens[i][0] == NAME:
        first = tokens[i][3]
        dotted = 1
        i += 1
        while i + 1 < n and tokens[i][3] == "." and tokens[i + 1][0] == NAME:
            i += 2
            dotted += 1
        if i + 1 < n and tokens[i][3] == "as" and tokens[i + 1][0] == NAME:
            if first == MODULE_NAME and dotted == 1:
                module.add(tokens[i + 1][3])
            i += 2
        elif first == MODULE_NAME:
            module.add(MODULE_NAME)  # ``import tunedsl.x`` binds ``tunedsl`` too
        if i < n and tokens[i][3] == ",":
            i += 1
        else:
            break
    return i


def pattern_tokens(text: str, tokens: list[Token]) -> frozenset[int]:
    """Indices of the tokens in the patterns of ``match`` statements (``case P:``).

    A pattern is no expression: ``case autotune(x=1):`` matches instances of a class named
    ``autotune`` and calls nothing. ``case`` is a keyword only on the lines of a ``match``
    block at the indentation of its first line; the pattern runs from ``case`` up to its
    guard's ``if`` or the ``:`` outside brackets.
    """
    if not any(tok[3] == "case" and tok[0] == NAME for tok in tokens):
        return frozenset()
    found: set[int] = set()
    blocks: list[list[int]] = []  # [column of `match`, column of its `case`s or -1]
    n = len(tokens)
    i = 0
    while i < n:
        j = i
        while j < n and tokens[j][0] != NEWLINE:
            j += 1
        if j > i:
            first = tokens[i]
            col = first[1] - max(text.rfind("\n", 0, first[1]), text.rfind("\r", 0, first[1]))
            while blocks and col <= blocks[-1][0]:
                blocks.pop()
            if blocks and blocks[-1][1] < 0:
                blocks[-1][1] = col
            if blocks and col == blocks[-1][1] and first[3] == "case" and first[0] == NAME:
                found.update(_pattern(tokens, i + 1, j))
            if first[3] == "match" and first[0] == NAME and j - i > 2 and tokens[j - 1][3] == ":":
                blocks.append([col, -1])
        i = j + 1
    return frozenset(found)


def _pattern(tokens: list[Token], i: int, end: int) -> range:
    """The token indices of the pattern that starts at ``i`` (before ``end``)."""
    depth = 0
    for k in range(i, end):
        kind, _, _, tok = tokens[k]
        if kind == OP and tok in "([{":
            depth += 1
        elif kind == OP and tok in ")]}":
            depth -= 1
        elif depth <= 0 and ((kind == OP and tok == ":") or (kind == NAME and tok == "if")):
            return range(i, k)
    return range(i, end)
