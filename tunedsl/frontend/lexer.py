"""Lexer layer: a small, linear scanner of Python source that knows about ``$``.

It is deliberately not the ``tokenize`` module: that gives ``$`` a different token type on
3.11 and 3.12, and its behaviour on invalid input is unspecified. This scanner only needs
what the macro front end needs: names, operators and brackets (with their pairs), string
extents (every prefix, triple quotes, f-strings with nested replacement fields and format
specs, PEP 701 nesting of same quotes), comments, line continuations, logical line ends
and ``$``. It never raises: text it cannot make sense of is left for Python's own parser
to report, and ``Lexed.trouble`` says where the scan lost track.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

# Token kinds (small ints: tokens are plain tuples for speed).
NAME = 1
NUMBER = 2
STRING = 3
OP = 4
DOLLAR = 5
NEWLINE = 6  # a line end outside brackets (a logical line end)

# (kind, start offset, end offset, text); text is "" for STRING, NUMBER and NEWLINE.
Token = tuple[int, int, int, str]

_TOKEN = re.compile(
    r"""[ \t\f]*(?:
      (?P<cont>\\(?:\r\n|\r|\n))
    | (?P<comment>\#[^\r\n]*)
    | (?P<nl>\r\n|\r|\n)
    | (?P<str>(?:[rR][bBfF]?|[bBfF][rR]?|[uU])?(?:'''|\"\"\"|'|\"))
    | (?P<name>[^\W\d]\w*)
    | (?P<num>\.?\d(?:[eE][+-]|[\w.])*)
    | (?P<op>\*\*=?|//=?|>>=?|<<=?|->|:=|\.\.\.|[-+*/%@&|^=!<>:]=?|[()\[\]{},;.~$])
    | (?P<other>.)
    )""",
    re.VERBOSE | re.DOTALL,
)

# Bodies of non-f strings, from after the opening quote to after the closing one.
# Unrolled loops: linear, no backtracking between alternatives.
_STRING_BODY = {
    "'": re.compile(r"[^'\\\r\n]*(?:\\(?:\r\n|[\s\S])[^'\\\r\n]*)*'"),
    '"': re.compile(r'[^"\\\r\n]*(?:\\(?:\r\n|[\s\S])[^"\\\r\n]*)*"'),
    "'''": re.compile(r"[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''"),
    '"""': re.compile(r'[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""'),
}

# Characters that matter in the literal part of an f-string (and of a format spec).
_FSTRING_SPECIAL = {
    "'": re.compile(r"[{}\\'\r\n]"),
    '"': re.compile(r'[{}\\"\r\n]'),
    "'''": re.compile(r"[{}\\']"),
    '"""': re.compile(r'[{}\\"]'),
}

_OPENERS = {"(": ")", "[": "]", "{": "}"}


@dataclass
class Lexed:
    """The scan of one module."""

    tokens: list[Token]
    # index of an opening bracket token -> index of its closing token
    pairs: dict[int, int] = field(default_factory=dict)
    # offset where the scan lost track (unterminated string, unbalanced bracket, a backslash
    # not before a line end), or None
    trouble: int | None = None


def lex(text: str) -> Lexed:
    """Scan ``text`` into tokens. Linear in the length of the text; never raises."""
    tokens: list[Token] = []
    append = tokens.append
    pairs: dict[int, int] = {}
    stack: list[int] = []
    trouble: int | None = None
    match = _TOKEN.match
    pos = 0
    n = len(text)
    while pos < n:
        m = match(text, pos)
        if m is None:  # only trailing blanks are left
            break
        kind = m.lastgroup
        start = m.start(kind)  # type: ignore[arg-type]
        end = m.end()
        if kind == "name":
            name = m.group(kind)  # type: ignore[arg-type]
            if not name.isascii() or (end < n and not text[end].isascii()):
                end, name = _identifier(text, start, end)
            append((NAME, start, end, name))
        elif kind == "op":
            op = m.group(kind)  # type: ignore[arg-type]
            if op in _OPENERS:
                stack.append(len(tokens))
            elif op in ")]}":
                if stack:
                    opener = stack.pop()
                    if _OPENERS[tokens[opener][3]] != op and trouble is None:
                        trouble = start
                    pairs[opener] = len(tokens)
                elif trouble is None:
                    trouble = start
            append((DOLLAR if op == "$" else OP, start, end, op))
        elif kind == "str":
            prefix = m.group(kind)  # type: ignore[arg-type]
            letters = len(prefix.rstrip("'\""))
            if letters and tokens and tokens[-1][0] == DOLLAR and tokens[-1][2] == start:
                # `$f'...'` is the field `$f` before a string, as `_f'...'` reads in Python
                # (not `$` before an f-string, which Python 3.12 reports differently).
                append((NAME, start, start + letters, prefix[:letters]))
                pos = start + letters
                continue
            try:
                end = scan_string(text, end, prefix)
            except RecursionError:  # f-strings nested hundreds deep: Python's to report
                end = -1
            if end < 0:
                if trouble is None:
                    trouble = start
                end = n
            append((STRING, start, end, ""))
        elif kind == "nl":
            if not stack:
                append((NEWLINE, start, end, ""))
        elif kind == "num":
            append((NUMBER, start, end, ""))
        elif kind == "other":
            other = m.group(kind)  # type: ignore[arg-type]
            if other == "\\" and trouble is None:  # not before a line end: Python's error
                trouble = start
            if other.isidentifier():  # an identifier's first letter that is no \w (℘)
                end, other = _identifier(text, start, end)
                append((NAME, start, end, other))
            else:
                append((OP, start, end, other))
        # "cont" and "comment" produce no token
        pos = end
    if stack and trouble is None:
        trouble = tokens[stack[-1]][1]
    return Lexed(tokens, pairs, trouble)


_WORD = re.compile(r"\w*")


def _identifier(text: str, start: int, end: int) -> tuple[int, str]:
    """(end, name) of the identifier at ``start`` whose ``\\w`` characters end at ``end``.

    Python's identifiers also hold combining marks (a decomposed ``é`` is ``e`` and U+0301),
    which ``\\w`` does not match, and Python reads them normalised (NFKC): ``ﬁle`` is
    ``file``. So does this scanner, so that ``$té`` names the field Python's parse names.
    """
    n = len(text)
    end = _WORD.match(text, end).end()  # type: ignore[union-attr]
    while end < n and not text[end].isascii() and ("_" + text[end]).isidentifier():
        end = _WORD.match(text, end + 1).end()  # type: ignore[union-attr]
    return end, unicodedata.normalize("NFKC", text[start:end])


def scan_string(text: str, pos: int, opening: str) -> int:
    """End offset of the string whose opening (prefix and quotes) ends at ``pos``; -1 if open."""
    quote = opening[-3:] if opening.endswith(("'''", '"""')) else opening[-1]
    prefix = opening[: len(opening) - len(quote)].lower()
    if "f" in prefix:
        return _scan_fstring_part(text, pos, quote, "r" in prefix, in_spec=False)
    m = _STRING_BODY[quote].match(text, pos)
    return -1 if m is None else m.end()


def _scan_fstring_part(text: str, pos: int, quote: str, raw: bool, *, in_spec: bool) -> int:
    """Scan literal f-string text (or a format spec when ``in_spec``) to its end.

    Returns the offset after the closing quote (or, in a format spec, after the ``}``
    closing the replacement field), or -1 when the text ends first.
    """
    special = _FSTRING_SPECIAL[quote].search
    q = quote[0]
    i = pos
    while True:
        m = special(text, i)
        if m is None:
            return -1
        i = m.start()
        c = text[i]
        if c == q:
            if in_spec:
                return -1  # the string closes inside a replacement field: Python reports it
            if len(quote) == 1:
                return i + 1
            if text.startswith(quote, i):
                return i + 3
            i += 1
        elif c == "\\":
            if not raw and text.startswith("N{", i + 1):  # \N{NAME} is not a field
                close = text.find("}", i + 3)
                if close < 0:
                    return -1
                i = close + 1
            elif text.startswith("\r\n", i + 1):
                i += 3
            else:
                i += 2 if i + 1 < len(text) and text[i + 1] in (q, "\\", "\r", "\n") else 1
        elif c == "{":
            if not in_spec and text.startswith("{{", i):
                i += 2
                continue
            i = _scan_field(text, i + 1, quote, raw)
            if i < 0:
                return -1
        elif c == "}":
            if in_spec:
                return i + 1
            i += 2 if text.startswith("}}", i) else 1  # a lone '}' is Python's error
        else:  # a line end in a single-quoted string
            return -1


def _scan_field(text: str, pos: int, quote: str, raw: bool) -> int:
    """Scan a replacement field's expression (PEP 701 rules) to after its closing ``}``."""
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        m = _TOKEN.match(text, i)
        if m is None:
            return -1
        kind = m.lastgroup
        end = m.end()
        if kind == "str":
            end = scan_string(text, end, m.group(kind))  # type: ignore[arg-type]
            if end < 0:
                return -1
        elif kind == "op" or kind == "other":
            op = m.group(kind)  # type: ignore[arg-type]
            if op in _OPENERS:
                depth += 1
            elif op in ")]":
                depth -= 1
            elif op == "}":
                if depth <= 0:
                    return end
                depth -= 1
            elif depth <= 0 and op[0] == ":":  # ':' (and ':=') at depth 0 starts the spec
                return _scan_fstring_part(text, m.start(kind) + 1, quote, raw, in_spec=True)  # type: ignore[arg-type]
        i = end
    return -1
