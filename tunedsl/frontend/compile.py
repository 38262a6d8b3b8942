"""Public API of the front end: DSL source -> expanded AST, expanded text, code object.

The stages are lexer (``lexer.py``) -> parser (``parser.py``) -> expander (``expand.py``);
this module ties them together and is the only entry point the rest of tunedsl uses.
A module that does not bind ``autotune`` from tunedsl is compiled exactly as ``compile()``
would compile it.
"""

from __future__ import annotations

import ast
import sys
import types

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.expand import expand_module
from tunedsl.frontend.lexer import Lexed, lex
from tunedsl.frontend.parser import MODULE_NAME, Bindings, find_bindings, parse_module
from tunedsl.frontend.source import SourceText, decode_source

__all__ = ["compile_source", "expand_source", "expand_to_ast", "needs_expansion"]

# Deep enough for any expression compile() accepts; low enough for the C stack of 3.10.
_UNPARSE_RECURSION_LIMIT = 12_000


def needs_expansion(source: str | bytes) -> bool:
    """Does the module bind ``autotune`` from tunedsl (``from tunedsl import ...``,
    ``import tunedsl [as x]``)? Cheap substring check first, then a real scan.

    Bytes that mention tunedsl but do not decode count as needing expansion, so that
    ``compile_source`` reports them (``compile()`` would accept bad bytes in a comment and
    silently leave the macro calls unexpanded).
    """
    try:
        return _scan_if_dsl(source) is not None
    except SyntaxError:
        return True


def _scan_if_dsl(
    source: str | bytes, filename: str = "<string>"
) -> tuple[str, Lexed, Bindings] | None:
    """(text, scan, bindings) of a module that binds the macro, else None.

    Raises SyntaxError for bytes that mention tunedsl but do not decode (as Python's own
    loader rejects a source file that does not decode).
    """
    if isinstance(source, bytes):
        if b"tunedsl" not in source or b"import" not in source:
            return None
    elif MODULE_NAME not in source or "import" not in source:
        return None
    text = decode_source(source, filename)
    lexed = lex(text)
    bindings = find_bindings(lexed.tokens)
    return (text, lexed, bindings) if bindings else None


def expand_to_ast(source: str | bytes, filename: str = "<string>") -> ast.Module:
    """The expanded module; every node carries the line/column of the user's text.

    Raises ``TunedslSyntaxError`` for DSL errors and Python's ``SyntaxError`` (with
    Python's message and position) for plain Python errors.
    """
    scanned = _scan_if_dsl(source, filename)
    if scanned is None:
        text = decode_source(source, filename)
        try:
            return ast.parse(text, filename)
        except SyntaxError as err:
            raise SourceText(text, filename).python_error(err) from err
    return _expand(scanned, filename)


def _expand(scanned: tuple[str, Lexed, Bindings], filename: str) -> ast.Module:
    text, lexed, bindings = scanned
    src = SourceText(text, filename)
    try:
        return expand_module(src, parse_module(src, lexed, bindings))
    except (RecursionError, MemoryError) as err:
        raise _too_deep(err, filename) from err


def _too_deep(err: BaseException, filename: str) -> TunedslSyntaxError:
    # CPython's parser and compiler give up on absurdly deep or long expressions with
    # RecursionError/MemoryError; in a DSL module that is a syntax error of the file
    # (found by tests/reliability/test_fuzz_frontend.py).
    return TunedslSyntaxError(
        f"an expression is too deeply nested or too long for Python ({type(err).__name__})",
        filename=filename,
        hint="split it up with intermediate variables",
    )


def expand_source(source: str | bytes, filename: str = "<string>") -> str:
    """The expanded module as Python text (``ast.unparse``), as ``tunedsl expand`` shows it."""
    tree = expand_to_ast(source, filename)
    try:
        return ast.unparse(tree)
    except RecursionError:
        pass
    # ast.unparse recurses a few frames per nesting level: an expression that compiles can
    # still be too deep for the default limit. Retry once with a higher (bounded) limit.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _UNPARSE_RECURSION_LIMIT))
    try:
        return ast.unparse(tree)
    except RecursionError as err:
        raise _too_deep(err, filename) from err
    finally:
        sys.setrecursionlimit(limit)


def compile_source(
    source: str | bytes, filename: str = "<string>", *, optimize: int = -1
) -> types.CodeType:
    """A code object for the module, expanded when it uses the DSL.

    A module that does not bind the macro compiles exactly as ``compile()`` compiles it.
    """
    scanned = _scan_if_dsl(source, filename)
    if scanned is None:
        return compile(source, filename, "exec", dont_inherit=True, optimize=optimize)
    tree = _expand(scanned, filename)
    try:
        return compile(tree, filename, "exec", dont_inherit=True, optimize=optimize)
    except SyntaxError as err:  # e.g. `return` outside a function: Python's own check
        raise SourceText(scanned[0], filename).python_error(err) from err
    except (RecursionError, MemoryError) as err:
        raise _too_deep(err, filename) from err
