"""The macro's arguments are Python's call arguments: a property test against ``ast.parse``.

Hypothesis draws argument texts (unparenthesised lambdas with defaults and `*`/`**`
parameters, conditional expressions, walrus, starred and double-starred arguments,
generator arguments, f-strings with nested quotes, comments and line breaks between any
two tokens) and puts them where a macro takes any expression: the values of `key=` and
`prune=` and the kernel launch's own arguments. Python's parser is the oracle: where it
accepts the call, the front end splits the macro into the same arguments with the same
trees and compiles it or names a DSL rule; where Python rejects it, so does the front end.
"""

from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.bindings import find_bindings
from tunedsl.frontend.compile import expand_source
from tunedsl.frontend.lexer import lex
from tunedsl.frontend.parser import parse_module
from tunedsl.frontend.source import SourceText

HEAD = "from tunedsl import autotune, cdiv\ndef f(k, a, b, n, xs, kw):\n    return "

# Between two tokens: nothing, a space, a line break, or a comment that looks like syntax.
GAP = st.sampled_from(["", " ", " ", " ", "\n", " # a, b: lambda )\n", "\n  "])
NAME = st.sampled_from(["a", "b", "n", "xs", "kw"])
ATOM = st.sampled_from(
    ["a", "n", "1", "2.5", "'s,t'", '"$x"', "f'{a!r:>{n}}'", 'f"{"nested"}"', "None", "xs[1:2]"]
)


def _join(*parts: str):
    return st.tuples(*[GAP] * len(parts)).map(
        lambda gaps: "".join(g + p for g, p in zip(gaps, parts, strict=True))
    )


@st.composite
def _lambda(draw, expr) -> str:
    """A lambda; its parameters mostly in a valid order (`a, b=1, *c, d=2, **e`)."""
    params = draw(st.lists(NAME, max_size=2, unique=True))
    defaults = draw(st.lists(st.tuples(st.sampled_from(["p", "q"]), expr), max_size=2))
    params += [f"{n}={v}" for n, v in dict(defaults).items()]
    params += draw(st.sampled_from([[], ["*r"], ["*", "s=1"], ["**kw"], ["*r", "**kw"]]))
    if draw(st.integers(0, 9)) == 0:
        params = draw(st.permutations(params))  # sometimes out of order: Python says no
    sep = "," + draw(GAP)
    return f"lambda {sep.join(params)}{draw(GAP)}:{draw(GAP)}{draw(expr)}"


def _extend(expr):
    return st.one_of(
        _lambda(expr),
        st.tuples(expr, GAP, expr, GAP, expr).map(
            lambda t: f"{t[0]} if{t[1]} {t[2]} else{t[3]} {t[4]}"
        ),
        st.tuples(NAME, GAP, expr).map(lambda t: f"({t[0]} :={t[1]}{t[2]})"),
        st.tuples(expr, GAP, expr).map(lambda t: f"{t[0]} +{t[1]}{t[2]}"),
        st.tuples(expr, GAP, expr).map(lambda t: f"[{t[0]},{t[1]}*{t[2]}]"),
        st.tuples(expr, expr).map(lambda t: f"({t[0]} for x in {t[1]})"),
        st.tuples(NAME, st.lists(expr, max_size=2)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
    )


EXPR = st.recursive(ATOM, _extend, max_leaves=5)
# Forms only an argument may take, and a few that none may (Python rejects them).
ARGUMENT_ONLY = st.one_of(
    st.tuples(NAME, EXPR).map(lambda t: f"{t[0]} := {t[1]}"),
    EXPR.map(lambda e: "*" + e),
    EXPR.map(lambda e: "**" + e),
    st.tuples(EXPR, EXPR).map(lambda t: f"{t[0]} for b in {t[1]}"),
)
VALUE = st.one_of(EXPR, EXPR, EXPR, ARGUMENT_ONLY)
# One argument of the launch `k(...)`: positional, keyword or unpacked.
LAUNCH_ARG = st.one_of(
    EXPR, ARGUMENT_ONLY, st.tuples(NAME, GAP, VALUE).map(lambda t: f"{t[0]}={t[1]}{t[2]}")
)


@st.composite
def macro_calls(draw) -> tuple[str, str]:
    """(the macro call, the same arguments as a plain call with the launch first)."""
    launch_args = draw(st.lists(LAUNCH_ARG, max_size=3))
    launch = "k(" + ("," + draw(GAP)).join([*launch_args, "T=$t"]) + ")"
    keywords = ["space=dict(t=[1, 2])", "blocks=cdiv(n, $t)"]
    for name in draw(st.lists(st.sampled_from(["key", "prune", "name"]), unique=True)):
        keywords.append(f"{name}={draw(GAP)}{draw(VALUE)}")
    at = draw(st.integers(0, len(keywords)))
    args = [*keywords[:at], launch, *keywords[at:]]
    comma = "," + draw(GAP)
    trailing = draw(st.sampled_from(["", ","]))
    macro = "autotune(" + comma.join(args) + trailing + ")"
    plain = "autotune(" + comma.join([launch, *keywords]) + trailing + ")"
    return macro, plain


def _arguments_by_python(plain: str) -> tuple[list[tuple[str | None, str]] | None, bool]:
    """Python's split of the call into arguments (None: it does not parse), and whether
    the module compiles (a repeated keyword parses but does not compile)."""
    text = HEAD + plain.replace("$t", "_t") + "\n"
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, False
    call = tree.body[1].body[0].value  # type: ignore[attr-defined]
    found = [(None, ast.dump(arg)) for arg in call.args]
    found += [(kw.arg, ast.dump(kw.value)) for kw in call.keywords]
    try:
        compile(text, "<plain>", "exec")
    except SyntaxError:
        return found, False
    return found, True


def _arguments_by_tunedsl(macro: str) -> list[tuple[str | None, str]]:
    src = SourceText(HEAD + macro + "\n", "<fuzz>")
    lexed = lex(src.text)
    parsed = parse_module(src, lexed, find_bindings(lexed.tokens))
    (call,) = parsed.macros
    return [(arg.keyword, ast.dump(arg.node)) for arg in call.args]  # type: ignore[arg-type]


@settings(
    max_examples=400,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(macro_calls())
def test_the_macro_takes_exactly_what_python_takes_as_call_arguments(pair: tuple[str, str]) -> None:
    macro, plain = pair
    expected, compiles = _arguments_by_python(plain)
    if expected is None:  # Python rejects these arguments: so does the front end
        try:
            expand_source(HEAD + macro + "\n")
        except SyntaxError:
            return
        raise AssertionError(f"accepted what Python rejects: {macro!r}")
    assert sorted(_arguments_by_tunedsl(macro), key=repr) == sorted(expected, key=repr), macro
    try:
        expanded = expand_source(HEAD + macro + "\n")
    except TunedslSyntaxError as err:  # a DSL rule (e.g. `:=` in a deferred part), named
        assert err.hint, macro
        return
    except SyntaxError:
        assert not compiles, macro
        return
    if compiles:
        compile(expanded, "<expanded>", "exec")


def test_an_unparenthesised_lambda_option_before_the_launch_compiles() -> None:
    source = (
        "from tunedsl import autotune\n"
        "def f(k, a):\n"
        "    return autotune(space=dict(t=[1, 2]), blocks=1,\n"
        "                    prune=lambda cs, args, *rest, n=2: cs,  # keep all\n"
        "                    k(a, T=$t))\n"
    )
    assert "prune" in expand_source(source)
