"""Every DSL error names file, line and column with the source line, a caret and a hint;
plain Python errors keep Python's own message and position."""

from __future__ import annotations

import ast
import pickle
import sys

import pytest

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.compile import compile_source, expand_source

HEADER = "from tunedsl import autotune, cdiv\n"
S = "space=dict(tile=[256, 512], num_warps=[4])"


def dsl_error(body: str) -> TunedslSyntaxError:
    with pytest.raises(TunedslSyntaxError) as info:
        compile_source(HEADER + body, "/w/kern.py")
    return info.value


# (name, body after the header, message part, line, 0-based column of the caret, hint part)
CASES = [
    (
        # Triton's launch form ported as is: the error asked for blocks=, then, given it,
        # forbade `$` in "the kernel expression", neither saying where the grid goes.
        "triton's kernel[grid](args) launch",
        f"autotune({S}, blocks=cdiv(n, $tile), k[(cdiv(n, $tile),)](a, TILE=$tile))\n",
        "Triton's `kernel[grid](...)` launch: in autotune(...) the grid is `blocks=`",
        2,
        "(cdiv(n, $tile),)",
        "`blocks=(cdiv(n, $tile),), k(...)`",
    ),
    (
        "triton's launch form without blocks=",
        f"autotune({S}, k[lambda meta: (n,)](a, TILE=$tile))\n",
        "the grid is `blocks=`",
        2,
        "lambda meta: (n,)",
        "the launch without the brackets",
    ),
    (
        "autotune as a decorator, as @triton.autotune",
        f"@autotune({S})\ndef f(a):\n    pass\n",
        "autotune(...) is no decorator",
        2,
        "autotune",
        "docs/triton-autotune.md",
    ),
    (
        # A bare decorator expanded to nothing: `expand --check` said ok and the module then
        # failed, under `tunedsl run`, with "this module was not expanded".
        "bare @autotune decorator",
        "@autotune\n@triton.jit\ndef k(x, BLOCK: tl.constexpr):\n    pass\n",
        "autotune(...) is no decorator",
        2,
        "autotune",
        "docs/triton-autotune.md",
    ),
    (
        "bare @tunedsl.autotune decorator",
        "import tunedsl\n@tunedsl.autotune\ndef k(x):\n    pass\n",
        "autotune(...) is no decorator",
        3,
        "tunedsl.autotune",
        "docs/triton-autotune.md",
    ),
    (
        # One token to the lexer: the field was never read, and Python's error (f-string:
        # invalid syntax) stood under the kernel's name.
        "dollar in an f-string's replacement field",
        'autotune(space=dict(t=[1, 2]), blocks=1, k(a, T=f"v{$t}"))\n',
        "`$t` cannot be read inside an f-string",
        2,
        "$t",
        "`str($t)`",
    ),
    (
        # Outside any macro as well: the hint must not offer `str($t)` in the same place.
        "dollar in an f-string outside a macro",
        'print(f"tile is {$t}")\n',
        "`$t` cannot be read inside an f-string",
        2,
        "$t",
        "autotune(...) call's arguments",
    ),
    (
        "dollar outside a macro",
        "x = $tile + 1\n",
        "`$tile` is only allowed inside an autotune(...) macro call",
        2,
        "$tile",
        "blocks=",
    ),
    (
        "dollar outside, deeper",
        "def f(n):\n    return g(n, $tile)\n",
        "`$tile` is only allowed inside",
        3,
        "$tile",
        None,
    ),
    (
        "dollar without a name",
        f"autotune({S}, blocks=$ tile, k(a))\n",
        "`$` must be followed directly by the name",
        2,
        "$ tile",
        "`$tile`",
    ),
    (
        "dollar before a number",
        f"autotune({S}, blocks=$1, k(a))\n",
        "`$` must be followed directly",
        2,
        "$1",
        None,
    ),
    (
        "dollar keyword name",
        f"autotune({S}, blocks=$if, k(a))\n",
        "cannot be named like a Python keyword",
        2,
        "$if",
        None,
    ),
    (
        "unknown field",
        f"autotune({S}, blocks=cdiv(n, $tle), k(a))\n",
        "`$tle` is not a field of `space=`",
        2,
        "$tle",
        "did you mean `$tile`?",
    ),
    (
        "a field some configurations of a literal list space lack",
        "autotune(space=[dict(tile=16), {'num_warps': 2}], blocks=cdiv(n, $tile), k(a))\n",
        "`$tile` is not a field of every configuration: Config(num_warps=2) has none",
        2,
        "$tile",
        "give every configuration of the list space a `tile`",
    ),
    (
        "unknown field, no close match",
        f"autotune({S}, blocks=1, k($zzz))\n",
        "`$zzz` is not a field",
        2,
        "$zzz",
        "`tile`, `num_warps`",
    ),
    (
        "missing space",
        "autotune(blocks=1, k(a))\n",
        "autotune(...) needs `space=`",
        2,
        "autotune",
        "space=dict(",
    ),
    (
        "missing blocks",
        f"autotune({S}, k(a))\n",
        "autotune(...) needs `blocks=`",
        2,
        "autotune",
        "blocks=cdiv(n, $tile)",
    ),
    (
        "no launch",
        f"autotune({S}, blocks=1)\n",
        "needs the kernel launch",
        2,
        "autotune",
        "TILE=$tile",
    ),
    (
        "two launches",
        f"autotune({S}, blocks=1, k(a), k(b))\n",
        "exactly one positional argument",
        2,
        "k(b)",
        None,
    ),
    (
        "launch not a call",
        f"autotune({S}, blocks=1, k)\n",
        "must be a call of the kernel",
        2,
        "k)",
        None,
    ),
    (
        "kernel not a name",
        f"autotune({S}, blocks=1, make()(a))\n",
        "kernel of the launch must be a name",
        2,
        "make()",
        "bind a computed kernel",
    ),
    (
        "unknown keyword",
        f"autotune({S}, blocks=1, num_warp=4, k(a))\n",
        "unknown keyword `num_warp=`",
        2,
        "num_warp=",
        "did you mean `num_warps=`?",
    ),
    (
        "unknown keyword, far",
        f"autotune({S}, blocks=1, zzz=4, k(a))\n",
        "unknown keyword `zzz=`",
        2,
        "zzz",
        "accepts: space, blocks",
    ),
    (
        "grid= as Triton's launch spells it",
        f"autotune({S}, grid=(1,), k(a))\n",
        "unknown keyword `grid=`",
        2,
        "grid",
        "the grid is `blocks=` in autotune(...)",
    ),
    (
        "repeated keyword",
        f"autotune({S}, blocks=1, blocks=2, k(a))\n",
        "keyword argument repeated: `blocks=`",
        2,
        "blocks=2",
        None,
    ),
    (
        "hint conflict",
        f"autotune({S}, blocks=1, num_warps=8, k(a))\n",
        "`num_warps=` is given both as a static hint and as a field",
        2,
        "num_warps=8",
        "remove",
    ),
    (
        "misspelled hint as a space field",
        "autotune(space=dict(tile=[256, 512], num_warp=[4, 8]), blocks=cdiv(n, $tile),\n"
        "         k(a, TILE=$tile))\n",
        "space= field `num_warp` is read by nothing in the launch",
        2,
        "num_warp=[4, 8]",
        "did you mean the launch hint `num_warps`?",
    ),
    (
        "space field nothing reads",
        "autotune(space={'tile': [256, 512], 'split': [1, 2]}, blocks=cdiv(n, $tile),\n"
        "         k(a, TILE=$tile))\n",
        "space= field `split` is read by nothing in the launch",
        2,
        "'split'",
        "`SPLIT=$split`",
    ),
    (
        "blocks of four",
        f"autotune({S}, blocks=(1, 2, 3, 4), k(a))\n",
        "blocks= must be an int or a tuple of one to three ints",
        2,
        "(1, 2, 3, 4)",
        "three dimensions",
    ),
    (
        "blocks empty tuple",
        f"autotune({S}, blocks=(), k(a))\n",
        "this tuple has 0 elements",
        2,
        "()",
        "one to three dimensions",
    ),
    (
        "blocks a list display",
        f"autotune({S}, blocks=[cdiv(n, $tile)], k(a))\n",
        "blocks= must be an int or a tuple of one to three ints; this is a list",
        2,
        "[cdiv",
        "blocks=(cdiv(n, $tile),)",
    ),
    (
        "blocks a string",
        f"autotune({S}, blocks='x', k(a))\n",
        "blocks= must be an int",
        2,
        "'x'",
        None,
    ),
    (
        "dollar in space",
        "autotune(space=dict(tile=[$t]), blocks=1, k(a))\n",
        "`$t` is not allowed in `space=`",
        2,
        "$t",
        "only be used in blocks=",
    ),
    (
        "dollar in key",
        f"autotune({S}, blocks=1, key=$tile, k(a))\n",
        "`$tile` is not allowed in `key=`",
        2,
        "$tile",
        None,
    ),
    (
        "dollar in a hint",
        "autotune(space=dict(t=[1]), blocks=1, num_stages=$t, k(a))\n",
        "`$t` is not allowed in `num_stages=`",
        2,
        "$t",
        None,
    ),
    (
        "dollar in an option",
        "autotune(space=dict(t=[1]), blocks=1, verify=f($t), k(a))\n",
        "`$t` is not allowed in `verify=`",
        2,
        "$t",
        None,
    ),
    (
        "dollar in the kernel",
        f"autotune({S}, blocks=1, ks[$tile](a))\n",
        "not allowed in the kernel expression",
        2,
        "$tile",
        None,
    ),
    (
        "dollar assigned",
        f"autotune({S}, blocks=1, k(($tile := 3)))\n",
        "cannot be assigned to",
        2,
        "$tile",
        None,
    ),
    (
        "dollar as a keyword name",
        f"autotune({S}, blocks=1, k($tile=3))\n",
        "can only be used as a value",
        2,
        "$tile",
        None,
    ),
    (
        "await with a placeholder",
        f"async def f():\n    autotune({S}, blocks=1, k(await g($tile)))\n",
        "`await` cannot be used in an expression that uses `$name`",
        3,
        "await g(",
        "once per configuration",
    ),
    (
        "walrus with a placeholder",
        f"autotune({S}, blocks=(y := $tile), k(a))\n",
        "`:=` cannot be used",
        2,
        "y := $tile",
        None,
    ),
    (
        "yield in a lazy option",
        "def f():\n    autotune(space=S, blocks=1, verify=(yield), k(a))\n",
        "`yield` cannot be used in `verify=`",
        3,
        "yield",
        "when the site tunes",
    ),
    (
        "super() with a placeholder",
        "class K:\n    def f(self):\n        autotune(space=S, blocks=1, k(super().x + $t))\n",
        "argument-less `super()` cannot be used in an expression that uses `$name`",
        4,
        "super()",
        None,
    ),
    (
        "star in macro",
        f"autotune(*xs, {S}, blocks=1, k(a))\n",
        "`*` unpacking is not allowed",
        2,
        "*xs",
        None,
    ),
    (
        "double star in macro",
        f"autotune({S}, blocks=1, k(a), **o)\n",
        "`**` unpacking is not allowed",
        2,
        "**o",
        None,
    ),
    (
        "star launch arg with dollar",
        f"autotune({S}, blocks=1, k(*[$tile]))\n",
        "unpacked",
        2,
        "*[$tile]",
        None,
    ),
    (
        "nested macro",
        f"autotune({S}, blocks=1, k(autotune(space=T, blocks=1, k(a))))\n",
        "cannot be used inside another",
        2,
        "autotune(space=T",
        None,
    ),
    (
        # `$` cannot read such a field: the error said to pass `BLOCK-SIZE=$block-size`, or
        # (for a `$block` in the launch) "did you mean `$block-size`?"
        "field name that is no identifier",
        "autotune(space={'block-size': [64, 128]}, blocks=$block, k(a, T=$block))\n",
        "space= field `block-size` cannot be read by a `$name`",
        2,
        "'block-size'",
        "`block_size`",
    ),
    (
        # Accepted here, refused on the first call.
        "field name starting with an underscore",
        "autotune(space=[{'tile': 4, '_n': 1}], blocks=$tile, k(a, T=$tile))\n",
        "space= field `_n` cannot be read by a `$name`",
        2,
        "'_n'",
        "`n`",
    ),
    (
        "unread field named like a keyword",
        "autotune(space={'tile': [4], 'class': [1, 2]}, blocks=$tile, k(a, T=$tile))\n",
        "space= field `class` is read by nothing",
        2,
        "'class'",
        "cannot read a field named like a Python keyword: rename it (e.g. `class_`)",
    ),
    (
        # An f-string is one token to the lexer: the call was left as a plain call of
        # tunedsl.autotune, which at run time said the module had not been expanded.
        "macro in an f-string",
        f"print(f'tuned: {{autotune(k(a, T=4), {S}, blocks=1)!r:>8}}')\n",
        "cannot be used inside an f-string",
        2,
        "autotune(k",
        "r = autotune(...)",
    ),
    (
        "macro by module in an f-string",
        f'import tunedsl\nx = f"""\n  {{tunedsl.autotune(k(a), {S}, blocks=1)}}"""\n',
        "cannot be used inside an f-string",
        4,
        "tunedsl.autotune",
        None,
    ),
]


