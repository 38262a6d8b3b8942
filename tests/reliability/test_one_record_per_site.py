"""One site and one key have one record, however the file was loaded: tuned through
precompile's tune mode, then found by ``tunedsl run``, the import hook (from the project
root and from inside the package) and ``python -m``; a plain ``autotune_launch`` script
alike; records written under the module-name identity are still found and moved.

Real subprocesses, real kernels under Triton's interpreter, real record files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import child_env, load_json, record_files, run_tunedsl, write_script

pytestmark = pytest.mark.needs_triton

KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)
"""

# A DSL module inside a package: a site, a workload for precompile, a main.
DSL = (
    KERNEL
    + """
from tunedsl import autotune, cdiv, workload


def add(n):
    a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
    r = autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), effort="quick",
                 vadd_kernel(a, b, c, n, TILE=$tile))
    assert torch.equal(c, a + b)
    return r


@workload
def warm():
    add(40)


def main():
    r = add(40)
    print("RESULT", r.source, r.site, r.digest, flush=True)


if __name__ == "__main__":
    main()
"""
)

# A plain Python script of the same package using the plain API.
PLAIN = (
    KERNEL
    + """
from tunedsl import autotune_launch, cdiv

n = 40
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
r = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
assert torch.equal(c, a + b)
print("RESULT", r.source, r.site, r.digest, flush=True)
"""
)

# What `tunedsl precompile --tune FILE` does once it has a GPU (precompile() refuses
# --tune under the interpreter): import the file as precompile does, call its workloads in
# tune mode, report through the CLI's progress line and summary.
PRECOMPILE_TUNE = """
import sys
from tunedsl.cli.precompile import Progress, tuned_text
from tunedsl.precompile.run import Summary, run_workloads
from tunedsl.precompile.workload import precompile_mode

progress, summary = Progress(sys.stdout), Summary()
with precompile_mode(tune=True, on_result=progress.update) as session:
    run_workloads(sys.argv[1:], session, summary)
summary.reports.extend(session.reports)
assert not summary.errors, summary.errors
progress.done()
print(tuned_text(summary))
"""


