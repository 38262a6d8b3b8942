"""Where the user's text holds a Python error, the front end reports Python's own first
error (message and place) unless it knows better: the text is read as Python reads the
module with each ``$name`` spelled ``_name``."""

from __future__ import annotations

import pytest

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.compile import compile_source

HEADER = "from tunedsl import autotune\n"

CASES = [
    # `$f` before a quote is the field `f` then a string (`_f'{t))` in Python), not `$`
    # before an f-string, on every Python (3.12 read an f-string here).
    "x = autotune(space=S, blocks=1, k(a, T=$f'{t))\n",
    "x = autotune(space=S, blocks=1, k(a, T=$rb'{t))\n",
    "x = autotune(space=S, blocks=1, k(a, T=$f'''{t))\n",
    # A `)` too many ends the macro early; Python stops at the unmatched `)` below.
    "def f(a):\n"
    "    y = autotune(space=dict(t=[1, 2],) w=[4, 8]),\n"
    "        blocks=1,\n"
    "        k(a, T=$t),\n"
    "    )\n",
    "y = autotune(space=dict(t=[1, 2]), blocks=1), k(a, T=$t)]\n",
]


def python_error(text: str) -> SyntaxError:
    with pytest.raises(SyntaxError) as info:
        compile(text.replace("$", "_"), "/w/kern.py", "exec", dont_inherit=True)
    return info.value


@pytest.mark.parametrize("body", CASES)
def test_the_first_error_is_pythons(body: str) -> None:
    text = HEADER + body
    expected = python_error(text)
    with pytest.raises(SyntaxError) as info:
        compile_source(text, "/w/kern.py")
    got = info.value
    assert not isinstance(got, TunedslSyntaxError)
    assert (type(got), got.msg, got.lineno, got.offset) == (
        type(expected),
        expected.msg,
        expected.lineno,
        expected.offset,
    )
