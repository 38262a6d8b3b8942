"""Property tests: any input either compiles or raises SyntaxError (nothing else), and
whatever compiles expands to text that compiles again."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

from frontend_corpus import HEADER, macro_calls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tunedsl.frontend.compile import (
    compile_source,
    expand_source,
    expand_to_ast,
    needs_expansion,
)

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
SCRIPTS = [p.read_text(encoding="utf-8") for p in sorted(GOLDEN.glob("*.py"))]
# Characters that matter to the front end, and some that do not.
ALPHABET = [*"$()[]{},=:.'\"#\\\n \tf*ab1_", "$tile", "autotune(", "space=", "blocks=", "f'{"]
SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def check(source: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of odd but valid code
        try:
            compile_source(source, "fuzz.py")
        except SyntaxError:
            if not needs_expansion(source):  # plain modules: exactly compile()'s verdict
                try:
                    compile(source, "fuzz.py", "exec", dont_inherit=True)
                except SyntaxError:
                    return
                raise AssertionError("compile_source rejected what compile() accepts") from None
            return
        expanded = expand_source(source, "fuzz.py")
        compile(expanded, "fuzz.py", "exec", dont_inherit=True)


@SETTINGS
@given(macro_calls())
def test_generated_macro_calls_compile_or_raise_syntax_error(line: str) -> None:
    source = HEADER + line + "\n"
    check(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = expand_to_ast(source, "fuzz.py")
    except SyntaxError:
        return
    for node in ast.walk(tree):  # every macro call was replaced
        if isinstance(node, ast.Call):
            assert not (isinstance(node.func, ast.Name) and node.func.id == "autotune")
            assert not (isinstance(node.func, ast.Attribute) and node.func.attr == "autotune")


@st.composite
def mutated_scripts(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SCRIPTS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        piece = draw(st.sampled_from(ALPHABET))
        if op == "insert":
            text = text[:at] + piece + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)) :]
        elif op == "replace":
            text = text[:at] + piece + text[at + 1 :]
        else:
            end = min(len(text), at + draw(st.integers(1, 40)))
            text = text[:end] + text[at:end] + text[end:]
    return text


@SETTINGS
@given(mutated_scripts())
def test_mutated_scripts_compile_or_raise_syntax_error(source: str) -> None:
    check(source)


@SETTINGS
@given(st.lists(st.sampled_from(ALPHABET), max_size=30).map("".join))
def test_arbitrary_text_after_the_header(body: str) -> None:
    check(HEADER + body)


def test_very_deep_expressions_compile_or_raise_syntax_error() -> None:
    """Python itself gives up on very deep expressions (RecursionError in compile());
    the front end turns that into a SyntaxError of the file."""
    for n in (900, 2500):
        for launch in ("k(" + "+".join(["$t"] * n) + ")", "k(" + "(" * n + "$t" + ")" * n + ")"):
            try:
                compile_source(HEADER + f"r = autotune(space=S, blocks=1, {launch})\n", "deep.py")
            except SyntaxError:
                pass


def test_deeply_nested_f_strings_compile_or_raise_syntax_error() -> None:
    for n in (100, 2000):
        nested = 'f"{' * n + "1" + '}"' * n
        try:
            compile_source(HEADER + f"x = {nested}\n", "deep.py")
        except SyntaxError:
            pass
        assert needs_expansion(HEADER + f"x = {nested}\n")
