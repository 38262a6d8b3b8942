"""``tunedsl.precompile.precompile``: the library function behind the command, called from a
real process (the command only parses and renders around it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

FIXTURES = Path(__file__).parent / "precompile_fixtures"
REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from tunedsl.precompile import Summary, precompile
events = []
summary = precompile(sys.argv[1:], on_result=lambda site, cfg, outcome: events.append(outcome))
assert isinstance(summary, Summary)
print(json.dumps({
    "notes": summary.notes,
    "errors": summary.errors,
    "failed": summary.failed,
    "workload_files": summary.workload_files,
    "interpreted": sum(r.interpreted for r in summary.reports),
    "events": events,
}))
"""


def test_the_library_function_reports_what_it_did(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        TRITON_INTERPRET="1",
        TUNEDSL_NO_AUTO_INTERPRET="1",
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
        PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"),
    )
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(FIXTURES / "good")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert not out["failed"] and out["errors"] == []
    assert out["workload_files"] == 2
    assert out["interpreted"] == 8  # four configurations in each of the two scripts
    assert out["events"] == ["interpreted"] * 8  # on_result heard each one
    assert any("nothing to compile" in n for n in out["notes"])


def test_the_library_function_names_a_missing_path() -> None:
    from tunedsl.errors import UsageError
    from tunedsl.precompile import precompile

    with pytest.raises(UsageError, match=r"no such file or directory: .*nope\.py"):
        precompile([str(FIXTURES / "nope.py")])


PLAIN_API = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def square_kernel(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    v = tl.load(x + i, mask=i < n)
    tl.store(out + i, v * v, mask=i < n)


def square(x):
    out = torch.empty_like(x)
    n = x.numel()
    autotune_launch(square_kernel, space={"tile": [32, 64, 128]},
                    grid=lambda c: (cdiv(n, c.tile),), args=(x, out, n),
                    kwargs=lambda c: {"TILE": c.tile})
    return out


@workload
def warm():
    square(torch.randn(1000))
"""


def test_an_autotune_launch_site_in_a_workload_compiles_like_a_macro_and_never_tunes(
    tmp_path: Path,
) -> None:
    # The plain API's site was not a precompile site: a workload's autotune_launch call tuned
    # and wrote records (or, cross-compiling, failed with "0 active drivers") instead of
    # compiling its configurations, and the summary never listed it.
    script = tmp_path / "plain_api.py"
    script.write_text(PLAIN_API)
    cache = tmp_path / "cache"
    env = dict(os.environ)
    env.update(
        TRITON_INTERPRET="1",
        TUNEDSL_NO_AUTO_INTERPRET="1",
        TUNEDSL_CACHE_DIR=str(cache),
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
    )
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(script)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert not out["failed"] and out["errors"] == []
    assert out["interpreted"] == 3 and out["events"] == ["interpreted"] * 3
    assert not list(cache.glob("records/*.json"))  # compiled only: nothing tuned


CROSS = """
import json, os, sys
from tunedsl.precompile import precompile
summary = precompile(sys.argv[1:], target="cuda:90")
print(json.dumps({
    "failed": summary.failed,
    "errors": summary.errors,
    "compiled": sum(r.compiled + r.cached for r in summary.reports),
    "interpret": os.environ.get("TRITON_INTERPRET"),
}))
"""


def test_the_library_function_cross_compiles_without_turning_the_interpreter_on_or_warning(
    tmp_path: Path,
) -> None:
    # Without a GPU, importing the scripts through the import hook (after precompile had
    # imported Triton) warned that kernels would fail with '0 active drivers', which is not
    # so: precompile(target=...) compiles and launches nothing. The command kept the hook
    # off with TUNEDSL_NO_AUTO_INTERPRET=1; the library function it calls did not.
    env = dict(os.environ)
    for name in ("TRITON_INTERPRET", "TUNEDSL_NO_AUTO_INTERPRET", "TUNEDSL_QUIET"):
        env.pop(name, None)
    env.update(
        TUNEDSL_CACHE_DIR=str(tmp_path / "cache"),
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
        PYTHONWARNINGS="ignore::UserWarning:triton.knobs",
    )
    run = subprocess.run(
        [sys.executable, "-c", CROSS, str(FIXTURES / "good" / "dsl_scale.py")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert not out["failed"] and out["errors"] == [], out
    assert out["compiled"] > 0 and out["interpret"] is None
    assert "active drivers" not in run.stderr and "tunedsl: warning" not in run.stderr, run.stderr
