"""Public API of the front end: DSL source -> expanded AST, expanded text, code object.

The stages are lexer (``lexer.py``) -> parser (``parser.py``) -> expander (``expand.py``);
this module ties them together and is the only entry point the rest of tunedsl uses.
A module that does not bind ``autotune`` from tunedsl is compiled exactly as ``compile()``
would compile it.
"""

from __future__ import annotations

import ast
import re
import sys
import types

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.bindings import MACRO_NAME, MODULE_NAME, Bindings, find_bindings
from tunedsl.frontend.expand import expand_module
from tunedsl.frontend.lexer import OP, STRING, Lexed, lex
from tunedsl.frontend.parser import parse_module
from tunedsl.frontend.source import SourceText, decode_source, detect_encoding

__all__ = ["compile_source", "expand_source", "expand_to_ast", "needs_expansion"]

# Deep enough for any expression compile() accepts: ast.unparse takes about three frames per
# nesting level, and compile() accepts about 3 000 levels up to 3.12, but 6 000 unary
# operators or 10 000 terms of a sum from 3.13 (measured). From 3.11 Python-to-Python calls
# do not use the C stack, so the higher limit is safe there; 3.10 keeps one its stack takes.
_UNPARSE_RECURSION_LIMIT = 12_000 if sys.version_info < (3, 11) else 40_000
# CPython's parser refuses more than 200 nested brackets, and ast.unparse may write more than
# the user did (`return a, b` -> `return (a, b)`, `f(x := 1)` -> `f((x := 1))`, at most about
# one extra level per level). Below this depth the expanded text cannot come near the limit,
# so only deeper modules pay for checking that their expanded text compiles.
_CHECK_TEXT_AT_DEPTH = 50


def needs_expansion(source: str | bytes) -> bool:
    """Does the module bind ``autotune`` from tunedsl (``from tunedsl import ...``,
    ``import tunedsl [as x]``)? Cheap substring check first, then a real scan.

    Bytes that mention tunedsl but do not decode count as needing expansion, so that
    ``compile_source`` reports them (``compile()`` would accept bad bytes in a comment and
    silently leave the macro calls unexpanded).
    """
    try:
        return scan_if_dsl(source) is not None
    except SyntaxError:
        return True


def scan_if_dsl(
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
    scanned = scan_if_dsl(source, filename)
    if scanned is None:
        return _parse_plain(source, filename)
    return _expand(scanned, filename)


def _parse_plain(source: str | bytes, filename: str) -> ast.Module:
    """A module that does not use the DSL, parsed as ``compile()`` parses it."""
    try:
        text = decode_source(source, filename)
    except SyntaxError:
        # compile_source compiles a plain module exactly as compile() does, and compile()
        # (like importlib, unlike `python file.py`) tolerates undecodable bytes in a comment.
        # Parse the bytes the same way, so that `tunedsl expand` agrees with compile_source.
        return ast.parse(source, filename)
    try:
        return ast.parse(text, filename)
    except SyntaxError as err:
        raise SourceText(text, filename).python_error(err) from err


def _expand(scanned: tuple[str, Lexed, Bindings], filename: str) -> ast.Module:
    text, lexed, bindings = scanned
    src = SourceText(text, filename)
    _check_no_field_in_fstrings(src, lexed)
    try:
        tree = expand_module(src, parse_module(src, lexed, bindings))
    except (RecursionError, MemoryError) as err:
        raise _too_deep(err, filename) from err
    _check_no_macro_in_fstrings(src, lexed, bindings, tree)
    depth, deepest = _bracket_depth(text, lexed)
    if depth >= _CHECK_TEXT_AT_DEPTH:
        _check_text_compiles(tree, src, deepest)
    return tree


def _check_no_macro_in_fstrings(
    src: SourceText, lexed: Lexed, bindings: Bindings, tree: ast.Module
) -> None:
    """Refuse a macro call in an f-string's replacement field (``f"{autotune(...)}"``).

    An f-string is one token to the lexer, so such a call was never expanded: it would have
    run as a plain call of tunedsl's ``autotune``, which says the module was not expanded.
    The tree is walked only when an f-string's text names the macro.
    """
    names = (*bindings.macro_names, *bindings.module_names)
    fstrings = {
        start: end
        for kind, start, end, _ in lexed.tokens
        if kind == STRING
        and _F_PREFIX.match(src.text, start)
        and any(name in src.text[start:end] for name in names)
    }
    if not fstrings:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call) or not _is_macro(call.func, bindings):
                continue
            start = src.offset(call.lineno, call.col_offset)
            end = src.offset(call.func.end_lineno or call.lineno, call.func.end_col_offset or 0)
            if not any(a <= start < b for a, b in fstrings.items()):  # 3.11's positions
                start = end = src.offset(node.lineno, node.col_offset)
            raise src.error(
                "an autotune(...) macro cannot be used inside an f-string",
                start,
                end,
                hint="compute it before the f-string: `r = autotune(...)`, then f'{r}'",
            )


# `{` (not `{{`) and, before any quote or brace, a `$name`: a field read in a replacement field.
_FIELD_IN_FIELD = re.compile(r"(?<!\{)\{[^{}'\"]*?(\$[A-Za-z_]\w*)")


