"""A DSL site whose `key=` (or `blocks=`) was edited after its rules were built: the rule is
never used (its keys were other buckets), and both the process that meets the site and `tunedsl
rules check --script` say what changed, naming the launch item then and now, not a list of
things that might have. The real `tunedsl sweep`, `rules build` and `rules check` commands,
and the script run by `tunedsl run` in a fresh process with the rules shipped (real kernels
under the interpreter, real rule files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def silu_mul(x, out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < n
    a = tl.load(x + row * 2 * n + cols, mask=m)
    b = tl.load(x + row * 2 * n + n + cols, mask=m)
    tl.store(out + row * n + cols, a * tl.sigmoid(a) * b, mask=m)


def run(t):
    x = torch.randn(t, 64)
    out = torch.empty(t, 32)
    launch = autotune(space=dict(block=[16, 32]),
                      blocks=(t, cdiv(32, $block)),
                      key=t,
                      silu_mul(x, out, 32, BLOCK=$block))
    ref = torch.nn.functional.silu(x[:, :32]) * x[:, 32:]
    torch.testing.assert_close(out, ref)
    return launch


@workload
def sizes(t=2):
    run(t)


if __name__ == "__main__":
    for t in sys.argv[1:]:
        print(t, run(int(t)).source)
"""


def tunedsl(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "always", "-m", "tunedsl", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        check=False,
    )


def test_an_edited_key_names_the_launch_item_that_changed(tmp_path: Path) -> None:
    script = tmp_path / "kernels.py"
    script.write_text(SCRIPT)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"t": t} for t in (2, 4, 8)]))
    done = tunedsl("sweep", str(script), "--shapes", str(shapes), "--no-ray")
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules"
    assert tunedsl("rules", "build", "--out", str(rules)).returncode == 0
    (rule,) = rules.glob("*.rule.json")
    serving = {"TUNEDSL_RECORDS_PATH": str(rules), "TUNEDSL_CACHE_DIR": str(tmp_path / "serve")}
    done = tunedsl("run", str(script), "3", **serving)
    assert done.returncode == 0 and done.stdout.split() == ["3", "rule"], done.stderr

    script.write_text(SCRIPT.replace("key=t,", "key=t // 2,"))
    done = tunedsl("run", str(script), "3", **serving)
    assert done.returncode == 0 and done.stdout.split() == ["3", "tuned"], done.stderr
    assert done.stderr.count("built for another version of its kernel") == 1, done.stderr
    assert str(rule) in done.stderr
    said = "the launch (`key=t` when the rule was built, `key=t // 2` now) changed"
    assert said in done.stderr, done.stderr
    assert "source" not in done.stderr.split("built for another version")[1], done.stderr

    checked = tunedsl(
        "rules",
        "check",
        str(rules),
        "--script",
        str(script),
        "--shapes",
        str(shapes),
        TUNEDSL_CACHE_DIR=str(tmp_path / "check"),
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"{rule.name}: unchecked: the script's kernels.py:run:silu_mul" in checked.stdout
    assert said in checked.stdout, checked.stdout


def test_a_refused_pick_outside_the_range_names_what_is_launched(tmp_path: Path) -> None:
    """`mode="cached"` (as under CUDA-graph capture) after the space shrank past every
    configuration of the rule: a key outside the rule's range and one inside it each launch
    the site's default, and the warnings say so (one for the key outside the range); the one
    for the key outside the range said it launched the rule's pick, a configuration the site
    no longer has."""
    script = tmp_path / "kernels.py"
    script.write_text(SCRIPT)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"t": t} for t in (2, 4, 8)]))
    done = tunedsl("sweep", str(script), "--shapes", str(shapes), "--no-ray")
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules"
    assert tunedsl("rules", "build", "--out", str(rules)).returncode == 0
    script.write_text(SCRIPT.replace("space=dict(block=[16, 32])", "space=dict(block=[8, 64])"))
    serving = {
        "TUNEDSL_RECORDS_PATH": str(rules),
        "TUNEDSL_CACHE_DIR": str(tmp_path / "serve"),
        "TUNEDSL_AUTOTUNE": "cached",
    }
    for t, outside in (("100", True), ("3", False)):
        done = tunedsl("run", str(script), t, **serving)
        assert done.returncode == 0 and done.stdout.split() == [t, "default"], done.stderr
        warned = " ".join(done.stderr.split())
        assert "launches the pick of the nearest swept family" not in warned, warned
        if outside:  # one warning: the range's, naming the refused pick and the default
            said = "(key=100 is outside the swept [2, 8]); tuning cannot run here, and its pick"
            assert said in warned and "so it launches the site's default" in warned, warned
            assert "not using it" not in warned, warned
        else:
            assert "not using it, launching the site's default" in warned, warned