@pytest.mark.parametrize(
    "name, body, message, line, anchor, hint", CASES, ids=[c[0] for c in CASES]
)
def test_dsl_errors(
    name: str, body: str, message: str, line: int, anchor: str, hint: str | None
) -> None:
    err = dsl_error(body)
    assert message in err.msg_only
    source_line = (HEADER + body).splitlines()[line - 1]
    col = source_line.index(anchor)
    assert (err.filename, err.lineno, err.col, err.offset) == ("/w/kern.py", line, col, col + 1)
    assert err.text == source_line
    if hint is not None:
        assert err.hint is not None and hint in err.hint
    rendered = str(err)
    first, shown, caret = rendered.splitlines()[:3]
    assert first.startswith(f"/w/kern.py:{line}:{col + 1}: error: ")
    assert shown == "    " + source_line
    assert caret.startswith("    " + " " * col + "^")
    assert isinstance(err, SyntaxError)


# A literal static hint the runtime refuses on the first call (model/hints.py) is refused
# when the module is compiled, with the runtime's own message (`tunedsl expand --check`
# passed `num_warps=[2, 4]`, which failed on the first call).
STATIC_HINTS = [
    ("num_warps", "[2, 4]"),
    ("num_warps", "(2, 4)"),
    ("num_stages", "[2, 3]"),
    ("num_warps", "3"),
    ("num_warps", "0"),
    ("maxnreg", "-1"),
    ("num_warps", "True"),
    ("num_warps", "2.0"),
    ("num_warps", "'4'"),
    ("occupancy", "0"),
]


