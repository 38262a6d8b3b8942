"""The parser: which names bind the macro, where macro calls are, how arguments split."""

from __future__ import annotations

import pytest

from tunedsl.frontend.bindings import find_bindings
from tunedsl.frontend.compile import needs_expansion
from tunedsl.frontend.lexer import lex
from tunedsl.frontend.parser import parse_module
from tunedsl.frontend.source import SourceText


def bindings(text: str) -> tuple[set[str], set[str]]:
    b = find_bindings(lex(text).tokens)
    return set(b.macro_names), set(b.module_names)


@pytest.mark.parametrize(
    "text, macro, module",
    [
        ("from tunedsl import autotune\n", {"autotune"}, set()),
        ("from tunedsl import cdiv, autotune as at\n", {"at"}, set()),
        ("from tunedsl import (\n  cdiv,\n  autotune as tune,\n)\n", {"tune"}, set()),
        ("from tunedsl import *\n", {"autotune"}, set()),
        ("import tunedsl\n", set(), {"tunedsl"}),
        ("import os, tunedsl as td\n", set(), {"td"}),
        ("import tunedsl.runtime\n", set(), {"tunedsl"}),
        ("def f():\n    from tunedsl import autotune\n", {"autotune"}, set()),
        ("from tunedsl import cdiv\n", set(), set()),
        ("from tunedsl.runtime.macro import autotune\n", set(), set()),
        ("import tunedsl.runtime as r\n", set(), set()),
        ("from mylib import autotune\n", set(), set()),
        ("x = 'from tunedsl import autotune'\n", set(), set()),
        ("# import tunedsl\n", set(), set()),
    ],
)
def test_bindings(text: str, macro: set[str], module: set[str]) -> None:
    assert bindings(text) == (macro, module)
    assert needs_expansion(text) == bool(macro or module)
    assert needs_expansion(text.encode()) == bool(macro or module)


def macros_of(text: str) -> list[str]:
    src = SourceText(text, "m.py")
    lexed = lex(text)
    parsed = parse_module(src, lexed, find_bindings(lexed.tokens))
    return [text[m.start : m.end] for m in parsed.macros]


LAUNCH = "autotune(space=S, blocks=1, k(a))"


@pytest.mark.parametrize(
    "header, line, found",
    [
        ("from tunedsl import autotune", LAUNCH, [LAUNCH]),
        (
            "from tunedsl import autotune as at",
            "at(space=S, blocks=1, k(a))",
            ["at(space=S, blocks=1, k(a))"],
        ),
        (
            "import tunedsl as td",
            "td.autotune(space=S, blocks=1, k(a))",
            ["td.autotune(space=S, blocks=1, k(a))"],
        ),
        (
            "import tunedsl",
            "tunedsl.autotune(space=S, blocks=1, k(a))",
            ["tunedsl.autotune(space=S, blocks=1, k(a))"],
        ),
        ("import tunedsl as td", "other.autotune(k(a))", []),
        ("from tunedsl import autotune", "obj.autotune(k(a))", []),
        ("from tunedsl import autotune as at", "autotune(k(a))", []),
        ("from tunedsl import autotune", "f = autotune", []),
    ],
)
def test_macro_calls_found(header: str, line: str, found: list[str]) -> None:
    assert macros_of(f"{header}\n{line}\n") == found


def test_arguments_split_into_keywords_and_launch() -> None:
    text = (
        "from tunedsl import autotune\n"
        "autotune(vadd(a, (b, c), n=[1, 2]),  # a comment, with commas\n"
        "         space={'t': [1, 2]}, blocks=(x, y),\n"
        "         key=n,)\n"
    )
    src = SourceText(text, "m.py")
    lexed = lex(text)
    [macro] = parse_module(src, lexed, find_bindings(lexed.tokens)).macros
    got = [(a.keyword, text[a.value_start : a.value_end]) for a in macro.args]
    assert got == [
        (None, "vadd(a, (b, c), n=[1, 2])"),
        ("space", "{'t': [1, 2]}"),
        ("blocks", "(x, y)"),
        ("key", "n"),
    ]
    assert all(a.node is not None for a in macro.args)
    # the parsed argument carries its original position
    blocks = macro.args[2].node
    assert (blocks.lineno, blocks.col_offset) == (3, text.splitlines()[2].index("(x, y)"))


def test_placeholders_belong_to_their_argument() -> None:
    text = "from tunedsl import autotune\nautotune(space=S, blocks=$b, k($x, y='$no', z=$z))\n"
    src = SourceText(text, "m.py")
    lexed = lex(text)
    [macro] = parse_module(src, lexed, find_bindings(lexed.tokens)).macros
    assert [(p.name, src.line_col(p.start)) for p in macro.placeholders] == [
        ("b", (2, 25)),
        ("x", (2, 31)),
        ("z", (2, 46)),
    ]
    assert [len(a.placeholders) for a in macro.args] == [0, 1, 2]
