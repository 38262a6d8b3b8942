"""The lexer: strings of every shape hide `$`, brackets pair, line ends, and no tokenize."""

from __future__ import annotations

import bisect
import io
import sys
import tokenize
from pathlib import Path

import pytest

from tunedsl.frontend.lexer import DOLLAR, NAME, NEWLINE, STRING, lex


def dollars(text: str) -> list[int]:
    return [start for kind, start, _, _ in lex(text).tokens if kind == DOLLAR]


def strings(text: str) -> list[str]:
    return [text[s:e] for kind, s, e, _ in lex(text).tokens if kind == STRING]


@pytest.mark.parametrize(
    "literal",
    [
        "'$x'",
        '"$x"',
        "'''$x\n$y'''",
        '"""$x\n$y"""',
        "r'$x'",
        "R'$x'",
        "b'$x'",
        "rb'$x'",
        "Rb'$x'",
        "bR'$x'",
        "BR'$x'",
        "u'$x'",
        "'it\\'s $x'",
        "r'\\'$x'",
        '"a\\\\" ',  # an escaped backslash ends the string at the next quote
        "f'$x'",
        "F'$x'",
        "rf'$x'",
        "fR'$x'",
        "f'{a} $x {b!r:>{w}} $y'",
        "f'{a:{w}.{p}} $x'",
        "f'{{$x}}'",
        "f'{\"$x\"}'",
        "f'''{a}\n$x\n{b}'''",
        "f'\\N{DOLLAR SIGN}{a}$x'",
        "f'{a!r}$x'",
        "f'{a != b}$x'",
        "f'{a:=^10}$x'",
        "f'{x[\"k\"]}$y'",  # PEP 701: the same quote nested (3.12+)
        "f'{f'{a}$x'}$y'",  # PEP 701: nested f-string with the same quote
        "f'''{\n a  # $c\n}$x'''",  # PEP 701: a comment in a multi-line replacement field
        'f\'{ {"a": 1}["a"] }$x\'',
        "rf'\\{a}$x'",
    ],
)
def test_dollar_inside_any_string_is_text(literal: str) -> None:
    lexed = lex(literal)
    assert dollars(literal) == []
    assert strings(literal)[0] == literal.rstrip(" ")
    assert lexed.trouble is None


def test_dollar_in_comment_is_text() -> None:
    text = "x = 1  # cost $5 and $tile\ny = $z\n"
    assert dollars(text) == [text.index("$z")]


def test_dollar_tokens_are_followed_by_their_name() -> None:
    text = "f($tile, $ x, $1, a$b)"
    tokens = lex(text).tokens
    found = [(i, t) for i, t in enumerate(tokens) if t[0] == DOLLAR]
    assert [t[1] for _, t in found] == [2, 9, 14, 19]
    nxt = [tokens[i + 1] for i, _ in found]
    assert (nxt[0][0], nxt[0][3], nxt[0][1]) == (NAME, "tile", 3)
    assert nxt[1][1] == 11  # `$ x`: the name does not start right after `$`
    assert nxt[2][0] != NAME


def test_strings_next_to_dollars() -> None:
    text = "g('$a', $b, \"$c\", $d)"
    assert dollars(text) == [text.index("$b"), text.index("$d")]


def test_unicode_names_and_byte_columns_do_not_matter_to_offsets() -> None:
    text = "größe = 'é$'; $größe"
    assert dollars(text) == [text.index("$größe")]
    assert [t[3] for t in lex(text).tokens if t[0] == NAME] == ["größe", "größe"]


def test_brackets_pair_and_newlines_only_outside_brackets() -> None:
    text = "a = (1,\n  [2,\n {3: 4}])\nb = 2 \\\n + 3\n"
    lexed = lex(text)
    ops = {t[3]: i for i, t in enumerate(lexed.tokens) if t[3] in "([{)]}"}
    assert lexed.pairs[ops["("]] == ops[")"]
    assert lexed.pairs[ops["["]] == ops["]"]
    newlines = [t for t in lexed.tokens if t[0] == NEWLINE]
    assert len(newlines) == 2  # after `])` and after `+ 3`; the continuation joins lines
    assert lexed.trouble is None


@pytest.mark.parametrize(
    "text, where",
    [
        ("x = 'abc\ny = 1\n", 4),
        ("x = '''abc\n", 4),
        ("x = f'{a'\n", 4),
        ("x = (1, 2\n", 4),
        ("x = 1)\n", 5),
        ("x = (1]\n", 6),
    ],
)
def test_trouble_marks_where_the_scan_lost_track(text: str, where: int) -> None:
    assert lex(text).trouble == where


def test_crlf_and_cr_line_ends() -> None:
    text = "a = 1\r\nb = $x\rc = '$y'\r\n"
    assert dollars(text) == [text.index("$x")]
    assert sum(1 for t in lex(text).tokens if t[0] == NEWLINE) == 3


def _stdlib_files() -> list[Path]:
    root = Path(tokenize.__file__).parent
    names = ["ast.py", "dataclasses.py", "argparse.py", "string.py", "textwrap.py", "pydoc.py"]
    return [root / n for n in names if (root / n).exists()]


@pytest.mark.parametrize("path", _stdlib_files(), ids=lambda p: p.name)
def test_names_outside_strings_match_tokenize_on_real_code(path: Path) -> None:
    """On real modules, our NAME tokens are exactly tokenize's NAMEs outside strings."""
    text = path.read_text(encoding="utf-8")
    lexed = lex(text)
    assert lexed.trouble is None
    line_starts = [0]
    for line in io.StringIO(text):
        line_starts.append(line_starts[-1] + len(line))
    string_spans = [(s, e) for kind, s, e, _ in lexed.tokens if kind == STRING]
    string_starts = [s for s, _ in string_spans]

    def inside_string(offset: int) -> bool:
        k = bisect.bisect_right(string_starts, offset) - 1
        return k >= 0 and string_spans[k][1] > offset

    expected = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME:
            offset = line_starts[tok.start[0] - 1] + tok.start[1]
            if not inside_string(offset):  # 3.12+ tokenizes inside f-strings
                expected.append((offset, tok.string))
    ours = [(s, t) for kind, s, _, t in lexed.tokens if kind == NAME]
    assert ours == expected


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 701 f-strings parse on 3.12+")
def test_pep701_strings_compile_and_match_the_lexer() -> None:
    text = "x = f'{d['k']}$y' + f'{f'{a}'}'\n"
    compile(text, "<t>", "exec")
    assert strings(text) == ["f'{d['k']}$y'", "f'{f'{a}'}'"]


def test_identifiers_hold_combining_marks_and_are_normalised_as_python_does() -> None:
    text = "te\u0301 = \u2118x + \ufb01le\n"
    names = [(s, e, t) for kind, s, e, t in lex(text).tokens if kind == NAME]
    assert names == [(0, 3, "t\u00e9"), (6, 8, "\u2118x"), (11, 14, "file")]
