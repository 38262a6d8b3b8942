"""Parser layer: find the macro calls in a token stream and parse their parts with ``ast``.

The technique is a *length-preserving* rewrite, so every position Python reports is the
user's own:

* each ``$name`` becomes ``_name`` (same length); the ``Name`` node found at exactly that
  position later becomes ``<cfg>.name``;
* the text between a macro's parentheses is blanked (newlines kept, every other character
  replaced by as many spaces as it has UTF-8 bytes, so byte columns after it stay right),
  so the module parses as plain Python with ``autotune()`` in place of each macro;
* each macro argument is parsed on its own, padded so its nodes get their original
  line and column.
"""

from __future__ import annotations

import ast
import bisect
import keyword
import re
from dataclasses import dataclass, field
from typing import NoReturn

from tunedsl.frontend.bindings import MACRO_NAME, Bindings, pattern_tokens
from tunedsl.frontend.lexer import DOLLAR, NAME, OP, Lexed, Token
from tunedsl.frontend.source import SourceText

_NOT_NEWLINE = re.compile(r"[^\r\n]+")


@dataclass
class Placeholder:
    """One ``$name``: ``start`` is the offset of ``$``, ``end`` the offset after the name."""

    name: str
    start: int
    end: int


@dataclass
class MacroArg:
    """One argument of a macro call: ``keyword=value`` or the positional launch."""

    keyword: str | None
    start: int  # offset of the argument (the keyword name for a keyword argument)
    value_start: int
    value_end: int
    placeholders: list[Placeholder] = field(default_factory=list)
    node: ast.expr | None = None  # the parsed value (``$name`` still spelled ``_name``)


@dataclass
class MacroCall:
    """One ``autotune(...)`` macro call; offsets span the callee to the closing parenthesis."""

    start: int
    callee_end: int
    end: int
    inner_start: int  # just after the opening parenthesis
    inner_end: int  # at the closing parenthesis
    args: list[MacroArg] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)


@dataclass
class ParsedModule:
    """The module with its macro calls blanked, and the macro calls parsed separately."""

    module: ast.Module
    macros: list[MacroCall]
    names: frozenset[str]  # every identifier in the module (for hygiene)
    dict_rebound: bool  # the module may bind `dict`, so `dict(...)` is not surely literal


def blank(text: str) -> str:
    """Spaces for every character but line ends, as many as its UTF-8 bytes."""
    return _NOT_NEWLINE.sub(lambda m: " " * len(m.group().encode("utf-8")), text)


def parse_module(src: SourceText, lexed: Lexed, bindings: Bindings) -> ParsedModule:
    """Find and parse the macro calls, then parse the rest of the module as plain Python."""
    tokens = lexed.tokens
    text = src.text
    if lexed.trouble is not None:
        _raise_python_error(src, lexed, bindings)
    macros = find_macros(src, tokens, lexed.pairs, bindings)
    placeholders = find_placeholders(src, tokens)
    assign_placeholders(src, tokens, lexed.pairs, macros, placeholders)
    subst, module_text = _rewrite(text, macros, placeholders)
    try:
        module = ast.parse(module_text, src.filename)
    except SyntaxError as err:
        raise src.python_error(err, seen_text=module_text) from err
    _parse_arguments(src, subst, macros)
    names = frozenset(tok[3] for tok in tokens if tok[0] == NAME)
    return ParsedModule(module, macros, names, _rebinds(tokens, "dict"))


def _rewrite(
    text: str, macros: list[MacroCall], placeholders: list[Placeholder]
) -> tuple[str, str]:
    """Length-preserving rewrites: `$x` -> `_x` everywhere (``subst``); in ``module_text``
    also the macro arguments blanked."""
    pieces: list[str] = []
    last = 0
    for ph in placeholders:
        pieces.append(text[last : ph.start])
        pieces.append("_")
        last = ph.start + 1
    pieces.append(text[last:])
    subst = "".join(pieces)
    pieces = []
    last = 0
    for macro in macros:
        pieces.append(subst[last : macro.inner_start])
        pieces.append(blank(subst[macro.inner_start : macro.inner_end]))
        last = macro.inner_end
    pieces.append(subst[last:])
    return subst, "".join(pieces)


