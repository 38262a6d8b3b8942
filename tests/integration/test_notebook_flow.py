"""A notebook user's ways with cells: a kernel in one cell and its site in another, cells run
again after an edit or out of order, loops at a cell's top level, interrupted tunings, and
what the cells show (real IPython ``InteractiveShell`` in a subprocess, cells run one by
one as a notebook runs them, kernels under Triton's interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

# Runs the cells of a JSON list one by one in one shell, as a notebook's kernel does; a cell
# written as ["EDIT", file, old, new] edits a file between two cells (an editor saving it).
DRIVER = """\
import json, os, pathlib, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance(colors="nocolor")
for i, cell in enumerate(json.loads(pathlib.Path(sys.argv[1]).read_text())):
    if isinstance(cell, list):
        path = pathlib.Path(cell[1])
        path.write_text(path.read_text().replace(cell[2], cell[3]))
        st = os.stat(path)
        os.utime(path, (st.st_atime + 5, st.st_mtime + 5))
        continue
    result = shell.run_cell(cell, store_history=True)
    error = result.error_before_exec or result.error_in_exec
    print("CELL", i, "ok" if error is None else type(error).__name__, flush=True)
"""

SETUP = """\
import torch, triton, triton.language as tl
from tunedsl import autotune, cdiv
"""

KERNEL = """\
@triton.jit
def k(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) * 2, mask=m)
"""


def _notebook(tmp_path: Path, cells: list) -> str:
    """The output of running ``cells`` after ``%load_ext tunedsl`` (stdout and stderr)."""
    pytest.importorskip("IPython")
    (tmp_path / "cells.json").write_text(json.dumps(["%load_ext tunedsl", *cells]))
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env.pop("TUNEDSL_AUTOTUNE", None)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / "cells.json")],
        capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def _cells(out: str) -> list[str]:
    """How each cell ended: "ok" or the name of its error (the first is ``%load_ext``)."""
    return [line.split()[2] for line in out.splitlines() if line.startswith("CELL ")][1:]


def _rows(out: str, mark: str = "RESULT") -> list[list[str]]:
    return [line.split()[1:] for line in out.splitlines() if line.startswith(mark + " ")]


def test_a_prune_reading_the_loop_variable_of_a_cell_is_named(tmp_path: Path) -> None:
    # The cell calls the macro an earlier cell imported. The prune check reads the cell's
    # source to find the names its top-level code rebinds, but expanded the cell's text
    # alone, which is no DSL module without that import: it found none, and the decision
    # made for the first size was launched for the others, configurations their prune drops.
    loop = (
        "x = torch.randn(512); out = torch.empty(512)\n"
        "for size in [64, 32, 16]:\n"
        "    r = autotune(space=dict(tile=[16, 32, 64]), blocks=cdiv(size, $tile),\n"
        "                 prune=lambda cs, a: [c for c in cs if c.tile <= size],\n"
        "                 k(x, out, size, TILE=$tile))\n"
        "    print('RESULT', size, r.config.tile)\n"
    )
    out = _notebook(tmp_path, [SETUP, KERNEL, loop, loop.replace("$tile))", "$tile), key=size)")])
    assert _cells(out) == ["ok", "ok", "UsageError", "ok"], out
    assert "reads `size` (64) from the module, which rebinds it as it runs (line 2)" in out
    # With key=size it runs, each size launching a configuration its prune keeps.
    rows = _rows(out)
    assert [r[0] for r in rows] == ["64", "32", "16"], out
    assert all(int(tile) <= int(size) for size, tile in rows), rows


# One block covers the first `size` elements, with the one tile the prune keeps.
ONE_BLOCK = """\
x = torch.randn(64)
def f():
    out = torch.zeros(64)
    r = autotune(space=SPACE, blocks=(1,), k(x, out, size, TILE=$tile),
                 prune=lambda cs, a: [c for c in cs if c.tile == size])
    print("RESULT", size, r.config.tile, r.source, torch.equal(out[:size], x[:size] * 2))
def g():
    out = torch.zeros(64)
    r = autotune(space=OTHER, blocks=cdiv(64, $tile), k(x, out, 64, TILE=$tile))
    print("OTHER", r.config.tile, r.source, torch.equal(out, x * 2))