def _package(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write_script(pkg / "mm.py", DSL)
    write_script(pkg / "plain.py", PLAIN)
    return pkg


def _python(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], env=env, cwd=str(cwd), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def _result(out: subprocess.CompletedProcess[str]) -> tuple[str, str, str]:
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [line.split()[1:4] for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert len(lines) == 1, out.stdout
    return lines[0][0], lines[0][1], lines[0][2]


HOOK = "import tunedsl.activate; import {module} as m; m.main()"


def test_a_record_precompile_tuned_serves_run_the_import_hook_and_python_m(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    env = child_env(cache)
    pkg = _package(tmp_path)
    mm = pkg / "mm.py"

    tuned = _python(env, tmp_path, "-c", PRECOMPILE_TUNE, str(mm))
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    # The summary says what was tuned, not only "compiled 0 cached 0".
    assert "tuned 1" in tuned.stdout and "tuned 1 key of 1 site" in tuned.stdout
    assert str(cache / "records") in tuned.stdout
    [record] = record_files(cache)
    assert load_json(record)["site"] == "pkg/mm.py:add:vadd_kernel"

    ways = {
        "tunedsl run": run_tunedsl(mm, env),
        "import hook": _python(env, tmp_path, "-c", HOOK.format(module="pkg.mm")),
        "import hook inside the package": _python(env, pkg, "-c", HOOK.format(module="mm")),
        "python -m": _python(
            env, tmp_path, "-c", "import runpy, tunedsl.activate; "
            "runpy.run_module('pkg.mm', run_name='__main__')",
        ),
    }  # fmt: skip
    for way, out in ways.items():
        source, site, digest = _result(out)
        assert (way, source, site, digest) == (
            way,
            "disk",
            "pkg/mm.py:add:vadd_kernel",
            record.stem,
        )
    assert record_files(cache) == [record]  # no second record


def test_a_plain_script_has_one_record_as_a_script_with_python_m_and_imported(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    env = child_env(cache)
    _package(tmp_path)
    source, site, digest = _result(_python(env, tmp_path, "pkg/plain.py"))
    assert (source, site) == ("tuned", "pkg/plain.py:<module>:autotune_launch")
    for argv in (["-m", "pkg.plain"], ["-c", "import pkg.plain"]):
        assert _result(_python(env, tmp_path, *argv)) == ("disk", site, digest), argv
    assert [p.stem for p in record_files(cache)] == [digest]


# Rewrites the record of pkg/mm.py's site into the one the module-name identity wrote:
# the site named by the file's base name, the kernel keyed by the module's name.
TO_OLD_FORMAT = """
import os, sys
import tunedsl.activate
from tunedsl.backends import triton as bt
from tunedsl.model.key_digest import KeyDigest
from tunedsl.model import keys
from tunedsl.runtime import decide
from tunedsl.store import atomic, records
import pkg.mm as mm

module, digest = sys.argv[1], sys.argv[2]
[site] = [v for k, v in vars(mm).items() if k.startswith("__tunedsl_site_")]
ctx = decide.context(bt.kernel_info(mm.vadd_kernel), site.settings(None))
kernel = {k: v for k, v in ctx["kernel"].items() if k != "file"}
ctx["kernel"] = {**kernel, "module": module}
new = records.load_record(digest)
old_site = "mm.py:add:vadd_kernel"
old_digest = KeyDigest(old_site, ctx)(new.key)
data = new.to_json()
data.update(site=old_site, digest=old_digest)
os.unlink(records.record_path(digest))
atomic.write_json(records.record_path(old_digest), data)
print("OLD", old_digest)
"""


@pytest.mark.parametrize("module", ["mm", "__main__"])  # precompile's, tunedsl run's
def test_a_record_under_the_module_name_identity_is_found_and_moved(
    tmp_path: Path, module: str
) -> None:
    cache = tmp_path / "cache"
    env = child_env(cache)
    mm = _package(tmp_path) / "mm.py"
    source, site, digest = _result(run_tunedsl(mm, env))
    assert source == "tuned"
    old = _python(env, tmp_path, "-c", TO_OLD_FORMAT, module, digest)
    assert old.returncode == 0, old.stderr
    old_digest = old.stdout.split()[-1]
    assert [p.stem for p in record_files(cache)] == [old_digest]

    assert _result(run_tunedsl(mm, env)) == ("disk", site, digest)
    [moved] = record_files(cache)
    assert moved.stem == digest and json.loads(moved.read_text())["site"] == site


@pytest.mark.parametrize("change", ["blocks= edited", "another file of the same name"])
def test_a_record_under_the_module_name_identity_is_not_moved_to_another_launch(
    tmp_path: Path, change: str
) -> None:
    # Records keyed by module name predate the launch text in the digest: one was moved to
    # the site however its blocks= or $ arguments were written since, or to a file of the
    # same name elsewhere, and served as a decision measured on other launches.
    cache = tmp_path / "cache"
    env = child_env(cache)
    mm = _package(tmp_path) / "mm.py"
    source, site, digest = _result(run_tunedsl(mm, env))
    old = _python(env, tmp_path, "-c", TO_OLD_FORMAT, "__main__", digest)
    assert old.returncode == 0, old.stderr
    old_digest = old.stdout.split()[-1]
    edited = DSL.replace("blocks=cdiv(n, $tile)", "blocks=cdiv(n, $tile) + 1")
    if change == "blocks= edited":
        time.sleep(0.05)  # the edit is after the record was measured
        write_script(mm, edited)
        target = mm
    else:  # another project: the same package path, its own launch, written before
        other = tmp_path / "other"
        other.mkdir()
        target = _package(other) / "mm.py"
        write_script(target, edited)
        before = json.loads((cache / "records" / f"{old_digest}.json").read_text())["timestamp"]
        os.utime(target, (before - 60, before - 60))
    source, new_site, new_digest = _result(run_tunedsl(target, env))
    assert (source, new_site) == ("tuned", site) and new_digest != digest
    assert sorted(p.stem for p in record_files(cache)) == sorted([old_digest, new_digest])
