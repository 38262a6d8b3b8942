"""A site's records survive edits elsewhere in its file and
upgrades that cannot change the best choice; old records are migrated; ``cache gc`` and
``cache ls`` tell rows apart. Real scripts under ``tunedsl run``, real records."""

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

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)
"""

# Two launches of one kernel in one function, and one at module level; EXTRA is where an
# edit elsewhere in the file goes.
SCRIPT = """
import torch
# EXTRA
from tunedsl import autotune, cdiv
from id_kernels import vadd_kernel


def add(n):
    a, b = torch.arange(n, dtype=torch.float32), torch.ones(n)
    c, d = torch.empty(n), torch.empty(n)
    first = autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), effort="quick",
                     vadd_kernel(a, b, c, n, TILE=$tile))
    second = autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), effort="quick",
                      vadd_kernel(a, b, d, n, TILE=$tile))
    assert torch.equal(c, a + b) and torch.equal(d, a + b)
    return first, second


for r in add(40):
    print("RESULT", r.source, r.site, flush=True)
"""


def _project(directory: Path, extra: str = "") -> Path:
    (directory / "id_kernels.py").write_text(KERNELS.lstrip())
    return write_script(directory / "id_main.py", SCRIPT.replace("# EXTRA", extra))


def _results(out: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    assert out.returncode == 0, out.stderr
    return [
        tuple(line.split()[1:3]) for line in out.stdout.splitlines() if line.startswith("RESULT")
    ]  # type: ignore[misc]


def cache_cmd(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_edits_above_a_site_keep_its_records(tmp_path: Path) -> None:
    """Item 13: adding lines above the macros re-tuned every key (file:line:col ids)."""
    cache = tmp_path / "cache"
    env = child_env(cache)
    script = _project(tmp_path)
    first = _results(run_tunedsl(script, env))
    assert [s for s, _ in first] == ["tuned", "tuned"]
    # The enclosing function, the kernel text and the ordinal name each site.
    assert [site for _, site in first] == [
        "id_main.py:add:vadd_kernel",
        "id_main.py:add:vadd_kernel#1",
    ]
    _project(tmp_path, extra="import os\nimport sys\n\n\nX = 1  # an edit elsewhere")
    again = _results(run_tunedsl(script, env))
    assert [s for s, _ in again] == ["disk", "disk"]
    assert len(record_files(cache)) == 2
    # Each record knows where its site is, with a 1-based column.
    locations = sorted(load_json(p)["location"] for p in record_files(cache))
    assert all(loc.startswith(str(script)) for loc in locations)
    assert {loc.rsplit(":", 1)[1] for loc in locations} == {"13", "14"}  # 0-based 12 and 13


MIXED = """
import torch
# EXTRA
from tunedsl import autotune, autotune_launch, cdiv
from id_kernels import vadd_kernel


def add(n):
    a, b = torch.arange(n, dtype=torch.float32), torch.ones(n)
    c, d = torch.empty(n), torch.empty(n)
    first = autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), effort="quick",
                     vadd_kernel(a, b, c, n, TILE=$tile))
    second = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick",
                             grid=lambda cfg: (cdiv(n, cfg.tile),),
                             args=(a, b, d, n), kwargs=lambda cfg: {"TILE": cfg.tile})
    assert torch.equal(c, a + b) and torch.equal(d, a + b)
    return first, second


for r in add(40):
    print("RESULT", r.source, r.site, flush=True)