@pytest.mark.parametrize(("name", "text"), STATIC_HINTS, ids=[f"{n}={t}" for n, t in STATIC_HINTS])
def test_a_literal_static_hint_the_runtime_refuses_is_refused_with_its_message(
    name: str, text: str
) -> None:
    from tunedsl.errors import UsageError
    from tunedsl.model.config import Config
    from tunedsl.model.hints import hint_fields

    with pytest.raises(UsageError) as runtime:
        hint_fields(Config(tile=256), {name: ast.literal_eval(text)})
    err = dsl_error(
        f"autotune(space=dict(tile=[256, 512]), blocks=1, {name}={text}, k(a, T=$tile))\n"
    )
    assert err.msg_only == str(runtime.value)
    assert err.lineno == 2 and err.col is not None and err.text is not None
    assert err.text[err.col : err.col + len(text)] == text


@pytest.mark.parametrize("text", ["4", "0", "None"])
def test_a_literal_static_hint_the_runtime_takes_compiles(text: str) -> None:
    name = "num_stages" if text == "0" else "num_warps"
    code = compile_source(
        HEADER + f"autotune(space=dict(tile=[256, 512]), blocks=1, {name}={text}, k(a, T=$tile))\n",
        "/w/kern.py",
    )
    assert code is not None


# The same for a value of a literal space's launch-hint field: the runtime refused it on the
# first call (`space=dict(tile=[256], num_warps=[3, 4])` passed `expand --check`).
SPACE_HINTS = [
    ("dict(tile=[256], num_warps=[3, 4])", "num_warps", "3"),
    ("{'tile': [256], 'num_stages': (2, -1)}", "num_stages", "-1"),
    ("[dict(tile=256, num_warps=4), dict(tile=512, num_warps=0)]", "num_warps", "0"),
    ("dict(tile=[256], maxnreg=[None, 2.5])", "maxnreg", "2.5"),
]


