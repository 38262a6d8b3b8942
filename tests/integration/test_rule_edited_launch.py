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
    script, rule = _built(tmp_path)
    rules, shapes = rule.parent, tmp_path / "shapes.json"
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


def _built(tmp_path: Path) -> tuple[Path, Path]:
    """The script swept and its rule built: (script, the rule file)."""
    script = tmp_path / "kernels.py"
    script.write_text(SCRIPT)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"t": t} for t in (2, 4, 8)]))
    done = tunedsl("sweep", str(script), "--shapes", str(shapes), "--no-ray")
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules"
    assert tunedsl("rules", "build", "--out", str(rules)).returncode == 0
    (rule,) = rules.glob("*.rule.json")
    return script, rule


def test_a_rule_saved_under_another_rules_name_says_so_not_that_the_kernel_changed(
    tmp_path: Path,
) -> None:
    """A rule file saved under another rule's name (a copy named for another site's rule):
    the runtime said it was built for another version of its kernel and to sweep again (the
    kernel had not changed; `rules check` says to rename it)."""
    script, rule = _built(tmp_path)
    misnamed = tmp_path / "misnamed"
    misnamed.mkdir(mode=0o700)
    (misnamed / f"{'ab' * 32}.rule.json").write_text(rule.read_text())
    serving = {"TUNEDSL_RECORDS_PATH": str(misnamed), "TUNEDSL_CACHE_DIR": str(tmp_path / "s1")}
    done = tunedsl("run", str(script), "3", **serving)
    assert done.returncode == 0 and done.stdout.split() == ["3", "tuned"], done.stderr
    warned = " ".join(done.stderr.split())
    assert "built for another version" not in warned, warned
    said = (
        f"{misnamed / ('ab' * 32)}.rule.json is a rule for kernels.py:run:silu_mul, this very "
        f"kernel, saved under another rule's file name; the runtime looks for it as {rule.name}"
    )
    assert said in warned and "rename it" in warned, warned


def test_a_stale_rule_names_its_toolchain_in_words_not_as_a_dict(tmp_path: Path) -> None:
    """A rule measured with another Triton: its warning and `rules check` printed the
    toolchains as raw dicts ({'triton': '3.9.0', ...})."""
    script, rule = _built(tmp_path)
    stale = tmp_path / "stale"
    stale.mkdir(mode=0o700)
    data = json.loads(rule.read_text())
    data["toolchain"] = {**data["toolchain"], "triton": "3.0.0"}
    (stale / rule.name).write_text(json.dumps(data))
    serving = {"TUNEDSL_RECORDS_PATH": str(stale), "TUNEDSL_CACHE_DIR": str(tmp_path / "s2")}
    done = tunedsl("run", str(script), "3", **serving)
    assert done.returncode == 0 and done.stdout.split() == ["3", "tuned"], done.stderr
    warned = " ".join(done.stderr.split())
    assert "was measured on" in warned and "with triton 3.0.0, interpreter, not on" in warned, (
        warned
    )
    assert "{'" not in warned, warned
    checked = tunedsl("rules", "check", str(stale), TUNEDSL_CACHE_DIR=str(tmp_path / "c"))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "with triton 3.0.0, interpreter, this machine is" in checked.stdout, checked.stdout
    assert "{'" not in checked.stdout, checked.stdout


def test_check_names_the_rule_of_another_version_beside_the_current_one(tmp_path: Path) -> None:
    """Rules of two versions of one site's kernel in one directory (built before and after
    an edit): `rules check --script` judges the current one and says the other is never used
    and to remove it (it said no sampled shape reached the site)."""
    script, old = _built(tmp_path)
    script.write_text(SCRIPT.replace("key=t,", "key=t // 2,"))
    shapes = tmp_path / "shapes.json"
    assert tunedsl("sweep", str(script), "--shapes", str(shapes), "--no-ray").returncode == 0
    assert tunedsl("rules", "build", "--out", str(old.parent)).returncode == 0
    (new,) = set(old.parent.glob("*.rule.json")) - {old}
    checked = tunedsl(
        "rules", "check", str(old.parent), "--script", str(script), "--shapes", str(shapes),
        TUNEDSL_CACHE_DIR=str(tmp_path / "check"),
    )  # fmt: skip
    assert checked.returncode == 1, checked.stdout + checked.stderr
    said = (
        f"{old.name}: unchecked: built for another version of kernels.py:run:silu_mul than "
        f"{new.name}, which the script reached, so the runtime never uses this rule; remove it"
    )
    assert said in checked.stdout, checked.stdout
    assert f"{new.name}: 3 keys tuned here" in checked.stdout, checked.stdout
