"""Which names a module's top-level code rebinds as it runs (tunedsl/frontend/rebinding.py):
a prune at a script's top level reading one of them reads a value that no key holds."""

from __future__ import annotations

import linecache
from pathlib import Path

from tunedsl.frontend.rebinding import rebound_at_top_level

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
    path = tmp_path / "script.py"
    path.write_text(SCRIPT, encoding="utf-8")
    found = rebound_at_top_level(str(path))
    assert found == {
        "n": 14, "x": 15, "total": 16, "handle": 17, "step": 20, "i": 23,
    }  # fmt: skip
    for constant in ("LIMIT", "WIDTH", "np", "a", "b", "c", "helper", "Holder", "inner", "field"):
        assert constant not in found


def test_a_notebook_cell_is_read_from_linecache_and_a_changed_cell_read_again() -> None:
    """IPython keeps each cell's text in linecache under a name of its own; a cell run again
    with other text is read again, and a name with no source gives nothing."""
    name = "<cell-rebinding-test>"
    text = "for N in (1, 2):\n    pass\n"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    try:
        assert rebound_at_top_level(name) == {"N": 1}
        text = "N = 1\n"
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        assert rebound_at_top_level(name) == {}
    finally:
        linecache.cache.pop(name, None)
    assert rebound_at_top_level("<no source>") == {}
    assert rebound_at_top_level(name) == {}