@pytest.mark.parametrize(("space", "name", "text"), SPACE_HINTS, ids=[s for s, _, _ in SPACE_HINTS])
def test_a_literal_space_hint_value_the_runtime_refuses_is_refused_with_its_message(
    space: str, name: str, text: str
) -> None:
    from tunedsl.errors import UsageError
    from tunedsl.model.config import Config
    from tunedsl.model.hints import hint_fields

    with pytest.raises(UsageError) as runtime:
        hint_fields(Config(tile=256, **{name: ast.literal_eval(text)}), {})
    err = dsl_error(f"autotune(space={space}, blocks=1, k(a, T=$tile))\n")
    assert err.msg_only == str(runtime.value)
    assert err.lineno == 2 and err.col is not None and err.text is not None
    assert err.text[err.col : err.col + len(text)] == text


def test_a_space_hint_value_a_prune_may_drop_is_left_to_the_runtime() -> None:
    body = "autotune(space=dict(tile=[256], num_warps=[3, 4]), blocks=1, prune=p, k(a, T=$tile))\n"
    assert compile_source(HEADER + body, "/w/kern.py") is not None


# A literal option naming a choice the runtime refuses (model/settings.py): refused when
# the module is compiled, with the runtime's message (`capture="defualt"` passed
# `expand --check` and raised on the first call).
CHOICES = [
    ("capture", "'defualt'"),
    ("timing", "'graphs'"),
    ("mode", "'cache'"),
    ("effort", "'fast'"),
    ("search", "'bayes'"),
    ("mode", "1"),
]


