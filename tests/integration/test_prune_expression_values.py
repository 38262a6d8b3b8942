"""A DSL site's ``prune=`` expression that makes the prune from values the key holds runs;
one that makes it from a value no key holds is named by that value (tunedsl run, Triton's
interpreter, the kernels of kernels_twentyfourth.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).resolve().parent

SCRIPT = """\
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def covering(low):
    return lambda configs, args: [c for c in configs if low <= c.BLOCK < 2 * low]


def at_least(low):
    return lambda configs, args: [c for c in configs if c.BLOCK >= low]


CHOICES = [at_least(64), at_least(128)]


def topk(x, levels):
    rows = x.shape[0]
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    BEFORE
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=KEY,
             prune=PRUNE,
             topk_two_outputs(x, vals, idxs, x.shape[1], x.stride(0), K=3, BLOCK=$BLOCK))
    return vals


torch.manual_seed(0)
for n in SIZES:
    x = torch.randn(4, n)
    torch.testing.assert_close(topk(x, (0,)), x.topk(3, dim=1).values)
print("ok")
"""


def _run(
    tmp_path: Path, before: str, prune: str, key: str, sizes: str
) -> subprocess.CompletedProcess[str]:
    text = SCRIPT.replace("BEFORE", before).replace("PRUNE", prune).replace("KEY", key)
    path = tmp_path / "site.py"
    path.write_text(text.replace("SIZES", sizes), encoding="utf-8")
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HERE)])
    env["TUNEDSL_QUIET"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("before", "prune", "key", "sizes"),
    [
        ("n = x.shape[1]", "covering(n)", "n", "(50, 200)"),
        ("pass", "covering(x.shape[1])", "x.shape[1]", "(50, 200)"),
        ("i = levels[0]", "CHOICES[i]", "(x.shape[1] // 512, i)", "(50, 60)"),
        ("choices = (CHOICES[0],)", "choices[0]", "x.shape[1] // 512", "(50, 60)"),
        ("low = 64", "at_least(low)", "x.shape[1] // 512", "(50, 60)"),
        ("low = 64\n    keep = at_least(low)", "keep", "x.shape[1] // 512", "(50, 60)"),
    ],
    ids=[
        "local-keyed",
        "shape-item-keyed",
        "index-keyed",
        "tuple-of-prunes",
        "constant-local",
        "constant-local-through-a-name",
    ],
)
def test_a_prune_made_from_values_the_key_holds_runs(
    tmp_path: Path, before: str, prune: str, key: str, sizes: str
) -> None:
    """``n = x.shape[1]`` then ``prune=covering(n)`` with ``key=n``, ``covering(x.shape[1])``
    with ``key=x.shape[1]``, and a prune picked by an index the key holds: the key tells
    the calls apart, so the site runs. They were refused, naming the tensor ``x`` or the
    tuple the index came from, which no key can hold."""
    done = _run(tmp_path, before, prune, key, sizes)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_prune_made_from_a_local_no_key_holds_names_the_local(tmp_path: Path) -> None:
    """``n = x.shape[1]`` then ``prune=covering(n)`` with a key that does not hold ``n``: the
    first call names ``n`` and its value, the variable to read from args or put in key=."""
    done = _run(tmp_path, "n = x.shape[1]", "covering(n)", "x.shape[1] // 512", "(50, 200)")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reads `n` (50) from the function that calls the site" in done.stderr
    assert "ok" not in done.stdout


@pytest.mark.parametrize(
    "before",
    [
        "if x.shape[1] > 100:\n        low = 128\n    else:\n        low = 64",
        "low = 64\n    low += x.shape[1] // 100",
        "low = 64\n    for low in (x.shape[1],):\n        pass",
    ],
    ids=["two-constants-by-branch", "augmented", "loop-target"],
)
def test_a_local_bound_to_more_than_one_constant_is_still_named(
    tmp_path: Path, before: str
) -> None:
    """``low = 64`` alone is fixed for the process (the site runs, above); bound to another
    value in a branch, by ``+=`` or as a loop's variable it depends on the call, and is
    named as any local no key holds."""
    done = _run(tmp_path, before, "at_least(low)", "x.shape[1] // 512", "(50, 200)")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reads `low` (" in done.stderr and "from the function that calls the site" in done.stderr
    assert "ok" not in done.stdout


PASSED_IN = """\
import sys
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def at_least(low):
    return lambda configs, args: [c for c in configs if c.BLOCK >= low]


AT_128 = at_least(128)


def topk(x, prune, bucket=0):
    rows = x.shape[0]
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=bucket, prune=prune,
             topk_two_outputs(x, vals, idxs, x.shape[1], x.stride(0), K=3, BLOCK=$BLOCK))
    return vals


def check(x, vals):
    torch.testing.assert_close(vals, x.topk(3, dim=1).values)


class Ops:
    def topk(self, x, prune, bucket=0):
        rows = x.shape[0]
        vals = torch.empty(rows, 3)
        idxs = torch.empty(rows, 3, dtype=torch.int64)
        autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=bucket, prune=prune,
                 topk_two_outputs(x, vals, idxs, x.shape[1], x.stride(0), K=3, BLOCK=$BLOCK))
        return vals


class Child(Ops):
    def top_at_least(self, x, low):
        return super().topk(x, at_least(low))


def in_a_function(how):
    x = torch.randn(4, 100)
    for low in (128, 256):
        if how == "made-per-call":
            check(x, topk(x, at_least(low)))
        elif how == "by-keyword":
            check(x, topk(x, prune=at_least(low)))
        elif how == "made-a-line-before":
            keep = at_least(low)
            check(x, topk(x, keep))
        elif how == "keyed":
            check(x, topk(x, at_least(low), bucket=low))
        elif how == "a-constant":
            check(x, topk(x, AT_128))
        elif how == "method":
            ops = Ops()
            check(x, ops.topk(x, at_least(low)))
        elif how == "method-of-the-class":
            check(x, Ops.topk(Ops(), x, at_least(low)))
        elif how == "method-through-super":
            check(x, Child().top_at_least(x, low))
        elif how == "method-keyed":
            ops = Ops()
            check(x, ops.topk(x, at_least(low), low))


how = sys.argv[1]
if how == "top-level-loop":
    x = torch.randn(4, 100)
    for low in (128, 256):
        check(x, topk(x, at_least(low)))
else:
    in_a_function(how)
print("ok")
"""


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ("made-per-call", True),
        ("by-keyword", True),
        ("made-a-line-before", True),
        ("top-level-loop", True),
        ("method", True),
        ("method-of-the-class", True),
        ("method-through-super", True),
        ("keyed", False),
        ("a-constant", False),
        ("method-keyed", False),
    ],
)
def test_a_prune_passed_in_to_the_function_holding_the_site_is_read_where_it_is_made(
    tmp_path: Path, how: str, named: bool
) -> None:
    """``def topk(x, prune): autotune(..., prune=prune, ...)`` called as
    ``topk(x, at_least(low))`` with ``low`` varying and no key holding it: the decision made
    for one ``low`` was reused for the other (silently, where its prune drops it). The
    caller's argument is read as a ``prune=`` expression is; a module's prune passed in, or
    ``low`` in the key, runs."""
    path = tmp_path / "site.py"
    path.write_text(PASSED_IN, encoding="utf-8")
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HERE)])
    env["TUNEDSL_QUIET"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path), how],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if named:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "reads `low` (128) from the code that calls topk()" in done.stderr, done.stderr
        line = 32 if how.startswith("method") else 18
        assert f"site.py:{line}:" in done.stderr and "put `low` in key=" in done.stderr
        assert "ok" not in done.stdout
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ok"
