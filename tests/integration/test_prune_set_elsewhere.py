"""A ``prune=`` in a library module that reads a value the calling script sets from outside
as it runs (``kern.LIVE = n``, ``settings.state.live = n`` in its loop): no key holds it, so
the decision made for one value was reused in memory for another whose prune drops it
(wrong values, silently). Real scripts under ``tunedsl run``, real kernels under the
interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

SETTINGS = """\
class State:
    live = 0


state = State()
"""

LIBRARY = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune

import settings

LIVE = 0
BUF = torch.randn(4, 1024)


@triton.jit
def rowmax_kernel(x, y, n, stride, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x + r * stride + c, mask=c < n, other=-float("inf"))
    tl.store(y + r, tl.max(v, axis=0))


def by_global(configs, args):
    return [c for c in configs if c.block >= LIVE]


def by_object(configs, args):
    return [c for c in configs if c.block >= settings.state.live]


def rowmax(n, prune):
    y = torch.empty(4)
    autotune(space=dict(block=[128, 256, 512, 1024]), blocks=4, prune=prune,
             rowmax_kernel(BUF, y, n, BUF.stride(0), BLOCK=$block))
    return y
"""

MAIN = """\
import torch
import kern
import settings

SET_ONCE
for n in (100, 700):
    SET_IN_LOOP
    y = kern.rowmax(n, kern.PRUNE)
    torch.testing.assert_close(y, kern.BUF[:, :n].max(dim=1).values)
print("ok")
"""


@pytest.mark.parametrize("how", ["global", "object"])
@pytest.mark.parametrize("where", ["loop", "once"])
def test_a_value_the_calling_script_sets_in_a_library_as_it_runs_is_named(
    tmp_path: Path, how: str, where: str
) -> None:
    (tmp_path / "settings.py").write_text(SETTINGS, encoding="utf-8")
    (tmp_path / "kern.py").write_text(LIBRARY, encoding="utf-8")
    setting = "kern.LIVE" if how == "global" else "settings.state.live"
    text = MAIN.replace("PRUNE", "by_global" if how == "global" else "by_object")
    if where == "once":  # set up once, before the calls: fixed for the process
        text = text.replace("SET_ONCE", f"{setting} = 1000").replace("SET_IN_LOOP", "pass")
    else:
        text = text.replace("SET_ONCE", "").replace("SET_IN_LOOP", f"{setting} = n")
    main = tmp_path / "main.py"
    main.write_text(text, encoding="utf-8")
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(tmp_path)
    env["TUNEDSL_QUIET"] = "1"
    env["TUNEDSL_AUTOTUNE"] = "off"  # the first configuration prune keeps: no timing noise
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(main)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if where == "once":
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ok"
        return
    read = "LIVE" if how == "global" else "settings.state.live"
    through = "kern" if how == "global" else "settings"
    line = 7  # the loop's line that sets it
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"reads `{read}` (100) from {main}, which sets it through `{through}`" in done.stderr
    assert f"as it runs (line {line})" in done.stderr, done.stderr
    assert f"put `{read}` in key=" in done.stderr
    assert "ok" not in done.stdout
