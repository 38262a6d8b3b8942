"""grammar/tunedsl.lark and the front end accept exactly the same generated macro calls."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from frontend_corpus import HEADER, macro_calls
from hypothesis import HealthCheck, given, settings

from tunedsl.model.options import HINT_NAMES, OPTION_NAMES

lark = pytest.importorskip("lark")

GRAMMAR = Path(__file__).resolve().parents[3] / "grammar" / "tunedsl.lark"


@pytest.fixture(scope="module")
def parser() -> lark.Lark:
    return lark.Lark.open(str(GRAMMAR), start="line", parser="lalr")


def front_end_accepts(line: str) -> tuple[bool, str]:
    from tunedsl.frontend.compile import compile_source

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile_source(HEADER + line + "\n", "corpus.py")
        except SyntaxError as err:
            return False, str(err)
    return True, ""


def grammar_accepts(parser: lark.Lark, line: str) -> tuple[bool, str]:
    try:
        parser.parse(line)
    except lark.exceptions.LarkError as err:
        return False, str(err).splitlines()[0]
    return True, ""


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(line=macro_calls())
def test_grammar_and_front_end_agree(parser: lark.Lark, line: str) -> None:
    front, why_front = front_end_accepts(line)
    grammar, why_grammar = grammar_accepts(parser, line)
    assert front == grammar, f"front end: {front} {why_front}\ngrammar: {grammar} {why_grammar}"


@pytest.mark.parametrize(
    "line, accepted",
    [
        ("autotune(space=dict(tile=[1]), blocks=cdiv(n, $tile), k(a, TILE=$tile))", True),
        ("r = td.autotune(k(a, $tile), blocks=($tile, 2), space=S, num_warps=4, key=n,)", True),
        ("autotune(space=S, k(a), blocks=1, verify=check, name='x')", True),
        ("autotune(space=S, blocks=1, k('$x', f'{a}$'))", True),
        ("y = $tile", False),
        ("autotune(space=dict(t=[$t]), blocks=1, k(a))", False),
        ("autotune(space=S, blocks=$ t, k(a))", False),
        ("autotune(space=S, blocks=$class, k(a))", False),
        ("autotune(space=S, blocks=1)", False),
        ("autotune(space=S, blocks=1, k(a), k(b))", False),
        ("autotune(space=S, blocks=1, k)", False),
        ("autotune(space=S, blocks=1, spcae=1, k(a))", False),
        ("autotune(blocks=1, k(a))", False),
        ("autotune(space=S, k(a))", False),
        ("autotune(space=S, blocks=1, key=$t, k(a))", False),
        ("autotune(space=S, blocks=1, ks[$t](a))", False),
        ("autotune(space=S, blocks=1, *xs, k(a))", False),
    ],
)
def test_grammar_examples(parser: lark.Lark, line: str, accepted: bool) -> None:
    assert grammar_accepts(parser, line)[0] is accepted
    assert front_end_accepts(line)[0] is accepted


def test_grammar_lists_the_runtimes_keywords() -> None:
    text = GRAMMAR.read_text(encoding="utf-8")
    for name in HINT_NAMES + OPTION_NAMES:
        assert f'"{name}"' in text, f"{name} is missing from the grammar"