"""


def test_a_plain_api_call_in_a_dsl_file_is_named_by_its_function_and_survives_edits_above(
    tmp_path: Path,
) -> None:
    """An autotune_launch call in a module that also uses the macro: Python cannot parse the
    file (`$`), so its site was named by its line (`id_mixed.py:line 13:autotune_launch`) and
    a line added above re-tuned it, orphaning its records and shipped rules."""
    cache = tmp_path / "cache"
    env = child_env(cache)
    (tmp_path / "id_kernels.py").write_text(KERNELS.lstrip())
    script = write_script(tmp_path / "id_mixed.py", MIXED)
    first = _results(run_tunedsl(script, env))
    assert first == [
        ("tuned", "id_mixed.py:add:vadd_kernel"),
        ("tuned", "id_mixed.py:add:autotune_launch"),
    ]
    write_script(script, MIXED.replace("# EXTRA", "import os\nimport sys\n\n\nX = 1"))
    again = _results(run_tunedsl(script, env))
    assert [s for s, _ in again] == ["disk", "disk"]
    assert len(record_files(cache)) == 2


def test_ls_tells_rows_apart_and_counts_columns_from_one(tmp_path: Path) -> None:
    """Items 13 and 21: `cache ls` shows the key and the 1-based location of each row."""
    cache = tmp_path / "cache"
    env = child_env(cache)
    script = _project(tmp_path)
    _results(run_tunedsl(script, env))
    rows = json.loads(cache_cmd(env, "ls", "--json").stdout)
    assert all(isinstance(r["key"], dict) and r["key"] for r in rows)
    text = cache_cmd(env, "ls").stdout
    assert text.count("key {") == 2
    key_text = json.dumps(rows[0]["key"], sort_keys=True, separators=(",", ":"))
    assert key_text[:40] in text
    assert f"{script}:10:13" in text  # the first macro: line 10, column 13 counted from 1


def test_ls_of_a_legacy_record_shows_its_column_from_one(tmp_path: Path) -> None:
    """Item 21: a record named `file:line:col` (0-based, tunedsl 0.1) is listed 1-based;
    control characters in a record are escaped, not sent to the terminal."""
    cache = tmp_path / "cache"
    env = child_env(cache)
    _results(run_tunedsl(_project(tmp_path), env))
    path = record_files(cache)[0]
    data = load_json(path)
    data["site"], data["location"] = "id_main.py:10:12", ""
    data["kernel"]["qualname"] = "evil\x1b[2Jkernel"
    path.write_text(json.dumps(data))
    out = cache_cmd(env, "ls")
    assert "id_main.py:10:12 (id_main.py:10:13)" in out.stdout
    assert "\x1b" not in out.stdout and "evil\\x1b[2Jkernel" in out.stdout


MIGRATE = """
import json, os, sys
import torch
from tunedsl.backends import triton as bt
from tunedsl.model.key_digest import KeyDigest
from tunedsl.model import keys
from tunedsl.runtime import decide, dsl
from tunedsl.store import atomic, paths, records
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from id_kernels import vadd_kernel


NAME = sys.argv[2] if len(sys.argv) > 2 else None


def make():
    options = {"effort": "quick", **({"name": NAME} if NAME else {})}
    return dsl.make_site(filename=__file__, line=30, col=4, kernel_text="vadd_kernel",
                         space={"tile": [16, 32]}, static_hints={}, options=options,
                         scope="main", ordinal=0)


