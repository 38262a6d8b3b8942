"""Public API of the front end: DSL source -> expanded AST, expanded text, code object.

The stages are lexer (``lexer.py``) -> parser (``parser.py``) -> expander (``expand.py``);
this module ties them together and is the only entry point the rest of tunedsl uses.
A module that does not bind ``autotune`` from tunedsl is compiled exactly as ``compile()``
would compile it.
"""

from __future__ import annotations

import ast
import types

from tunedsl.frontend.expand import expand_module
from tunedsl.frontend.lexer import lex
from tunedsl.frontend.parser import MODULE_NAME, find_bindings, parse_module
from tunedsl.frontend.source import SourceText, decode_source

__all__ = ["compile_source", "expand_source", "expand_to_ast", "needs_expansion"]


def needs_expansion(source: str | bytes) -> bool:
    """Does the module bind ``autotune`` from tunedsl (``from tunedsl import ...``,
    ``import tunedsl [as x]``)? Cheap substring check first, then a real scan."""
    if isinstance(source, bytes):
        if b"tunedsl" not in source or b"import" not in source:
            return False
        source = decode_source(source)
    elif MODULE_NAME not in source or "import" not in source:
        return False
    return bool(find_bindings(lex(source).tokens))


def expand_to_ast(source: str | bytes, filename: str = "<string>") -> ast.Module:
    """The expanded module; every node carries the line/column of the user's text.

    Raises ``TunedslSyntaxError`` for DSL errors and Python's ``SyntaxError`` (with
    Python's message and position) for plain Python errors.
    """
    text = decode_source(source)
    src = SourceText(text, filename)
    lexed = lex(text)
    bindings = find_bindings(lexed.tokens)
    if not bindings:
        try:
            return ast.parse(text, filename)
        except SyntaxError as err:
            raise src.python_error(err) from err
    return expand_module(src, parse_module(src, lexed, bindings))


def expand_source(source: str | bytes, filename: str = "<string>") -> str:
    """The expanded module as Python text (``ast.unparse``), as ``tunedsl expand`` shows it."""
    return ast.unparse(expand_to_ast(source, filename))


def compile_source(
    source: str | bytes, filename: str = "<string>", *, optimize: int = -1
) -> types.CodeType:
    """A code object for the module, expanded when it uses the DSL."""
    if not needs_expansion(source):
        return compile(source, filename, "exec", dont_inherit=True, optimize=optimize)
    tree = expand_to_ast(source, filename)
    try:
        return compile(tree, filename, "exec", dont_inherit=True, optimize=optimize)
    except SyntaxError as err:  # e.g. `return` outside a function: Python's own check
        src = SourceText(decode_source(source), filename)
        raise src.python_error(err) from err