def _parse_arguments(src: SourceText, subst: str, macros: list[MacroCall]) -> None:
    """Parse every macro argument with one ``ast.parse`` of a mostly blank text.

    The text keeps each argument at its place and blanks all else, with brackets put in
    blanked places so it reads ``[[arg, arg, ...], [arg, ...], ...]``: the callee's first
    character becomes ``[`` (outer list) or ``,`` and the macro's parentheses become
    ``[`` and ``]``. Should that not give one element per argument (or not parse), each
    argument is parsed on its own, which also pins Python's error on the right one.
    """
    if not macros:
        return
    pieces: list[str] = []
    last = 0
    for k, macro in enumerate(macros):
        gap = blank(subst[last : macro.start])
        callee = blank(subst[macro.start + 1 : macro.inner_start - 1])
        if k == 0 and gap.strip("\r\n"):
            first = len(gap) - len(gap.lstrip("\r\n"))
            pieces.append(gap[:first] + "[" + gap[first + 1 :] + " " + callee)
        else:
            pieces.append(gap + ("[" if k == 0 else ",") + callee)
        pieces.append("[")
        inner = macro.inner_start
        for arg in macro.args:  # keyword names and `=` become blanks
            pieces.append(subst[inner : arg.start])
            pieces.append(blank(subst[arg.start : arg.value_start]))
            pieces.append(subst[arg.value_start : arg.value_end])
            inner = arg.value_end
        pieces.append(subst[inner : macro.inner_end])
        pieces.append("]")
        last = macro.end
    pieces.append(blank(subst[last:]))
    pieces.append("\n]")
    text = "".join(pieces)
    together: SyntaxError | None = None
    try:
        outer = ast.parse(text, src.filename, mode="eval").body
    except SyntaxError as err:
        outer, together = None, err
    if (
        isinstance(outer, ast.List)
        and len(outer.elts) == len(macros)
        and all(
            isinstance(node, ast.List) and len(node.elts) == len(macro.args)
            for node, macro in zip(outer.elts, macros, strict=True)
        )
    ):
        for node, macro in zip(outer.elts, macros, strict=True):
            for arg, value in zip(macro.args, node.elts, strict=True):  # type: ignore[attr-defined]
                arg.node = value
        return
    for macro in macros:
        for arg in macro.args:
            arg.node = parse_expression_at(src, subst, arg.value_start, arg.value_end)
    # Every argument parses alone but not as an argument (an unparenthesised `yield`, say).
    if together is not None:
        raise src.python_error(together, seen_text=text) from together
    raise src.error(  # pragma: no cover - a list of valid expressions always parses
        "cannot parse the arguments of this autotune(...) call", macros[0].start
    )


def _rebinds(tokens: list[Token], name: str) -> bool:
    """Might the module bind ``name`` (so ``name(...)`` need not be the builtin)?

    Conservative: any use other than ``name(``, ``name.`` or ``name[`` counts.
    """
    for i in [i for i, tok in enumerate(tokens) if tok[3] == name and tok[0] == NAME]:
        if i and tokens[i - 1][3] == ".":
            continue
        if i + 1 < len(tokens) and tokens[i + 1][3] in ("(", ".", "["):
            continue
        return True
    return False


def parse_expression_at(src: SourceText, subst: str, start: int, end: int) -> ast.expr:
    """Parse ``subst[start:end]`` as an expression whose nodes carry their original positions."""
    line, byte_col = src.byte_col(start)
    # Parenthesised so indentation and line breaks inside do not matter; the padding puts
    # the first character at its original line and byte column.
    if line == 1:
        padded = "(" + " " * (byte_col - 1) + subst[start:end] + "\n)"
    else:
        padded = "(" + "\n" * (line - 1) + " " * byte_col + subst[start:end] + "\n)"
    try:
        tree = ast.parse(padded, src.filename, mode="eval")
    except SyntaxError as err:
        raise src.python_error(err, seen_text=padded, clamp=(start, end)) from err
    return tree.body