def call(site, n=40):
    a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
    r = site(vadd_kernel, (a, b, c, n), {},
             lambda cfg: ((), {"TILE": cfg.tile}, ((n + cfg.tile - 1) // cfg.tile,)), None, None)
    assert torch.equal(c, a + b)
    return r


if sys.argv[1] == "legacy":
    # Write the record tunedsl 0.1 would have: site file:line:col, every version keyed.
    site = make()
    r = call(site)
    new = records.load_record(r.digest)
    ctx = decide.context(bt.kernel_info(vadd_kernel), site.settings(None))
    ctx["toolchain"] = bt.toolchain()
    # 0.1 keyed the kernel by its module name, not its file.
    ctx["kernel"] = {**ctx["kernel"], "module": "id_kernels"}
    del ctx["kernel"]["file"]
    legacy = NAME or "id_migrate.py:30:4"
    old_digest = KeyDigest(legacy, ctx)(new.key)
    data = new.to_json()
    data.update(site=legacy, digest=old_digest, location="")
    os.unlink(records.record_path(r.digest))
    atomic.write_json(records.record_path(old_digest), data)
    print("LEGACY", old_digest, r.digest, r.config.tile)
else:
    r = call(make())
    print("NOW", r.source, r.digest, r.config.tile, r.site)
"""


@pytest.mark.parametrize("name", [None, "named-site"])
def test_records_of_the_old_identity_are_migrated(tmp_path: Path, name: str | None) -> None:
    """Items 13 and 14: a record tunedsl 0.1 stored (site `file:line:col`, or `name=`;
    torch's and tunedsl's versions in the digest) is found, re-stored under the new
    identity and digest (its old file removed), and used without tuning."""
    extra = [name] if name else []
    cache = tmp_path / "cache"
    env = child_env(cache)
    (tmp_path / "id_kernels.py").write_text(KERNELS.lstrip())
    script = write_script(tmp_path / "id_migrate.py", MIGRATE)
    out = subprocess.run(
        [sys.executable, str(script), "legacy", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    _, old_digest, new_digest, tile = out.stdout.split()[-4:]
    assert [p.stem for p in record_files(cache)] == [old_digest]
    out = subprocess.run(
        [sys.executable, str(script), "now", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    _, source, digest, now_tile, site = out.stdout.split()[-5:]
    assert (source, digest, now_tile, site) == (
        "disk",
        new_digest,
        tile,
        name or "id_migrate.py:main:vadd_kernel",
    )
    assert [p.stem for p in record_files(cache)] == [new_digest]
    assert load_json(record_files(cache)[0])["site"] == site


UPGRADE = """
import sys
import torch, triton
import tunedsl
from tunedsl import autotune_launch, cdiv
from id_kernels import vadd_kernel

what = sys.argv[1]
if what == "torch":
    torch.__version__ = "99.0.0"
elif what == "tunedsl":
    tunedsl.__version__ = "99.0.0"
elif what == "triton":
    triton.__version__ = "99.0.0"
n = 40
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
r = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
assert torch.equal(c, a + b)
print("RESULT", r.source, r.site)
"""


def test_upgrades_of_torch_or_tunedsl_keep_records_triton_does_not(tmp_path: Path) -> None:
    """Item 14: torch's and tunedsl's versions were in every digest, so any upgrade re-tuned
    everything. They are recorded, not keyed; Triton's version still keys."""
    cache = tmp_path / "cache"
    env = child_env(cache)
    (tmp_path / "id_kernels.py").write_text(KERNELS.lstrip())
    script = write_script(tmp_path / "id_upgrade.py", UPGRADE)

    def run(what: str) -> tuple[str, str]:
        out = subprocess.run(
            [sys.executable, str(script), what],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            cwd=str(tmp_path),
        )
        assert out.returncode == 0, out.stderr
        return tuple(out.stdout.split()[-2:])  # type: ignore[return-value]

    source, site = run("same")
    assert source == "tuned" and site == "id_upgrade.py:<module>:autotune_launch"
    assert run("torch")[0] == "disk"
    assert run("tunedsl")[0] == "disk"
    assert run("triton")[0] == "tuned"
    versions = [load_json(p)["versions"] for p in record_files(cache)]
    assert sorted(v["triton"] for v in versions)[-1] == "99.0.0"
    assert all("torch" in v and "tunedsl" in v for v in versions)


def test_gc_removes_records_of_gone_sites_and_other_tritons(tmp_path: Path) -> None:
    """Item 13: `cache gc [--dry-run]` removes records no run can use any more."""
    cache = tmp_path / "cache"
    env = child_env(cache)
    script = _project(tmp_path)
    _results(run_tunedsl(script, env))
    paths = record_files(cache)
    assert len(paths) == 2
    # One record written by another Triton; the other site keeps its record.
    other = load_json(paths[0])
    other["versions"]["triton"] = "0.0.1"
    paths[0].write_text(json.dumps(other))
    (cache / "locks").mkdir(exist_ok=True)
    (cache / "locks" / f"{paths[0].stem}.lock").write_text("")

    dry = cache_cmd(env, "gc", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would remove 1 record, kept 1" in dry.stdout and "Triton 0.0.1" in dry.stdout
    assert len(record_files(cache)) == 2
    done = cache_cmd(env, "gc")
    assert "removed 1 record, kept 1" in done.stdout
    assert record_files(cache) == [paths[1]]
    assert not (cache / "locks" / f"{paths[0].stem}.lock").exists()  # its lock went too

    # The function holding the sites is renamed: the remaining record's site is gone.
    script.write_text(
        script.read_text().replace("def add(", "def plus(").replace("add(40)", "plus(40)")
    )
    # Another copy of the script may still have it (a run finds records by site identity):
    # kept while in use, collected once unused for 30 days.
    done = cache_cmd(env, "gc")
    assert "removed 0 records, kept 1" in done.stdout and "function add" in done.stdout
    old = time.time() - 31 * 86400
    os.utime(paths[1], (old, old))
    done = cache_cmd(env, "gc")
    assert "removed 1 record, kept 0" in done.stdout and "function add" in done.stdout
    assert "not used for 31 days" in done.stdout
    # The script itself removed: nothing left to collect, nothing else touched.
    assert "removed 0 records, kept 0" in cache_cmd(env, "gc").stdout


# A kernel that reads a tl.constexpr global, directly and through a @jit helper: each
# one's value decides which tiles compile at all.
CONSTEXPR_GLOBALS = """
import os
import sys

import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv

LIMIT: tl.constexpr = tl.constexpr(int(os.environ["LIMIT"]))
HELPER_LIMIT: tl.constexpr = tl.constexpr(int(os.environ["HELPER_LIMIT"]))


@triton.jit
def check(TILE: tl.constexpr):
    tl.static_assert(TILE <= HELPER_LIMIT)


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    tl.static_assert(TILE <= LIMIT)
    check(TILE)
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


n = 100
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
r = autotune_launch(vadd_kernel, space={"tile": [16, 64]}, effort="quick", name="constexpr-globals",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
assert torch.equal(c, a + b)
print("RESULT", r.source, r.config.tile, flush=True)
"""


@pytest.mark.parametrize("lowered", ["LIMIT", "HELPER_LIMIT"])
def test_an_edited_constexpr_global_is_a_new_kernel(tmp_path: Path, lowered: str) -> None:
    """A ``tl.constexpr`` global the kernel (or a @jit helper it calls) reads is part of
    the kernel, as it is of Triton's own hash: a record tuned under one
    value is not used under another (where the chosen tile no longer compiles)."""
    script = write_script(tmp_path / "constexpr_globals.py", CONSTEXPR_GLOBALS)
    limits = {"LIMIT": "64", "HELPER_LIMIT": "64"}

    def run(**changed: str) -> tuple[str, str]:
        env = child_env(tmp_path / "cache", **{**limits, **changed})
        out = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180
        )
        assert out.returncode == 0, out.stderr
        line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
        return line.split()[1], line.split()[2]

    first = run()
    assert first[0] == "tuned"
    assert run() == ("disk", first[1])  # same values: the record is used
    assert run(**{lowered: "16"}) == ("tuned", "16")  # only tile 16 compiles now


HEURISTIC = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


def cap(args):
    return CAP_VALUE


@triton.heuristics({"CAP": cap})
@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr, CAP: tl.constexpr):
    tl.static_assert(TILE <= CAP)
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


n = 100
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
r = autotune_launch(vadd_kernel, space={"tile": [16, 64]}, effort="quick", name="heuristic",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
assert torch.equal(c, a + b)
print("RESULT", r.source, r.config.tile, flush=True)
"""


def test_an_edited_heuristic_function_is_a_new_kernel(tmp_path: Path) -> None:
    """A function ``@triton.heuristics`` computes a parameter with, defined apart from the
    decorator, is part of the kernel: edited, the same configuration launches another
    kernel, so a record tuned under the old one is not used (it was: the digest covered the
    kernel's source and decorators, not the function they name)."""

    def run(cap: str) -> tuple[str, str]:
        script = write_script(tmp_path / "heuristic.py", HEURISTIC.replace("CAP_VALUE", cap))
        out = subprocess.run(
            [sys.executable, str(script)],
            env=child_env(tmp_path / "cache"),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert out.returncode == 0, out.stderr
        line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
        return line.split()[1], line.split()[2]

    first = run("64")
    assert first[0] == "tuned"
    assert run("64") == ("disk", first[1])  # the same function: the record is used
    assert run("16") == ("tuned", "16")  # only tile 16 compiles under the edited one
