"""A hypothesis strategy of whole kernel scripts: ``autotune(...)`` sites embedded in varied
Python (decorators, nested defs, classes, lambdas, comprehensions, f-strings, walrus,
``match``, async, type hints, ``$`` in strings, comments and bytes, line continuations, tabs,
CRLF, a BOM, a coding cookie, non-ASCII identifiers, very long lines).

A drawn ``Script`` knows where its sites are (character offsets into its decoded text), so a
test can check the expansion against the text outside them.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from hypothesis import strategies as st

HEADER = "from tunedsl import autotune, cdiv\nimport tunedsl as td\n"
INDENT = "\x01"  # one level of indentation: four spaces or a tab, per script

# A site is written with `{S}` in a context; `{I}` is the indentation of continuation lines.
CONTEXTS = (
    "x = {S}\n",
    "def f(a, n):\n\x01return {S}\n",
    "@deco(1)\n@other\ndef f(a, n: int = 3, *args: str, **kw: 'T') -> dict[str, int]:\n"
    "\x01ys = [{S} for a in xs if a]\n\x01return ys\n",
    "class C(Base, metaclass=M):\n\x01'''doc $x'''\n\x01attr: int = 1\n\n"
    "\x01def m(self, a, n):\n\x01\x01return {S}\n",
    "g = lambda a, n: {S}\n",
    "async def f(a, n):\n\x01await other()\n\x01async with lock:\n\x01\x01return {S}\n",
    "if (w := 3) > 2:\n\x01r = {S}\nelse:\n\x01r = None\n",
    "match v:\n\x01case [1, *_]:\n\x01\x01r = {S}\n\x01case {{'k': _}}:\n\x01\x01pass\n",
    # Class patterns named like the macro are no calls; the guard is an expression.
    "match v:\n\x01case autotune(x=1) | td.autotune(y=[1, 2]) if {S}:\n\x01\x01pass\n"
    "\x01case {{'k': autotune()}}:\n\x01\x01pass\n",
    "def outer(a, n):\n\x01def inner():\n\x01\x01y = {S}\n\x01\x01return y\n\x01return inner\n",
    "r = (1 +\n     {S})\n",
    "r = 1 + \\\n\x01{S}\n",
    "d = {{'k': {S}, 'j': [i for i in range(3)]}}\n",
    "try:\n\x01pass\nexcept ValueError:\n\x01pass\nfinally:\n\x01z = {S}\n",
    "s = {{{S}}}; t = 1\n",
    "class K:\n\x01attr = {S}\n",
    "while {S}:\n\x01break\n",
    "assert x, {S}\n",
    "with {S} as (p, q):\n\x01pass\n",
    "for i in {S}:\n\x01del d[{S}]\n",
    "def gen(a, n):\n\x01yield {S}\n\x01x += {S}\n\x01print(*{S}, sep={S})\n",
    "h = [lambda a=1, n=2: {S} for _ in range(2)]\n",
    "v: 'int' = f(x={S})[{S}:{S}]\n",
    "q = 1 < {S} <= 3 if {S} else not {S}\n",
)
if sys.version_info >= (3, 11):
    CONTEXTS += ("try:\n\x01pass\nexcept* ValueError:\n\x01z = {S}\n",)

FILLERS = (
    's = "costs $5 # not a comment"\n',
    "b = b'$x\\x00' + rb'\\$'\n",
    "# a comment with $tile and autotune(space=...) in it\n",
    "fs = f\"{a!r:>{w}} $x {{$y}} {b['k']}\"\n",
    'fq = f\'{x["$k"]:{"$"}<4}\'\n',
    't = """multi\n$line\nautotune(x)\n"""\n',
    "é_var = 'ünïcödé'; 漢字 = '漢字'; ω = \"e\u0301\"\n",
    "ne\u0301 = \ufb01le = 1  # identifiers Python normalises (NFKC)\n",
    "def h(x: list[int] | None = None) -> dict[str, int]:\n\x01return {}\n",
    "y = [i for i in range(3) if (j := i)]\n",
    "z = lambda q=1, *r, s=2: q  # $ in a comment\n",
    "w = 1 + \\\n  2\n",
    "async def ag():\n\x01async for i in x:\n\x01\x01yield i\n",
    "@dataclass(frozen=True)\nclass D:\n\x01a: int = 0\n",
    "with open(p) as fh, ctx() as (u, v):\n\x01pass\n",
    "long_line = '" + "$x " * 700 + "'\n",
    "e = {k: v for k, v in zip('ab', b'$c')}\n",
    "match v:\n\x01case autotune(x=1, y=[1, 2]) | td.autotune():\n\x01\x01pass\n",
)
if sys.version_info >= (3, 12):  # PEP 701: the same quotes nested inside an f-string
    FILLERS += ('nq = f"{"$x" + f"{"{$y}"}"}"\n', "type Alias = list[int]\n")

# Launch arguments: plain Python, some with `$` as text, and the configuration fields.
PLAIN_ARGS = (
    "a",
    "'$x'",
    '"cost $5"',
    "b'$'",
    "f'{a} $t'",
    "'漢字e\u0301'",
    "é",
    "[i for i in xs]",
    "lambda q: q",
    "(m := 2)",
    "x if y else z",
)
DSL_ARGS = ("$t", "$t * 2", "cdiv(n, $t)", "[$t, $w]", "f($w)")


@dataclass(frozen=True)
class Script:
    """A drawn script: its text, the bytes given to the front end, and its sites."""

    text: str  # as Python reads it (decoded)
    data: bytes  # what is compiled (maybe a BOM or a coding cookie)
    sites: tuple[tuple[int, int], ...]  # (start, end) character offsets of each site


@st.composite
def sites(draw: st.DrawFn, error: bool = False) -> str:
    """One ``autotune(...)`` call; with ``error``, its last launch argument reads `$tq`."""
    sep = draw(st.sampled_from([", ", ",\n{I}", ",  # $t here\n{I}", ",\\\n{I}", " ,\t"]))
    plain = draw(st.lists(st.sampled_from(PLAIN_ARGS), max_size=3))
    dsl = draw(st.lists(st.sampled_from(DSL_ARGS), max_size=2))
    launch_args = [*plain, *dsl, "T=$t", "W=$w"]
    if error:
        launch_args.append("Q=$tq")
    kernel = draw(st.sampled_from(["k", "ks.vadd", "ks[0]", "κ"]))
    launch = f"{kernel}({', '.join(launch_args)})"
    spaces = ["dict(t=[1, 2], w=[4, 8])", "{'t': [1, 2], 'w': [4]}", "[{'t': 1, 'w': 2}]"]
    # A space the front end cannot read is checked on the first call, not at compile time.
    space = draw(st.sampled_from(spaces if error else [*spaces, "SPACE"]))
    blocks = draw(st.sampled_from(["cdiv(n, $t)", "($t, 2)", "1", "(cdiv(n,\n{I}$t),)"]))
    parts = [f"space={space}", f"blocks={blocks}", launch]
    for name in draw(st.lists(st.sampled_from(["key", "num_stages", "name"]), unique=True)):
        parts.append(
            {"key": "key=n // 1024", "num_stages": "num_stages=2", "name": "name='$t'"}[name]
        )
    if error:  # the launch last: the error then follows the wide characters on its line
        parts.remove(launch)
        parts = [*draw(st.permutations(parts)), launch]
    else:
        parts = list(draw(st.permutations(parts)))
    callee = draw(st.sampled_from(["autotune", "td.autotune"]))
    trailing = draw(st.sampled_from(["", ","]))
    return f"{callee}({sep.join(parts)}{trailing})"


@st.composite
def scripts(draw: st.DrawFn, error: bool = False) -> Script:
    """A module of fillers and sites; with ``error``, exactly one site reads `$tq`."""
    contexts = draw(st.lists(st.sampled_from(CONTEXTS), min_size=1, max_size=3))
    n_sites = sum(context.count("{S}") for context in contexts)
    error_at = draw(st.integers(0, n_sites - 1)) if error else -1
    pieces: list[tuple[str, bool]] = []  # (text, is a site)
    k = 0
    for context in contexts:
        for filler in draw(st.lists(st.sampled_from(FILLERS), max_size=2)):
            pieces.append((filler, False))
        texts = [t.replace("{{", "{").replace("}}", "}") for t in context.split("{S}")]
        pieces.append((texts[0], False))
        for after in texts[1:]:
            level = "".join(p for p, _ in pieces).rsplit("\n", 1)[-1].count(INDENT)
            site = draw(sites(error=k == error_at))
            pieces.append((site.replace("{I}", INDENT * (level + 1) + "  "), True))
            pieces.append((after, False))
            k += 1
    for filler in draw(st.lists(st.sampled_from(FILLERS), max_size=2)):
        pieces.append((filler, False))

    indent = draw(st.sampled_from(["    ", "\t"]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    start = draw(st.sampled_from(["", "bom", "cookie", "docstring"]))
    first = {
        "": "",
        "bom": "",
        "cookie": "# -*- coding: utf-8 -*-\n",
        "docstring": '"""A module docstring with $x."""\nfrom __future__ import annotations\n',
    }[start]
    text = ""
    offsets: list[tuple[int, int]] = []
    for piece, is_site in [(first + HEADER, False), *pieces]:
        piece = piece.replace(INDENT, indent).replace("\n", newline)
        if is_site:
            offsets.append((len(text), len(text) + len(piece)))
        text += piece
    data = ("\ufeff" if start == "bom" else "").encode() + text.encode("utf-8")
    return Script(text, data, tuple(offsets))


_NOT_NEWLINE = re.compile(r"[^\r\n]")


def reference_text(script: Script) -> str:
    """The script with each site replaced by a plain call of the same length in UTF-8 bytes
    and lines: ``_S______(<blanks>)``, so its nodes sit where the site's do."""
    text = script.text
    out: list[str] = []
    last = 0
    for start, end in script.sites:
        site = text[start:end]
        paren = site.index("(")
        inner = _NOT_NEWLINE.sub(
            lambda m: " " * len(m.group().encode("utf-8")), site[paren + 1 : -1]
        )
        out += [text[last:start], "_S" + "_" * (paren - 2), "(", inner, ")"]
        last = end
    out.append(text[last:])
    return "".join(out)
