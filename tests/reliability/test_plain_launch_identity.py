"""An ``autotune_launch`` call's records are its own launch's: the text of its ``grid=``,
``args=``, ``kwargs=`` and ``key=`` is in their digest, as a DSL site's launch text is. Its
identity counts the function's calls (``#<n>``), so a call inserted above another took that
call's identity, and with it records measured on another grid. Real scripts under
``tunedsl run``, real records, Triton's interpreter."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from rel_helpers import child_env, load_json, record_files, run_tunedsl, write_script

pytestmark = pytest.mark.needs_triton

# STEP is the function's calls of autotune_launch; DOWNGRADE moves each record this run
# tuned to the digest tunedsl gave it before a plain call's launch text was in the digest.
SCRIPT = """
import os
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def vcopy(a, c, n, TILE: tl.constexpr):
    # grid-stride copy: however many programs the grid has cover n
    for s in range(tl.program_id(0) * TILE, n, tl.num_programs(0) * TILE):
        i = s + tl.arange(0, TILE)
        tl.store(c + i, tl.load(a + i, mask=i < n), mask=i < n)


def step(a, c, d, n):
    out = []
# STEP
    return out


n = 1000
a = torch.randn(n)
c, d = torch.zeros_like(a), torch.zeros_like(a)  # the original call's output, the inserted's
results = step(a, c, d, n)
assert torch.equal(c, a) and (len(results) == 1 or torch.equal(d, a))
for what, l in results:
    print("RESULT", what, l.source, l.site, flush=True)
if os.environ.get("DOWNGRADE"):
    from tunedsl.model.key_digest import KeyDigest
    from tunedsl.runtime import api
    from tunedsl.store import atomic, records

    sites = {s.site_id: s for s in api._sites.values()}
    for _, l in results:
        ctx = sites[l.site].context_memo.context
        ctx = {**ctx, "kernel": {k: v for k, v in ctx["kernel"].items() if k != "launch"}}
        data = records.load_record(l.digest).to_json()
        data["kernel"].pop("launch", None)
        data["digest"] = KeyDigest(l.site, ctx)(data["key"])
        os.unlink(records.record_path(l.digest))
        atomic.write_json(records.record_path(data["digest"]), data)
"""

ORIGINAL = """
    out.append(("original", autotune_launch(
        vcopy, space=dict(TILE=[16, 32, 64]), grid=lambda cfg: (cdiv(n, cfg.TILE),),
        args=lambda cfg: (a, c, n, cfg.TILE))))
"""

# A persistent launch of two programs, inserted above: the same kernel and space.
INSERTED = """
    out.append(("inserted", autotune_launch(
        vcopy, space=dict(TILE=[16, 32, 64]), grid=(2,),
        args=lambda cfg: (a, d, n, cfg.TILE))))
"""


def _write(script: Path, *calls: str) -> Path:
    return write_script(script, SCRIPT.replace("# STEP\n", "".join(c.lstrip("\n") for c in calls)))


def _results(out: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
    assert out.returncode == 0, out.stderr
    return [
        tuple(line.split()[1:4]) for line in out.stdout.splitlines() if line.startswith("RESULT")
    ]  # type: ignore[misc]


def _launches(cache: Path) -> list[tuple[str, str | None]]:
    found = [(d["site"], d["kernel"].get("launch")) for d in map(load_json, record_files(cache))]
    return sorted(found, key=lambda item: (item[0], item[1] or ""))


SITE = "plain_order.py:step:autotune_launch"
LAUNCH = "grid=lambda cfg : (cdiv(n, cfg . TILE),); args=lambda cfg : (a, c, n, cfg . TILE)"


def test_a_call_inserted_above_never_takes_the_record_of_the_call_it_displaces(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    env = child_env(cache)
    script = _write(tmp_path / "plain_order.py", ORIGINAL)
    assert _results(run_tunedsl(script, env)) == [("original", "tuned", SITE)]
    # The new call takes the identity the original had (its ordinal): it was handed the
    # record measured on the original's grid, cdiv(n, TILE) programs, for its own 2.
    _write(script, INSERTED, ORIGINAL)
    assert _results(run_tunedsl(script, env)) == [
        ("inserted", "tuned", SITE),
        ("original", "tuned", SITE + "#1"),
    ]
    assert _launches(cache) == [
        (SITE, "grid=(2,); args=lambda cfg : (a, d, n, cfg . TILE)"),
        (SITE, LAUNCH),
        (SITE + "#1", LAUNCH),
    ]
    assert [s for _, s, _ in _results(run_tunedsl(script, env))] == ["disk", "disk"]
    # Spacing, line breaks and comments in grid= are no edit of the launch; its text is.
    spaced = ORIGINAL.replace("(cdiv(n, cfg.TILE),)", "(cdiv(n,\n  cfg.TILE),  # one per tile\n)")
    _write(script, INSERTED, spaced)
    assert [s for _, s, _ in _results(run_tunedsl(script, env))] == ["disk", "disk"]
    _write(script, INSERTED, ORIGINAL.replace("cdiv(n, cfg.TILE)", "cdiv(n, 2 * cfg.TILE)"))
    assert [s for _, s, _ in _results(run_tunedsl(script, env))] == ["disk", "tuned"]


def test_a_record_from_before_the_launch_was_in_the_digest_moves_only_to_its_own_call(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    script = _write(tmp_path / "plain_order.py", ORIGINAL)
    # The record as tunedsl wrote it before: no launch text, in the digest or the record.
    old = _results(run_tunedsl(script, child_env(cache, DOWNGRADE="1")))
    assert old == [("original", "tuned", SITE)] and _launches(cache) == [(SITE, None)]
    # The file unchanged since it was measured: the record is its call's; moved, not tuned.
    assert _results(run_tunedsl(script, child_env(cache))) == [("original", "disk", SITE)]
    assert _launches(cache) == [(SITE, LAUNCH)]
    for path in record_files(cache):
        path.unlink()
    _results(run_tunedsl(script, child_env(cache, DOWNGRADE="1")))
    # A call inserted above since: the record under the identity it takes now is another
    # call's, measured on another grid, and is never moved onto it.
    _write(script, INSERTED, ORIGINAL)
    assert _results(run_tunedsl(script, child_env(cache))) == [
        ("inserted", "tuned", SITE),
        ("original", "tuned", SITE + "#1"),
    ]
    assert _launches(cache) == [
        (SITE, None),  # the old record stays: no call of this file was measured on it
        (SITE, "grid=(2,); args=lambda cfg : (a, d, n, cfg . TILE)"),
        (SITE + "#1", LAUNCH),
    ]
