"""Kernels of the twenty-second set (kernels_twentysecond.py), written as a researcher new
to tunedsl writes them from the docs, run through ``tunedsl run`` with Triton's interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).resolve().parent


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HERE), str(HERE.parent.parent)])
    env["TUNEDSL_QUIET"] = "1"
    return env


def _run(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path)],
        env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


TOPK = """\
import torch
from tunedsl import autotune
from kernels_twentysecond import topk_rows


def topk(x, k):
    M, N = x.shape
    out = torch.empty(M, k)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=M, key=N // 512,
             prune=lambda configs, args: [c for c in configs if PRUNE_READ <= c.BLOCK < 2 * PRUNE_READ],
             topk_rows(x, out, N, x.stride(0), K=k, BLOCK=$BLOCK))
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    for N in (100, 200):  # one key= bucket, one class of int (neither a multiple of 16)
        x = torch.randn(4, N)
        torch.testing.assert_close(topk(x, 3), x.topk(3, dim=1).values)
    print("ok")
"""


def test_prune_reading_a_local_of_the_caller_is_named_not_launched_where_it_drops(
    tmp_path: Path,
) -> None:
    """A ``prune=`` lambda reading a local of the calling function (``N``) read a value no
    key held: the decision made for N=100 (the one BLOCK it keeps, 128) was launched for
    N=200, whose prune keeps only BLOCK=256, and the top-k of each row came out wrong, silently. The first
    call now names the site, the local and the fix; the fixed prune (``args["N"]``) keys N
    and gives the right result for both sizes."""
    done = _run(tmp_path, "topk_local.py", TOPK.replace("PRUNE_READ", "N"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "topk_local.py:9:5 (topk_rows)" in done.stderr
    assert "reads `N` (100) from the function that calls the site" in done.stderr
    assert 'Read it as args["N"]' in done.stderr
    assert "ok" not in done.stdout
    fixed = _run(tmp_path, "topk_args.py", TOPK.replace("PRUNE_READ", 'args["N"]'))
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.strip() == "ok"


def test_prune_reading_a_local_that_key_holds_or_a_factory_value_runs(tmp_path: Path) -> None:
    """A local the ``key=`` value holds (``key=N``) splits nothing, and a prune made by a
    factory that has returned holds a value fixed for the process: both run as before."""
    keyed = TOPK.replace("PRUNE_READ", "N").replace("key=N // 512", "key=N")
    done = _run(tmp_path, "topk_keyed.py", keyed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    factory = TOPK.replace(
        "prune=lambda configs, args: [c for c in configs if PRUNE_READ <= c.BLOCK < 2 * PRUNE_READ]",
        "prune=at_least(32)",
    ).replace(
        "def topk(x, k):",
        "def at_least(low):\n"
        "    return lambda configs, args: [c for c in configs if c.BLOCK >= max(low, args['N'])]\n"
        "\n\ndef topk(x, k):",
    )
    done = _run(tmp_path, "topk_factory.py", factory)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_prune_reading_a_local_equal_to_a_key_item_only_by_coincidence_is_named(
    tmp_path: Path,
) -> None:
    """A prune reading the caller's ``N`` under ``key=(M, tag)``: ``N`` equals ``tag`` on the
    first call and ``M`` on the second, each call's value found in its own key, so the
    check, judging one call at a time, took the key as holding ``N`` and never refused it
    (another call of the first key with another ``N`` would have reused its decision). The
    check now judges the places the key held ``N`` at over the site's calls: the second
    call, where ``N`` is at no place it was before, names it."""
    script = (
        TOPK.replace("def topk(x, k):", "def topk(x, k, tag):")
        .replace("key=N // 512", "key=(M, tag)")
        .replace("PRUNE_READ", "N")
        .replace(
            "    for N in (100, 200):  # one key= bucket, one class of int (neither a multiple of 16)\n"
            "        x = torch.randn(4, N)\n"
            "        torch.testing.assert_close(topk(x, 3), x.topk(3, dim=1).values)\n",
            "    for M, N, tag in ((4, 100, 100), (200, 200, 0)):  # N is tag's, then M's\n"
            "        x = torch.randn(M, N)\n"
            "        torch.testing.assert_close(topk(x, 3, tag), x.topk(3, dim=1).values)\n"
            "        print('call', M, N)\n",
        )
    )
    assert "key=(M, tag)" in script and "print('call'" in script
    done = _run(tmp_path, "topk_coincide.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["call 4 100"]  # the first call ran
    assert "reads `N` (200) from the function that calls the site" in done.stderr
    assert 'Read it as args["N"]' in done.stderr


TOPK_AT_TOP_LEVEL = """\
import torch
from tunedsl import autotune
from kernels_twentysecond import topk_rows

if torch.get_default_dtype() == torch.float32:  # one name bound in each branch: a constant
    SMALLEST = 32
else:
    SMALLEST = 64
torch.manual_seed(0)
for N in (100, 200):  # one key= bucket, one class of int (neither a multiple of 16)
    x = torch.randn(4, N)
    out = torch.empty(4, 3)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=4, key=N // 512,
             prune=lambda configs, args: [c for c in configs if SMALLEST <= PRUNE_READ <= c.BLOCK < 2 * PRUNE_READ],
             topk_rows(x, out, N, x.stride(0), K=3, BLOCK=$BLOCK))
    torch.testing.assert_close(out, x.topk(3, dim=1).values)
print("ok")
"""


def test_prune_at_a_scripts_top_level_reading_a_loop_variable_is_named(tmp_path: Path) -> None:
    """At a script's top level the loop's ``N`` is a module global: a prune reading it read
    a value no key held, and the decision made for N=100 (BLOCK=128) was launched for N=200,
    whose prune keeps only BLOCK=256, so the top-k came out wrong. The first call now names
    the site, the name, the line that rebinds it and the fix; a module constant bound in
    each branch of an ``if`` (``SMALLEST``) is read without complaint, and the fixed prune
    (``args["N"]``) gives the right result for both sizes."""
    done = _run(tmp_path, "topk_top.py", TOPK_AT_TOP_LEVEL.replace("PRUNE_READ", "N"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "topk_top.py:13:5 (topk_rows)" in done.stderr
    assert "reads `N` (100) from the module, which rebinds it as it runs (line 10)" in done.stderr
    assert 'Read it as args["N"]' in done.stderr
    assert "SMALLEST" not in done.stderr.split("UsageError: ")[1]
    assert "ok" not in done.stdout
    fixed = _run(tmp_path, "topk_top_args.py", TOPK_AT_TOP_LEVEL.replace("PRUNE_READ", 'args["N"]'))
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.strip() == "ok"
    keyed = TOPK_AT_TOP_LEVEL.replace("PRUNE_READ", "N").replace("key=N // 512", "key=N")
    done = _run(tmp_path, "topk_top_keyed.py", keyed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