@pytest.mark.parametrize(("name", "text"), CHOICES, ids=[f"{n}={t}" for n, t in CHOICES])
def test_a_literal_option_choice_the_runtime_refuses_is_refused_with_its_message(
    name: str, text: str
) -> None:
    from tunedsl.errors import UsageError
    from tunedsl.model.settings import resolve

    with pytest.raises(UsageError) as runtime:
        resolve({"tile": [256, 512]}, {}, {name: ast.literal_eval(text)}, "here")
    err = dsl_error(
        f"autotune(space=dict(tile=[256, 512]), blocks=1, {name}={text}, k(a, T=$tile))\n"
    )
    assert "here: " + err.msg_only == str(runtime.value)
    assert err.lineno == 2 and err.col is not None and err.text is not None
    assert err.text[err.col : err.col + len(text)] == text


@pytest.mark.parametrize("text", ["capture='default'", "mode=None", "timing=''", "mode='off'"])
def test_a_literal_option_choice_the_runtime_takes_compiles(text: str) -> None:
    body = f"autotune(space=dict(tile=[256, 512]), blocks=1, {text}, k(a, T=$tile))\n"
    assert compile_source(HEADER + body, "/w/kern.py") is not None


def test_dollar_in_a_call_of_another_autotune_says_so() -> None:
    text = "import tunedsl\nfrom mylib import autotune\nautotune(k($t))\n"
    with pytest.raises(TunedslSyntaxError) as info:
        compile_source(text, "m.py")
    assert "`$t` is only allowed inside" in info.value.msg_only
    assert (info.value.lineno, info.value.col) == (3, 11)
    assert "not tunedsl's macro" in (info.value.hint or "")


def test_caret_covers_the_placeholder() -> None:
    err = dsl_error(f"autotune({S}, blocks=cdiv(n, $tle), k(a))\n")
    caret = str(err).splitlines()[2]
    assert caret.strip() == "^^^^"


@pytest.mark.parametrize(
    "before, blanks",
    [
        ("s = '漢字'; ", " " * len("s = '") + "    " + " " * len("'; ")),
        ("s = 'e\u0301'; ", " " * len("s = 'e'; ")),
        ("if 1:\n\t", "\t"),
    ],
    ids=["wide", "combining", "tab"],
)
def test_caret_stands_under_the_placeholder_on_a_terminal(before: str, blanks: str) -> None:
    # The caret was one space per character: past a wide character it stood a column early,
    # past a combining mark a column late, past a tab up to seven columns early.
    macro = f"x = autotune({S}, blocks=cdiv(n, "
    err = dsl_error(f"{before}{macro}$tle), k(a))\n")
    caret = str(err).splitlines()[2]
    assert caret == "    " + blanks + " " * len(macro) + "^^^^"


def test_dsl_error_pickles() -> None:
    err = dsl_error("x = $tile\n")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err)


def test_error_column_counts_characters_after_non_ascii_text() -> None:
    err = dsl_error("s = 'éé'; x = $tile\n")
    assert err.col == 14


def test_expand_source_raises_the_same_error() -> None:
    with pytest.raises(TunedslSyntaxError, match="needs `space=`"):
        expand_source(HEADER + "autotune(blocks=1, k(a))\n", "m.py")