"""


def test_a_global_a_cell_rebinds_is_read_again_by_the_settings(tmp_path: Path) -> None:
    # All cells share one namespace. A site decides a key with its prune= and space= as
    # they were, and kept the decision in memory: after a cell rebinding `size` (the prune
    # then keeps only the tile 64), or rebinding it on the line before its call (itself,
    # or through a function of an earlier cell), the call launched the tile the prune now
    # drops (half the output left unwritten); after one
    # rebinding `OTHER`, the tile of a space no longer there.
    cells = [SETUP, KERNEL, "size = 16\nSPACE = dict(tile=[16, 32, 64])\nOTHER = dict(tile=[16])"]
    cells += [ONE_BLOCK, "f()", "size = 64", "f()", "size = 32\nf()", "f()"]
    cells += ["def resize(n):\n    global size\n    size = n\n", "resize(64)\nf()"]
    cells += ["g()", "OTHER = dict(tile=[32])", "g()", "g()"]
    out = _notebook(tmp_path, cells)
    assert set(_cells(out)) == {"ok"}, out
    rows = _rows(out)
    sizes = [["16", "16"], ["64", "64"], ["32", "32"], ["32", "32"], ["64", "64"]]
    assert [r[:2] for r in rows] == sizes, out
    assert all(r[3] == "True" for r in rows), rows
    assert rows[3][2] == "memory", rows  # nothing rebound since: the decision stands
    other = _rows(out, "OTHER")
    assert [r[0] for r in other] == ["16", "32", "32"] and other[2][1] == "memory", out
    assert all(r[2] == "True" for r in other), other


def test_a_later_cells_loop_rebinding_what_an_earlier_cells_prune_reads_is_named(
    tmp_path: Path,
) -> None:
    # The function of one cell, called in a loop of another: the loop rebinds the global its
    # prune reads, and the check looked for rebinding only in the prune's own cell.
    cells = [SETUP, KERNEL, "size = 16\nSPACE = dict(tile=[16, 32, 64])", ONE_BLOCK]
    cells += ["for size in [16, 64]:\n    f()\n"]
    out = _notebook(tmp_path, cells)
    assert _cells(out)[-1] == "UsageError", out
    assert (
        "reads `size` (16) from the module, which rebinds it as it runs (<ipython-input-6-" in out
    )
    assert "RESULT 64" not in out


def test_a_misspelled_field_of_a_computed_space_is_shown_at_the_cells_line(
    tmp_path: Path,
) -> None:
    # A space computed at the call is checked against the `$NAME`s on the first call: the
    # TunedslSyntaxError went to IPython's display of a syntax error in compiled code, with
    # every frame from IPython's own through tunedsl's site, miss, settings and space modules.
    site = (
        "SPACE = dict(tyle=[16, 32])\n"
        "def f(x, out):\n"
        "    return autotune(space=SPACE, blocks=cdiv(64, $tile), k(x, out, 64, TILE=$tile))\n"
    )
    out = _notebook(tmp_path, [SETUP, KERNEL, site, "f(torch.randn(64), torch.empty(64))"])
    assert _cells(out)[-1] == "TunedslSyntaxError", out
    shown = out[out.index("CELL 3 ok") : out.index("CELL 4 ")]
    assert "Cell In[5], line 1" in shown and "Cell In[4], line 3 in f" in shown, shown
    assert "return autotune(space=SPACE, blocks=cdiv(64, $tile)" in shown, shown
    assert "`$tile` is not a field of `space=`" in shown and "did you mean `$tyle`?" in shown
    assert "tunedsl/" not in shown and "interactiveshell.py" not in shown, shown


def test_timeit_of_a_macro_call_times_the_call_not_a_new_site(tmp_path: Path) -> None:
    # `%timeit` and `%%timeit` parse their code as a cell and run it in a loop inside a
    # function: the statements the expansion hoists (the site made) ran on every loop, so
    # each run made a new site whose first call decided from the records again, and that
    # is what was timed.
    call = "autotune(space=dict(tile=[32, 64]), blocks=cdiv(64, $tile), k(x, out, 64, TILE=$tile))"
    cells = [SETUP, KERNEL, "x = torch.randn(64); out = torch.empty(64); seen = []"]
    cells += [f"%%timeit -n 3 -r 1\nseen.append({call}.source)\n", "print('SEEN', *seen)"]
    cells += [f"%timeit -n 3 -r 1 seen.append({call}.source)", "print('SEEN', *seen[3:])"]
    out = _notebook(tmp_path, cells)
    assert set(_cells(out)) == {"ok"}, out
    assert _rows(out, "SEEN") == [["tuned", "memory", "memory"], ["disk", "memory", "memory"]]
