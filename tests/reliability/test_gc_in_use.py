"""``tunedsl cache gc`` keeps the records runs still find: a run finds a record by its site's
identity (the file's path from its package root), not by where the file was when the record
was tuned, so a moved project, or records imported from a machine where the project lives
elsewhere, keep theirs. Real projects, real ``tunedsl`` subprocesses, real record files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import child_env, record_files, run_tunedsl, write_script

pytestmark = pytest.mark.needs_triton

HELPERS = """
import triton
import triton.language as tl  # noqa: F401 (the interpreter looks for it)


@triton.jit
def combine(x, y):
    return y + x
"""

SCRIPT = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv
from gc_helpers import combine


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(c + i, combine(tl.load(a + i, mask=m), tl.load(b + i, mask=m)), mask=m)


def add(n):
    a, b = torch.arange(n, dtype=torch.float32), torch.ones(n)
    c = torch.empty(n)
    launch = autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), effort="quick",
                      vadd(a, b, c, n, TILE=$tile))
    assert torch.equal(c, a + b)
    return launch


print("RESULT", add(40).source, flush=True)
"""

DAY_S = 86400


def _project(directory: Path) -> Path:
    directory.mkdir(parents=True)
    write_script(directory / "gc_helpers.py", HELPERS)
    return write_script(directory / "gc_add.py", SCRIPT)


def _source(script: Path, env: dict[str, str]) -> str:
    out = run_tunedsl(script, env)
    assert out.returncode == 0, out.stderr
    return next(line.split()[1] for line in out.stdout.splitlines() if line.startswith("RESULT"))


def _cache(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out


def _age(path: Path, days: float) -> None:
    """The record was last used ``days`` ago (as if tuned or imported then)."""
    then = time.time() - days * DAY_S
    os.utime(path, (then, then))


def test_gc_keeps_the_records_of_a_moved_project(tmp_path: Path) -> None:
    """A project tuned in old/ and moved to new/ finds its record there (disk); `cache gc`
    removed it ("its kernel's file .../old/gc_add.py is gone") and the next run under
    TUNEDSL_AUTOTUNE=cached launched the default. A run's hit marks the record used; gc
    keeps a record in use, and collects it once unused for 30 days."""
    env = child_env(tmp_path / "cache")
    assert _source(_project(tmp_path / "old"), env) == "tuned"
    (tmp_path / "old").rename(tmp_path / "new")
    script = tmp_path / "new" / "gc_add.py"
    [record] = record_files(tmp_path / "cache")
    _age(record, 40)  # tuned long ago; the moved project runs today
    assert _source(script, env) == "disk"

    for argv in (["gc", "--dry-run"], ["gc"]):
        out = _cache(env, *argv)
        assert " 0 records, kept 1 (1 in use" in out.stdout, out.stdout
        assert "keeping" in out.stdout and "old/gc_add.py is gone" in out.stdout, out.stdout
        assert "used today" in out.stdout, out.stdout
    assert record_files(tmp_path / "cache") == [record]
    assert time.time() - record.stat().st_mtime < 120  # the hit marked it used
    assert _source(script, {**env, "TUNEDSL_AUTOTUNE": "cached"}) == "disk"

    # Unused for 40 days with its stored file gone: collected, and says why.
    _age(record, 40)
    out = _cache(env, "gc")
    assert "removed 1 record, kept 0" in out.stdout, out.stdout
    assert "not used for 40 days" in out.stdout, out.stdout
    assert record_files(tmp_path / "cache") == []


def test_gc_keeps_imported_records_of_a_project_that_lives_elsewhere(tmp_path: Path) -> None:
    """Records exported where the project lives in a/ and imported where it lives in b/:
    b/'s run used them (disk), then gc removed them because a/ is not on this machine,
    and the next run tuned again."""
    there = child_env(tmp_path / "cache_there")
    assert _source(_project(tmp_path / "a"), there) == "tuned"
    bundle = tmp_path / "records.jsonl"
    _cache(there, "export", str(bundle))

    here = child_env(tmp_path / "cache_here")
    assert "imported 1 record" in _cache(here, "import", str(bundle)).stdout
    [record] = record_files(tmp_path / "cache_here")
    _age(record, 45)  # imported long ago, in use since
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "a")  # the exporting checkout is not on this machine
    script = tmp_path / "b" / "gc_add.py"
    assert _source(script, here) == "disk"

    out = _cache(here, "gc")
    assert "removed 0 records, kept 1" in out.stdout and "a/gc_add.py is gone" in out.stdout
    assert record_files(tmp_path / "cache_here") == [record]
    assert _source(script, here) == "disk"


def test_gc_unused_days_must_be_a_count_of_days(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "gc", "--unused-days", "-1"],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "0 or more" in out.stderr, out.stderr