# Launch first and no `$`: the macro call is valid Python too, so compile() must agree.
MACRO_OK = "autotune(k(a), space=S, blocks=1)\n"
PYTHON_ERRORS = {
    "after a macro": MACRO_OK + "def f(:\n    pass\n",
    "before a macro": "x = [1,\n" + MACRO_OK,
    "unclosed at the end": MACRO_OK + "y = (1,\n",
    "inside a macro argument": "autotune(k(a), space=S, blocks=1 +)\n",
    "inside a launch": "autotune(k(a b), space=S, blocks=1)\n",
    "unterminated string": MACRO_OK + "s = 'abc\n",
    "indentation": MACRO_OK + "if x:\nfoo()\n",
    "return outside a function": MACRO_OK + "return 1\n",
    "non-ascii before the error": MACRO_OK + "s = 'éé'; y = (1 +)\n",
    "non-ascii inside a macro": "r = autotune(k('éé'), space=S, blocks=1); y = (1 +)\n",
    "keyword repeated in the launch": "autotune(k(a=1, a=2), space=S, blocks=1)\n",
    # A literal space's dict(...) became a dict display, where the last value won silently.
    "keyword repeated in a space's dict(...)": "autotune(k(a), space=dict(t=[1, 2], t=[4]), blocks=1)\n",
    # The scan paired the `]` with the launch's `(`, and the macro it then blanked moved
    # Python's error to the comprehension's last `]`, with the brackets named the other way.
    "bracket closing the wrong opener in a macro": "ys = [autotune(k(], a), space=S, blocks=1) for a in xs]\n",
    # A `\` not at a line end: the macro's arguments were parsed as if it were not there.
    "backslash not at a line end in a macro": "r = autotune(k(a), space=S,\\,,\n  blocks=1)\n",
}


@pytest.mark.parametrize("body", PYTHON_ERRORS.values(), ids=list(PYTHON_ERRORS))
def test_python_errors_keep_pythons_message_and_position(body: str) -> None:
    text = HEADER + body
    with pytest.raises(SyntaxError) as expected:
        compile(text, "/w/kern.py", "exec", dont_inherit=True)
    with pytest.raises(SyntaxError) as got:
        compile_source(text, "/w/kern.py")
    assert not isinstance(got.value, TunedslSyntaxError)
    assert type(got.value) is type(expected.value)
    e, g = expected.value, got.value
    assert (g.msg, g.filename, g.lineno, g.offset) == (e.msg, e.filename, e.lineno, e.offset)
    assert g.text is not None and g.text.rstrip("\n") == text.splitlines()[g.lineno - 1]


def test_python_errors_are_chained_not_swallowed() -> None:
    with pytest.raises(SyntaxError) as got:
        compile_source(HEADER + "autotune(k(a), space=S, blocks=1 +)\n", "m.py")
    assert isinstance(got.value.__cause__, SyntaxError)


def test_plain_module_errors_are_exactly_pythons() -> None:
    text = "x = (1 +\n"
    with pytest.raises(SyntaxError) as expected:
        compile(text, "p.py", "exec")
    with pytest.raises(SyntaxError) as got:
        compile_source(text, "p.py")
    assert (got.value.msg, got.value.lineno, got.value.offset) == (
        expected.value.msg,
        expected.value.lineno,
        expected.value.offset,
    )


def test_dollar_in_a_module_without_the_macro_is_pythons_error() -> None:
    with pytest.raises(SyntaxError) as got:
        compile_source("x = $tile\n", "p.py")
    assert not isinstance(got.value, TunedslSyntaxError)


# -- compile_source and expand_source (`tunedsl expand`) agree on every module ---------------

# CPython allows 200 nested brackets; `return a, f(` + 199 `[` reaches it exactly, and
# ast.unparse writes `return (a, f(...))`, one level more.
AT_THE_LIMIT = "def f(x):\n    return g(x), f(" + "[" * 199 + "x" + "]" * 199 + ")\n"
BELOW_THE_LIMIT = "def f(x):\n    return g(x), f(" + "[" * 198 + "x" + "]" * 198 + ")\n"


def test_dsl_module_whose_expanded_text_is_too_deep_is_one_error_naming_the_place() -> None:
    caret = len("    return g(x), f(") + 198  # the 200th bracket
    for entry_point in (compile_source, expand_source):
        with pytest.raises(TunedslSyntaxError) as info:
            entry_point(HEADER + AT_THE_LIMIT, "/w/deep.py")
        err = info.value
        assert (err.filename, err.lineno, err.col) == ("/w/deep.py", 3, caret)
        assert "nested too deeply" in err.msg_only
        assert "too many nested parentheses" in err.msg_only
        assert err.hint is not None and "intermediate variables" in err.hint