def _raise_python_error(src: SourceText, lexed: Lexed, bindings: Bindings) -> NoReturn:
    """The scan lost track (unbalanced bracket, unterminated string): let Python say where.

    The macro calls that did scan are blanked and the ``$name`` rewritten first, so that
    Python reports the real problem rather than the DSL syntax it does not know.
    """
    tokens = lexed.tokens
    trouble = lexed.trouble
    assert trouble is not None
    try:
        macros = find_macros(src, tokens, lexed.pairs, bindings)
    except SyntaxError:
        macros = []
    # A macro holding the place the scan lost track of (a `]` closing a `(`) has no true
    # extent: left as written, Python names that place.
    macros = [m for m in macros if not m.start <= trouble < m.end]
    placeholders = [
        Placeholder(tokens[i + 1][3], start, tokens[i + 1][2])
        for i, (kind, start, end, _) in enumerate(tokens[:-1])
        if kind == DOLLAR and tokens[i + 1][0] == NAME and tokens[i + 1][1] == end
    ]
    subst, module_text = _rewrite(src.text, macros, placeholders)
    if macros:
        # A macro that scanned may end early through the user's own mistake (a `)` too
        # many in it): blanked, its rest would be misread. Where Python, reading the text
        # as written, stops at the very place the scan lost track, that is its first error.
        try:
            ast.parse(subst, src.filename)
        except SyntaxError as err:
            error = src.python_error(err, seen_text=subst)
            if (error.lineno, (error.offset or 0) - 1) == src.line_col(trouble):
                raise error from err
    try:
        ast.parse(module_text, src.filename)
    except SyntaxError as err:
        raise src.python_error(err, seen_text=module_text) from err
    raise src.error(
        "cannot scan this module: unbalanced bracket or unterminated string here", trouble
    )


DECORATOR_MESSAGE = "autotune(...) is no decorator: it is written where the kernel is launched"
DECORATOR_HINT = (
    "inside the function, launch the kernel through it: "
    "`autotune(space=..., blocks=..., kernel(args, FIELD=$field))` "
    "(docs/triton-autotune.md maps @triton.autotune to it)"
)


def find_macros(
    src: SourceText, tokens: list[Token], pairs: dict[int, int], bindings: Bindings
) -> list[MacroCall]:
    macros: list[MacroCall] = []
    n = len(tokens)
    open_until = -1  # token index of the closing parenthesis of the last macro found
    patterns = pattern_tokens(src.text, tokens)  # `case autotune(x=1):` calls nothing
    for i, (kind, start, _, text) in enumerate(tokens):
        if kind != NAME or i in patterns:
            continue
        prev = tokens[i - 1][3] if i else ""
        if prev in (".", "def", "class"):
            continue
        if text in bindings.macro_names:
            paren = i + 1
        elif (
            text in bindings.module_names
            and i + 3 < n
            and tokens[i + 1][3] == "."
            and tokens[i + 2][3] == MACRO_NAME
        ):
            paren = i + 3
        else:
            continue
        if paren >= n or tokens[paren][3] != "(" or tokens[paren][0] != OP:
            if prev == "@":  # a bare `@autotune` would run as a plain call and fail there
                raise src.error(DECORATOR_MESSAGE, start, tokens[paren - 1][2], DECORATOR_HINT)
            continue
        close = pairs.get(paren)
        if close is None:  # unbalanced: only when the scan lost track, reported elsewhere
            continue
        if i < open_until:
            raise src.error(
                "an autotune(...) macro cannot be used inside another one",
                start,
                tokens[paren - 1][2],
                hint="compute the value before the outer autotune(...) call",
            )
        macro = MacroCall(
            start, tokens[paren - 1][2], tokens[close][2], tokens[paren][2], tokens[close][1]
        )
        macro.args = _split_args(src, tokens, pairs, paren, close)
        macros.append(macro)
        open_until = close
    return macros


