"""A ``match`` statement's class pattern is no call: ``case autotune(x=1):`` in a module
that binds the macro matches instances of a class named ``autotune`` and is left alone."""

from __future__ import annotations

import ast

import pytest

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.compile import compile_source, expand_to_ast

MODULE = """\
from tunedsl import autotune as tuned
import tunedsl
import tunedsl as td


class autotune:
    __match_args__ = ("x",)

    def __init__(self, x=0):
        self.x = x


def kind(v):
    match v:
        case autotune(x=1):
            return "x=1"
        case autotune(2) if v:
            return "2"
        case {"k": [autotune(x=3), *_]}:
            return "k"
        case str() | bytes():
            return "text"
        case _:
            case = "other"
            match = case
            return match


def never(v):
    match v:
        case tunedsl.autotune() | td.autotune(y=[1, 2]):
            return "never"
        case tuned(z=3):
            return "never"
"""


def test_class_patterns_named_like_the_macro_are_left_alone() -> None:
    namespace: dict[str, object] = {}
    exec(compile_source(MODULE, "/w/patterns.py"), namespace)
    kind, cls = namespace["kind"], namespace["autotune"]
    assert kind(cls(1)) == "x=1"  # type: ignore[operator]
    assert kind(cls(2)) == "2"  # type: ignore[operator]
    assert kind({"k": [cls(3), 0]}) == "k"  # type: ignore[operator]
    assert kind("s") == "text"  # type: ignore[operator]
    assert kind(cls(5)) == "other"  # type: ignore[operator]


def test_patterns_keep_their_nodes_as_python_parses_them() -> None:
    expanded = expand_to_ast(MODULE, "/w/patterns.py")
    plain = ast.parse(MODULE, "/w/patterns.py")
    mine = [ast.dump(n, include_attributes=True) for n in ast.walk(expanded)
            if isinstance(n, ast.match_case)]  # fmt: skip
    theirs = [ast.dump(n, include_attributes=True) for n in ast.walk(plain)
              if isinstance(n, ast.match_case)]  # fmt: skip
    assert mine == theirs and len(mine) == 7


@pytest.mark.parametrize(
    "body",
    [
        # A guard is an expression: a macro there is one.
        "match v:\n    case 1 if autotune(space=S, blocks=1, k(a, T=$t)):\n        pass\n",
        # The subject too, and the case's body.
        "match autotune(space=S, blocks=1, k(a, T=$t)):\n    case _:\n        pass\n",
        "match v:\n    case 1:\n        autotune(space=S, blocks=1, k(a, T=$t))\n",
        # `case` outside a match block is a name.
        "case = autotune(space=S, blocks=1, k(a, T=$t))\n",
        "match v:\n    case 1:\n        pass\ncase(autotune(space=S, blocks=1, k(a, T=$t)))\n",
    ],
)
def test_calls_beside_patterns_are_still_macros(body: str) -> None:
    text = "from tunedsl import autotune\nS = T = v = k = a = None\n" + body
    tree = expand_to_ast(text, "/w/m.py")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert any(isinstance(c.func, ast.Attribute) and c.func.attr == "launch" for c in calls)
    assert not any(isinstance(c.func, ast.Name) and c.func.id == "autotune" for c in calls)


def test_a_placeholder_in_a_pattern_says_that_a_pattern_is_no_call() -> None:
    text = "from tunedsl import autotune\nmatch v:\n    case autotune(x=$t):\n        pass\n"
    with pytest.raises(TunedslSyntaxError) as info:
        compile_source(text, "/w/m.py")
    error = info.value
    assert (error.lineno, error.col) == (3, text.splitlines()[2].index("$t"))
    assert "only allowed inside an autotune(...) macro call" in error.msg
    assert "a `case` pattern is no call" in (error.hint or "")
