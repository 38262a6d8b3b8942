"""Which names a module's top-level code may still rebind as it runs on, seen from the line
it runs now (tunedsl/frontend/rebinding.py): a prune at a script's top level reading one of
them reads a value that no key holds."""

from __future__ import annotations

import linecache
from pathlib import Path

from tunedsl.frontend.rebinding import chains_read_by_option, rebound_at_top_level

SCRIPT = """\
from tunedsl import autotune, cdiv
import torch

LIMIT = 1024                      # a constant
if torch.get_default_dtype() == torch.float32:
    WIDTH = 4                     # one binding in each branch: a constant too
else:
    WIDTH = 8
try:
    import numpy as np
except ImportError:
    np = None
total = 0
for n in (100, 200):              # the loop's target
    x = torch.randn(n)            # bound in the loop's body
    total += n
    with open(__file__) as handle:
        pass
while total < 1000:
    step = total // 2
    total = total + step
i = 1
i = 2                             # bound twice in one block
(a, b), c = (1, 2), 3


def helper():
    inner = 1
    inner = 2                     # a function's own scope
    return inner


class Holder:
    field = 1
    field = 2                     # a class body's own scope


autotune(space=dict(tile=[256, 512]), blocks=cdiv(n, $tile), vadd(x, x, x, n, TILE=$tile))
"""


def test_the_names_a_script_rebinds_and_the_constants_it_does_not(tmp_path: Path) -> None:
    """Seen from the site's line at the end, a name whose bindings all ran before it outside
    any loop around it (``i``, bound twice while setting up) is a constant; a loop's names
    are rebound only while that loop runs."""
    path = tmp_path / "script.py"
    path.write_text(SCRIPT, encoding="utf-8")
    assert rebound_at_top_level(str(path), 38) == {}
    inside_for = rebound_at_top_level(str(path), 15)
    assert inside_for == {"n": 14, "x": 15, "total": 16, "handle": 17, "step": 20, "i": 22,
                          "a": 24, "b": 24, "c": 24, "helper": 27, "Holder": 33}  # fmt: skip
    inside_while = rebound_at_top_level(str(path), 21)
    assert inside_while == {"step": 20, "total": 21, "i": 22, "a": 24, "b": 24, "c": 24,
                            "helper": 27, "Holder": 33}  # fmt: skip
    for constant in ("LIMIT", "WIDTH", "np", "inner", "field"):
        assert constant not in inside_for


def test_a_name_bound_again_further_down_or_by_a_walrus_in_a_loop_is_rebound(
    tmp_path: Path,
) -> None:
    text = (
        "SMALLEST = 16\n"
        "SMALLEST = max(SMALLEST, 32)\n"  # set up twice: a constant from here on
        "for _ in range(2):\n"
        "    EARLY = 1\n"  # an earlier loop's name: a constant once it has ended
        "run()\n"
        "it = iter([1, 2])\n"
        "while (batch := next(it, None)) is not None:\n"
        "    run()\n"
        "SMALLEST = 64\n"  # bound again after the first run(): rebound
    )
    path = tmp_path / "phases.py"
    path.write_text(text, encoding="utf-8")
    assert rebound_at_top_level(str(path), 5) == {"it": 6, "batch": 7, "SMALLEST": 9}
    assert rebound_at_top_level(str(path), 8) == {"batch": 7, "SMALLEST": 9}
    assert rebound_at_top_level(str(path), 10) == {}


def test_a_notebook_cell_is_read_from_linecache_and_a_changed_cell_read_again() -> None:
    """IPython keeps each cell's text in linecache under a name of its own; a cell run again
    with other text is read again, and a name with no source gives nothing."""
    name = "<cell-rebinding-test>"
    text = "for N in (1, 2):\n    pass\n"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    try:
        assert rebound_at_top_level(name, 2) == {"N": 1}
        text = "N = 1\n"
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        assert rebound_at_top_level(name, 1) == {"N": 1}
        assert rebound_at_top_level(name, 2) == {}
    finally:
        linecache.cache.pop(name, None)
    assert rebound_at_top_level("<no source>", 1) == {}
    assert rebound_at_top_level(name, 1) == {}