def _split_args(
    src: SourceText, tokens: list[Token], pairs: dict[int, int], paren: int, close: int
) -> list[MacroArg]:
    segments: list[tuple[int, int]] = []
    seg_start = paren + 1
    i = seg_start
    # A comma outside brackets separates arguments unless it is in a lambda's parameter
    # list (`prune=lambda cs, args: cs`): each `lambda` there waits for its own `:`.
    lambdas = 0
    while i < close:
        if i in pairs:
            i = pairs[i] + 1
            continue
        kind, _, _, text = tokens[i]
        if kind == NAME and text == "lambda":
            lambdas += 1
        elif kind == OP and text == ":" and lambdas:
            lambdas -= 1
        elif kind == OP and text == "," and not lambdas:
            segments.append((seg_start, i))
            seg_start = i + 1
        i += 1
    if seg_start < close or not segments:
        segments.append((seg_start, close))
    args: list[MacroArg] = []
    for a, b in segments:
        if a == b:
            if a == close and not segments[:-1] and a == paren + 1:
                break  # autotune(): no arguments at all
            raise SyntaxError(
                "invalid syntax",
                _details(src, tokens[b][1] if b < len(tokens) else tokens[a - 1][1]),
            )
        first = tokens[a]
        if first[0] == OP and first[3] in ("*", "**"):
            raise src.error(
                f"`{first[3]}` unpacking is not allowed in autotune(...)",
                first[1],
                first[2],
                hint="write each keyword and the kernel launch out in the call",
            )
        if a + 1 < b and first[0] == NAME and tokens[a + 1][3] == "=":
            if a + 2 == b:
                raise SyntaxError("expected an expression", _details(src, tokens[a + 1][2]))
            args.append(MacroArg(first[3], first[1], tokens[a + 2][1], tokens[b - 1][2]))
        else:
            args.append(MacroArg(None, first[1], first[1], tokens[b - 1][2]))
    return args


def _details(src: SourceText, offset: int) -> tuple[str, int, int, str]:
    line, col = src.line_col(offset)
    return (src.filename, line, col + 1, src.line_text(line) + "\n")


def find_placeholders(src: SourceText, tokens: list[Token]) -> list[Placeholder]:
    found: list[Placeholder] = []
    n = len(tokens)
    for i, (kind, start, end, _) in enumerate(tokens):
        if kind != DOLLAR:
            continue
        nxt = tokens[i + 1] if i + 1 < n else None
        if nxt is None or nxt[0] != NAME or nxt[1] != end:
            raise src.error(
                "`$` must be followed directly by the name of a configuration field",
                start,
                end,
                hint="write `$tile` for the field `tile` of the configuration being tried",
            )
        if keyword.iskeyword(nxt[3]):
            raise src.error(
                f"`${nxt[3]}`: a configuration field cannot be named like a Python keyword",
                start,
                nxt[2],
                hint="rename the field in space=",
            )
        found.append(Placeholder(nxt[3], start, nxt[2]))
    return found


def assign_placeholders(
    src: SourceText,
    tokens: list[Token],
    pairs: dict[int, int],
    macros: list[MacroCall],
    placeholders: list[Placeholder],
) -> None:
    starts = [m.start for m in macros]
    for ph in placeholders:
        k = bisect.bisect_right(starts, ph.start) - 1
        if k >= 0 and ph.start < macros[k].end:
            macro = macros[k]
            for arg in macro.args:
                if arg.value_start <= ph.start < arg.value_end:
                    arg.placeholders.append(ph)
                    macro.placeholders.append(ph)
                    break
            else:  # pragma: no cover - only commas separate arguments, and `$` is no comma
                raise src.error("`$` must be inside an argument", ph.start, ph.end)
            continue
        raise src.error(
            f"`${ph.name}` is only allowed inside an autotune(...) macro call",
            ph.start,
            ph.end,
            hint=_outside_hint(src, tokens, pairs, ph.start),
        )


def _outside_hint(src: SourceText, tokens: list[Token], pairs: dict[int, int], offset: int) -> str:
    """Say so when the `$` sits in a call of an ``autotune`` that is not tunedsl's macro,
    or in a ``case`` pattern (which calls nothing)."""
    for opener, closer in pairs.items():
        if tokens[opener][1] < offset < tokens[closer][1] and opener > 0:
            callee = tokens[opener - 1]
            if callee[0] == NAME and callee[3] == MACRO_NAME and tokens[opener][3] == "(":
                if opener in pattern_tokens(src.text, tokens):
                    return (
                        "a `case` pattern is no call: `case autotune(...)` matches instances "
                        "of a class of that name, and has no configuration to read"
                    )
                return (
                    "this `autotune` is not tunedsl's macro: bind it with "
                    "`from tunedsl import autotune` (or call `tunedsl.autotune(...)` "
                    "after `import tunedsl`)"
                )
    return "use `$name` in blocks= or in the kernel launch's arguments of autotune(...)"