def test_dsl_module_at_the_limit_inside_an_f_string_is_treated_alike() -> None:
    # From 3.12 Python tokenizes f-string replacement fields, so their brackets count too.
    source = HEADER + "def f(x):\n    return g(x), f'{" + "[" * 199 + "x" + "]" * 199 + "}'\n"
    try:
        compile_source(source, "/w/deep.py")
    except TunedslSyntaxError as err:
        assert sys.version_info >= (3, 12)
        assert err.lineno == 3 and "nested too deeply" in err.msg_only
        with pytest.raises(TunedslSyntaxError):
            expand_source(source, "/w/deep.py")
    else:
        compile(expand_source(source, "/w/deep.py"), "expanded", "exec")


def test_dsl_module_one_level_below_the_limit_compiles_and_its_expansion_compiles() -> None:
    namespace: dict[str, object] = {}
    exec(compile_source(HEADER + BELOW_THE_LIMIT, "/w/deep.py"), namespace)
    assert callable(namespace["f"])
    compile(expand_source(HEADER + BELOW_THE_LIMIT, "/w/deep.py"), "expanded", "exec")


def test_plain_module_at_the_limit_compiles_as_python_does_and_expands_as_written() -> None:
    compile(AT_THE_LIMIT, "plain", "exec")  # CPython accepts it, so the front end must too
    assert compile_source(AT_THE_LIMIT, "plain.py").co_filename == "plain.py"
    text = expand_source(AT_THE_LIMIT.encode(), "plain.py")
    assert text == AT_THE_LIMIT  # ast.unparse's text would not compile: shown as written
    compile(text, "expanded", "exec")
    assert expand_source(BELOW_THE_LIMIT) == ast.unparse(ast.parse(BELOW_THE_LIMIT))


@pytest.mark.parametrize(
    "source",
    [
        b"# caf\xe9\nx = 1\n",  # the first line: tokenize.detect_encoding gives up there
        b"x = 1\n# \xff\xfe\n",
        b"# caf\xe9\n# coding: latin-1\nx = 'caf\xe9'\n",  # the cookie still applies
    ],
)
def test_plain_module_with_undecodable_bytes_in_a_comment_compiles_and_expands(
    source: bytes,
) -> None:
    # compile() and importlib accept such a module (only `python file.py` refuses it): a
    # module that does not use the DSL compiles exactly as compile() compiles it, and
    # `tunedsl expand` must agree.
    expected: dict[str, object] = {}
    exec(compile(source, "plain", "exec"), expected)
    got: dict[str, object] = {}
    exec(compile_source(source, "plain.py"), got)
    assert got["x"] == expected["x"]
    text = expand_source(source, "plain.py")
    assert text == f"x = {expected['x']!r}"


def test_plain_module_with_undecodable_bytes_in_code_is_rejected_by_both() -> None:
    source = b"x = 'caf\xe9'\n"
    with pytest.raises(SyntaxError):
        compile(source, "plain", "exec")
    for entry_point in (compile_source, expand_source):
        with pytest.raises(SyntaxError):
            entry_point(source, "plain.py")


def test_a_dollar_an_f_string_holds_as_text_compiles() -> None:
    # `{{$t}}` is literal text, `d['$t']` a string inside a replacement field: plain Python.
    body = "autotune(space=dict(t=[1, 2]), blocks=1, k(a, T=$t, S=f\"{{$t}} {d['$t']} ${a}\"))\n"
    code = compile_source(HEADER + body, "/w/kern.py")
    assert (
        "{{$t}}" in expand_source(HEADER + body, "/w/kern.py") and code.co_filename == "/w/kern.py"
    )


@pytest.mark.parametrize("table", ["ks[a.dtype, 'rm']", "ks[(m, n)]", "ks[i]", "mod.ks[a.dtype]"])
def test_a_kernel_picked_from_a_table_is_a_launch_not_a_triton_grid(table: str) -> None:
    """A table keyed by a tuple (dtype and layout) is no grid: only a lambda or a `$` field
    in the brackets names Triton's `kernel[grid](...)` form."""
    body = f"autotune({S}, blocks=cdiv(n, $tile), {table}(a, n, TILE=$tile))\n"
    compile_source(HEADER + body, "/w/kern.py")