def test_the_variables_a_prune_expression_reads_outside_the_lambdas_it_makes(
    tmp_path: Path,
) -> None:
    """What the macro's ``prune=`` expression reads where it is evaluated: the caller's
    variables, with the attributes and constant items read from them; a lambda's body runs
    later and is left out (its defaults are read here)."""
    text = (
        "from tunedsl import autotune\n"
        "def f(x, n, hp, self, i):\n"
        "    autotune(space=dict(B=[1, 2]), blocks=1,\n"
        "             prune=pick(n, hp['n'], self.cfg.low, hp[i].x, lambda c, a, m=self.m: c if q else c),\n"
        "             k(x, B=$B))\n"
    )
    path = tmp_path / "expr.py"
    path.write_text(text, encoding="utf-8")
    found = chains_read_by_option(str(path), (3, 5, 4, 24), "prune")
    assert found == {
        ("pick",), ("n",), ("hp", ("[]", "n")), ("self", (".", "cfg"), (".", "low")),
        ("hp",), ("i",), ("self", (".", "m")),
    }  # fmt: skip
    assert chains_read_by_option(str(path), (3, 5, 4, 24), "verify") == set()
    assert chains_read_by_option(str(path), (1, 1, 0, 5), "prune") == set()


def test_the_prune_keyword_of_a_call_is_read_in_a_plain_module(tmp_path: Path) -> None:
    """``autotune_launch(..., prune=covering(n))`` in a module without the macro: the
    keyword's expression, found by the call's span."""
    text = "def f(n):\n    return autotune_launch(k, space=s, prune=covering(n, LOW))\n"
    path = tmp_path / "plain.py"
    path.write_text(text, encoding="utf-8")
    assert chains_read_by_option(str(path), (2, 2, 11, 62), "prune") == {
        ("covering",), ("n",), ("LOW",),
    }  # fmt: skip


def test_a_function_that_rebinds_a_global_rebinds_it_where_it_is_called(tmp_path: Path) -> None:
    """``def grow(n): global LIVE; LIVE = n``: a call of it at the top level binds ``LIVE``
    there (in the loop around it); a function called from another function, or passed on,
    may bind it at any time."""
    text = (
        "LIVE = 0\n"
        "def grow(n):\n"
        "    global LIVE\n"
        "    LIVE = n\n"
        "def setup():\n"
        "    global BASE\n"
        "    BASE = 1\n"
        "def later():\n"
        "    setup()\n"
        "grow(1)\n"
        "for n in (1, 2):\n"
        "    grow(n)\n"
        "    run()\n"
    )
    path = tmp_path / "writers.py"
    path.write_text(text, encoding="utf-8")
    found = rebound_at_top_level(str(path), 13)
    assert found["LIVE"] == 12 and found["BASE"] == 6 and found["n"] == 11
    assert "LIVE" not in rebound_at_top_level(str(path), 14)
    assert rebound_at_top_level(str(path), 14)["BASE"] == 6


def test_a_site_written_at_the_top_level_counts_only_the_loops_around_it(tmp_path: Path) -> None:
    """``later=False`` (a macro written in the top-level code itself, which runs again only
    as a loop around it does): a name bound further down in no loop around the line is
    left out; one bound in a loop around it, or by a function the module passes on, stays."""
    text = (
        "LIMIT = 256\n"
        "for n in (1, 2):\n"
        "    run(n)\n"
        "    STEP = n\n"
        "LIMIT = 1024\n"
        "for m in (1, 2):\n"
        "    run(m)\n"
    )
    path = tmp_path / "phases_top.py"
    path.write_text(text, encoding="utf-8")
    assert rebound_at_top_level(str(path), 3) == {"n": 2, "STEP": 4, "LIMIT": 5, "m": 6}
    assert rebound_at_top_level(str(path), 3, later=False) == {"n": 2, "STEP": 4}
    assert rebound_at_top_level(str(path), 7, later=False) == {"m": 6}
