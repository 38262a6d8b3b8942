"""Public API of the front end (temporary pass-through: expansion not implemented yet)."""

from __future__ import annotations

import ast
import io
import tokenize
import types

__all__ = ["compile_source", "expand_source", "expand_to_ast", "needs_expansion"]


def _text(source: str | bytes) -> str:
    if isinstance(source, bytes):
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return source.decode(encoding)
    return source


def needs_expansion(source: str | bytes) -> bool:
    text = _text(source)
    return "tunedsl" in text and "autotune" in text


def expand_to_ast(source: str | bytes, filename: str = "<string>") -> ast.Module:
    return ast.parse(_text(source), filename)


def expand_source(source: str | bytes, filename: str = "<string>") -> str:
    return ast.unparse(expand_to_ast(source, filename))


def compile_source(
    source: str | bytes, filename: str = "<string>", *, optimize: int = -1
) -> types.CodeType:
    return compile(source, filename, "exec", dont_inherit=True, optimize=optimize)