def _check_no_field_in_fstrings(src: SourceText, lexed: Lexed) -> None:
    """Refuse ``$name`` in an f-string's replacement field (``T=f"{$t}"``): an f-string is one
    token to the lexer, so the field was never read, and Python's own error names neither
    ``$`` nor the place."""
    for kind, start, end, _ in lexed.tokens:
        if kind != STRING or not _F_PREFIX.match(src.text, start):
            continue
        found = _FIELD_IN_FIELD.search(src.text, start, end)
        if found is not None and not _parses(src.text[start:end]):
            field = found.group(1)
            raise src.error(
                f"`{field}` cannot be read inside an f-string",
                found.start(1),
                found.end(1),
                hint=(
                    f"`$name` is read in an autotune(...) call's arguments, outside any"
                    f" f-string: there write `str({field})`, or `'%d' % {field}`"
                ),
            )


def _parses(text: str) -> bool:
    """Whether the string token ``text`` is Python (a ``$`` in a string nested in one of its
    replacement fields, as Python 3.12 allows: ``f"{"{$y}"}"``)."""
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    return True


def _is_macro(func: ast.expr, bindings: Bindings) -> bool:
    if isinstance(func, ast.Name):
        return func.id in bindings.macro_names
    return (
        isinstance(func, ast.Attribute)
        and func.attr == MACRO_NAME
        and isinstance(func.value, ast.Name)
        and func.value.id in bindings.module_names
    )


def _bracket_depth(text: str, lexed: Lexed) -> tuple[int, int]:
    """(deepest bracket nesting, offset of the opening bracket that reaches it).

    Brackets inside f-strings count too (from 3.12 Python tokenizes their replacement
    fields, nesting included); counting every bracket of an f-string overestimates, which
    only costs a check.
    """
    depth = deepest = where = 0
    for kind, start, end, tok in lexed.tokens:
        if kind == OP:
            if tok in "([{":
                depth += 1
                if depth > deepest:
                    deepest, where = depth, start
            elif tok in ")]}":
                depth -= 1
        elif kind == STRING and _F_PREFIX.match(text, start):
            inner = 0
            for bracket in _BRACKET.finditer(text, start, end):
                inner += 1 if bracket.group() in "([{" else -1
                if depth + inner > deepest:
                    deepest, where = depth + inner, bracket.start()
    return deepest, where


_F_PREFIX = re.compile(r"[rRbB]?[fFtT]")
_BRACKET = re.compile(r"[()\[\]{}]")


def _check_text_compiles(tree: ast.Module, src: SourceText, deepest: int) -> None:
    """Reject a deeply nested module whose expanded text would not compile.

    ``compile_source`` compiles the tree, ``expand_source`` shows its text; near CPython's
    nesting limit the text can be deeper than the user's (ast.unparse adds parentheses), and
    the two must not disagree (found by tests/reliability/test_fuzz_frontend.py).
    """
    text = _unparse(tree, src.filename)
    try:
        compile(text, src.filename, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except SyntaxError as err:
        raise src.error(
            f"this expression is nested too deeply: its expanded text does not compile ({err.msg})",
            deepest,
            hint="use fewer nested brackets here (Python allows 200, and the expansion may "
            "add a level), e.g. with intermediate variables",
        ) from None
    except (RecursionError, MemoryError) as err:
        raise _too_deep(err, src.filename) from err


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
    """The expanded module as Python text (``ast.unparse``), as ``tunedsl expand`` shows it.

    A module that does not use the DSL has nothing to expand: it is shown normalised by
    ``ast.unparse`` or, where that text would not compile (ast.unparse can add a level of
    parentheses, too many at CPython's nesting limit), as written.
    """
    scanned = scan_if_dsl(source, filename)
    if scanned is not None:
        return _unparse(_expand(scanned, filename), filename)
    text = _unparse(_parse_plain(source, filename), filename)
    try:
        compile(text, filename, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, RecursionError, MemoryError):
        return _as_written(source)
    return text


# PEP 263's regular expression for a coding cookie (on one of the first two lines).
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _as_written(source: str | bytes) -> str:
    """The text of a plain module that compiled; bytes that do not decode become U+FFFD
    (compile() only tolerates them inside comments)."""
    if isinstance(source, str):
        return source
    try:
        encoding = detect_encoding(source)
    except SyntaxError:  # detect_encoding gives up on an undecodable first line
        cookies = (_COOKIE.match(line) for line in source.splitlines()[:2])
        encoding = next((m.group(1).decode() for m in cookies if m), "utf-8")
    try:
        return source.decode(encoding, errors="replace")
    except LookupError:
        return source.decode("utf-8", errors="replace")


def _unparse(tree: ast.Module, filename: str) -> str:
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
    scanned = scan_if_dsl(source, filename)
    if scanned is None:
        return compile(source, filename, "exec", dont_inherit=True, optimize=optimize)
    tree = _expand(scanned, filename)
    try:
        return compile(tree, filename, "exec", dont_inherit=True, optimize=optimize)
    except SyntaxError as err:  # e.g. `return` outside a function: Python's own check
        raise SourceText(scanned[0], filename).python_error(err) from err
    except (RecursionError, MemoryError) as err:
        raise _too_deep(err, filename) from err
