"""Which ``space=`` expressions a site reads on every call (``frontend/space_reads.py``), what
the expansion tells the site, and the key part a space read per call gives
(``runtime/call_values.py``)."""

from __future__ import annotations

import ast

import pytest

from tunedsl.frontend.compile import expand_source
from tunedsl.frontend.space_reads import read_per_call
from tunedsl.model.space import Space
from tunedsl.runtime.call_values import space_part


def _per_call(source: str, space: str) -> bool:
    module = ast.parse(source)
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "SITE" in text)
    return read_per_call(module, line, ast.parse(space, mode="eval").body)


# (name, module source with the site's line marked SITE, the space= expression, per call?)
CASES = [
    ("a module constant", "SPACE = {}\ndef f():\n    SITE\n", "SPACE", False),
    ("one binding per branch of an if", "if A:\n    S = 1\nelse:\n    S = 2\ndef f():\n    SITE\n", "S", False),
    ("a constant of an imported module", "import configs\ndef f():\n    SITE\n", "configs.SPACE", False),
    ("no binding here (a star import)", "from c import *\ndef f():\n    SITE\n", "SPACE", False),
    ("an instance's own", "class M:\n    def f(self):\n        SITE\n", "self.space", True),
    ("a parameter", "def f(space):\n    SITE\n", "space", True),
    ("a local", "def f():\n    s = {}\n    SITE\n", "s", True),
    ("an enclosing function's variable", "def outer(s):\n    def f():\n        SITE\n", "s", True),
    ("a global a function rebinds", "S = {}\ndef g():\n    global S\n    S = {}\ndef f():\n    SITE\n", "S", True),
    ("a module name bound in a loop", "for S in spaces:\n    SITE\n", "S", True),
    ("a module name bound twice", "S = {}\ndef f():\n    SITE\nS = {}\n", "S", True),
    ("a module name given +=", "S = []\nS += []\ndef f():\n    SITE\n", "S", True),
    ("an attribute of a module-level object", "cfg = C()\ndef f():\n    SITE\n", "cfg.space", True),
    ("a subscript", "SPACES = {}\ndef f(kind):\n    SITE\n", "SPACES[kind]", True),
    ("a call", "def f():\n    SITE\n", "make_space()", True),
    ("a conditional", "A = B = {}\ndef f():\n    SITE\n", "A if x else B", True),
    ("a lambda's parameter", "f = lambda out, sp: (\n    SITE)\n", "sp", True),
    ("a lambda's parameter in a function", "def g():\n    f = lambda sp: (\n        SITE)\n", "sp", True),
    ("a module-level comprehension's variable", "r = [\n    SITE\n    for s in spaces]\n", "s", True),
    ("a parameter of a def under an if", "if A:\n    def f(space):\n        SITE\n", "space", True),
    # `from x import name` may give any object, whose attribute is its state (a module too).
    ("an attribute of a from-imported name", "from cfg import settings\ndef f():\n    SITE\n", "settings.space", True),
    ("an attribute of a from-imported class", "from cfg import Holder as H\ndef f():\n    SITE\n", "H.SPACE", True),
    ("an import's fallback", "try:\n    from c import S\nexcept ImportError:\n    S = {}\ndef f():\n    SITE\n", "S", False),
    ("one module imported twice", "import os\nimport os.path\ndef f():\n    SITE\n", "os.SPACE", False),
    ("two modules under one name", "import a as m\nimport b as m\ndef f():\n    SITE\n", "m.SPACE", True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("source", "space", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_which_spaces_are_read_per_call(source: str, space: str, expected: bool) -> None:
    assert _per_call(source, space) is expected


def test_the_expansion_tells_the_site_which_space_it_reads_per_call() -> None:
    source = (
        "from tunedsl import autotune, cdiv\n"
        "SPACE = dict(t=[1, 2])\n"
        "class M:\n"
        "    def f(self, n):\n"
        "        autotune(space=SPACE, blocks=cdiv(n, $t), k(n, T=$t))\n"
        "        autotune(space=self.space, blocks=cdiv(n, $t), k(n, T=$t))\n"
    )
    text = expand_source(source, "/w/k.py")
    flags = ["space_per_call=True" in line for line in text.splitlines() if "make_site" in line]
    assert flags == [False, True]


def test_a_space_read_per_call_is_keyed_by_its_value() -> None:
    assert space_part(dict(t=[1, 2])) == space_part(dict(t=[1, 2]))  # a new dict per call
    assert space_part(dict(t=[1, 2])) != space_part(dict(t=[1, 3]))
    assert space_part(dict(t=[1])) != space_part(dict(t=[True]))
    assert space_part([dict(t=1)]) != space_part((dict(t=1),))

    def made(low: int) -> Space:  # a constraint made per call: another function each time
        return Space(t=[1, 2], constraint=lambda c, *, lim=low: c.t >= lim)

    # One code may allow other configurations (a keyword default, a global it reads): a
    # function counts by identity, never by its code.
    assert space_part(made(1)) != space_part(made(1))
    keep = made(1).constraint
    assert space_part(Space(t=[1, 2], constraint=keep)) == space_part(
        Space(t=[1, 2], constraint=keep)
    )
    big = {"t": list(range(100_000))}
    assert space_part(big) is space_part(big) and hash(space_part(big)) == hash(
        space_part(dict(big))
    )

    class Mine:  # no value form: by identity, another object is another decision
        pass

    one = Mine()
    assert space_part([one]) == space_part([one]) and space_part([one]) != space_part([Mine()])
