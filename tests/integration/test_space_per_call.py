"""A ``space=`` that may give another space on another call of one key (``self.space`` of a
module whose instances each have one, a parameter, an ``autotune_launch`` call place given
two spaces): each space decides its own keys, and no call launches a configuration outside
the space it gave."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def fill(out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.full((BLOCK,), 1, tl.int32), mask=offs < n)
"""

MACRO_SCRIPT = """\
import json
import torch
from tunedsl import autotune, cdiv
from space_kernel import fill

SPACE = dict(BLOCK=[32, 64])


class Filler:
    def __init__(self, blocks):
        self.space = dict(BLOCK=blocks)

    def __call__(self, out):
        n = out.numel()
        return autotune(space=self.space, blocks=cdiv(n, $BLOCK), fill(out, n, BLOCK=$BLOCK))


def by_parameter(out, space):
    n = out.numel()
    return autotune(space=space, blocks=cdiv(n, $BLOCK), fill(out, n, BLOCK=$BLOCK))


def constant(out):
    n = out.numel()
    return autotune(space=SPACE, blocks=cdiv(n, $BLOCK), fill(out, n, BLOCK=$BLOCK))


seen = []
small, large, small_again = Filler([32, 64]), Filler([128]), Filler([32, 64])
for filler in (small, large, small, large, small_again):  # one shape: one key of the site
    out = torch.zeros(100, dtype=torch.int32)
    res = filler(out)
    assert int(out.sum()) == 100
    seen.append(["instance", res.config["BLOCK"], res.source])
for space in (dict(BLOCK=[16]), dict(BLOCK=[32, 64]), dict(BLOCK=[16])):
    out = torch.zeros(100, dtype=torch.int32)
    res = by_parameter(out, space)
    assert int(out.sum()) == 100
    seen.append(["parameter", res.config["BLOCK"], res.source])
for _ in range(3):
    out = torch.zeros(100, dtype=torch.int32)
    res = constant(out)
    seen.append(["constant", res.config["BLOCK"], res.source])
print(json.dumps(seen))
"""

PLAIN_SCRIPT = """\
import json
import torch
from tunedsl import autotune_launch, cdiv
from space_kernel import fill

seen = []
out = torch.zeros(100, dtype=torch.int32)
for blocks in ([32, 64], [128, 256], [32, 64], [128, 256]):
    out.zero_()
    res = autotune_launch(
        fill, space=dict(BLOCK=blocks), grid=lambda cfg: (cdiv(100, cfg["BLOCK"]),),
        args=(out, 100), kwargs=lambda cfg: dict(BLOCK=cfg["BLOCK"]),
    )
    assert int(out.sum()) == 100
    seen.append([blocks, res.config["BLOCK"], res.source])
print(json.dumps(seen))
"""


def _run(tmp_path: Path, script: str, runner: list[str]) -> list[list[object]]:
    (tmp_path / "space_kernel.py").write_text(KERNEL)
    (tmp_path / "spaces.py").write_text(script)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(tmp_path)
    env["TUNEDSL_QUIET"] = "1"
    done = subprocess.run(
        [sys.executable, *runner, str(tmp_path / "spaces.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_space_read_per_call_decides_each_space_apart(tmp_path: Path) -> None:
    """Two module instances with their own space call one macro with one key: the second
    launched the first's choice (BLOCK 32 or 64, outside its space of 128), silently."""
    seen = _run(tmp_path, MACRO_SCRIPT, ["-m", "tunedsl", "run"])
    instance = [row for row in seen if row[0] == "instance"]
    assert [row[1] in (32, 64) for row in instance] == [True, False, True, False, True]
    assert instance[1][1] == instance[3][1] == 128
    # Each space decides once: its later calls, and an equal space of another instance, hit.
    assert [row[2] for row in instance[2:]] == ["memory"] * 3
    parameter = [row for row in seen if row[0] == "parameter"]
    assert [row[1] for row in parameter][0::2] == [16, 16]
    assert parameter[1][1] in (32, 64)
    assert parameter[2][2] == "memory"
    # A module constant is read when a key is decided: its hits stay hits.
    constant = [row for row in seen if row[0] == "constant"]
    assert len({row[1] for row in constant}) == 1
    assert [row[2] for row in constant[1:]] == ["memory", "memory"]


def test_an_autotune_launch_place_given_two_spaces_decides_each_apart(tmp_path: Path) -> None:
    """One ``autotune_launch`` place called with two spaces: the second space's call hit the
    first's decision and launched BLOCK 32 or 64, outside its space."""
    seen = _run(tmp_path, PLAIN_SCRIPT, [])
    assert seen[0][1] in (32, 64) and seen[2][1] == seen[0][1]
    assert seen[1][1] in (128, 256) and seen[3][1] == seen[1][1]
    # The first space's decisions, made before the place was seen to take two spaces, are
    # kept under that space: its next call hits them.
    assert [row[2] for row in seen[2:]] == ["memory", "memory"]
