"""Expander layer: the text of a launch's per-configuration parts, for the record digest.

A record is measured on one launch: its grid (``blocks=``) and the arguments written with
``$``, for the bucket its ``key=`` names. The site passes this text to
``make_site(launch=...)`` and the record digest covers it, as it covers the kernel's source,
so editing any of them (``cdiv(n, 2 * $tile)``, ``TILE=2 * $tile``, ``key=n // 512``) is a
new key that tunes once instead of reusing a decision measured on other launches or sizes.
``autotune_launch`` has no expansion: the runtime finds its call in the caller's file and
gives the text of its ``grid=``, ``args=``, ``kwargs=`` and ``key=`` (``text_of_spans``).
Spacing, line breaks and comments are no edit: the text is the tokens as written, joined one
way. Tokens rather than ``ast.unparse``: linear (no recursion on deep
expressions) and the same text on every Python version.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Sequence

from tunedsl.frontend.lexer import DOLLAR, NAME, NEWLINE, OP, STRING, lex
from tunedsl.frontend.source import SourceText

_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]},")


def launch_text(src: SourceText, parts: list[tuple[str, ast.expr]]) -> str:
    """``name=tokens`` of each part, ``; ``-separated: ``TILE=$tile; blocks=cdiv(n, $tile)``
    (a positional argument is named by its index)."""
    return "; ".join(f"{name}={_tokens(src, *_span(part))}" for name, part in parts)


def text_of_spans(
    source: str, filename: str, parts: Sequence[tuple[str, tuple[int, int, int, int]]]
) -> str:
    """``launch_text`` of parts given by their spans in ``source`` (``ast`` positions: line,
    UTF-8 byte column, end line, end column), as ``autotune_launch`` finds its arguments:
    ``grid=lambda cfg: (cdiv(n, cfg.TILE),); args=(a, c, n)``."""
    src = SourceText(source, filename)
    return "; ".join(f"{name}={_tokens(src, *span)}" for name, span in parts)


def _span(node: ast.expr) -> tuple[int, int, int, int]:
    return (node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)


def _tokens(src: SourceText, line: int, col: int, end_line: int, end_col: int) -> str:
    text = src.text[src.offset(line, col) : src.offset(end_line, end_col)]
    out: list[str] = []
    before: tuple[int, str] = (0, "")  # the last token's kind and text
    for kind, first, last, _ in lex(text).tokens:
        if kind == NEWLINE:
            continue
        word = text[first:last]
        if out and _glued(before, kind, word):
            out[-1] += word
        else:
            out.append(word)
        before = (kind, word)
    return " ".join(out)


def _glued(before: tuple[int, str], kind: int, word: str) -> bool:
    """No space after ``$`` or an opening bracket, before a closing one or a comma, nor
    between what is called or indexed (a name, a string, a closing bracket) and its bracket.
    Two names or numbers are never glued, so different tokens never give the same text."""
    kind_before, previous = before
    if kind_before == DOLLAR or previous in _OPENERS or (kind == OP and word in _CLOSERS):
        return True
    if word not in ("(", "["):
        return False
    if kind_before == NAME:
        return not keyword.iskeyword(previous)  # `not (x)`, `if (x)`: no call
    return kind_before == STRING or previous in (")", "]", "}")
