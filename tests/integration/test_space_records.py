"""Sites that tune one key from different spaces each keep their own record
(``runtime/space_records.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from runtime_helpers import call, new_process, record_files, site
from runtime_kernels import vadd

from tunedsl import Config, autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]

# One script whose space comes from the environment: two programs tuning one site's key.
SCRIPT = """
import os

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


tiles = [int(t) for t in os.environ["TILES"].split(",")]
n = 100
a = torch.arange(n, dtype=torch.float32)
b = torch.full((n,), 0.5)
c = torch.empty(n)
result = autotune(space=dict(tile=tiles), blocks=cdiv(n, $tile), effort="quick",
                  vadd_kernel(a, b, c, n, TILE=$tile))
assert torch.equal(c, a + b)
print("RESULT", result.source, result.config.tile)
"""


def args(n: int = 256) -> tuple:
    a, b = torch.randn(n), torch.randn(n)
    return (a, b, torch.empty_like(a), n)


def test_two_programs_tuning_one_site_with_different_spaces_each_hit_their_record(
    tmp_path: Path,
) -> None:
    script = tmp_path / "spaces.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    env = {
        **os.environ,
        "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    seen = []
    for tiles in ("16,32", "64,128", "16,32", "64,128"):
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "run", str(script)],
            env={**env, "TILES": tiles},
            capture_output=True,
            text=True,
            timeout=300,
            cwd=str(tmp_path),
        )
        assert done.returncode == 0, done.stderr
        # The other space's record timed none of this one: the warning said its timings
        # were reused.
        assert "its other timings are reused" not in done.stderr, done.stderr
        (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT")]
        _, source, tile = line.split()
        assert int(tile) in [int(t) for t in tiles.split(",")]
        seen.append(source)
    # Each program tuned once; each later run hit its own record (each re-tuned the other's).
    assert seen == ["tuned", "tuned", "disk", "disk"], seen
    files = sorted((tmp_path / "cache" / "records").glob("*.json"))
    spaces = {json.loads(f.read_text())["context"]["space"] for f in files}
    assert len(files) == 2 and len(spaces) == 2


def test_a_record_of_another_space_does_not_decide_this_spaces_key(tune_count: list) -> None:
    wide = call(site("wider", space={"tile": [64, 128, 256]}), vadd, args(), 256)
    assert wide.source == "tuned"
    # The wider space's record measured 64 and 128 too, but was not chosen from this space:
    # its timings are reused, its choice does not decide.
    narrow_site = site("wider", space={"tile": [64, 128]})
    narrow = call(narrow_site, vadd, args(), 256)
    assert narrow.source == "tuned" and narrow.config.tile in (64, 128)
    assert set(tune_count[1].previous) == {Config(tile=64), Config(tile=128)}
    assert len(record_files()) == 2
    new_process(narrow_site)
    for space, tile in (({"tile": [64, 128, 256]}, wide), ({"tile": [64, 128]}, narrow)):
        again = call(site("wider", space=space), vadd, args(), 256)
        assert (again.source, again.config) == ("disk", tile.config)
    assert len(tune_count) == 2


def test_a_record_stating_no_space_still_decides_its_key(tune_count: list) -> None:
    first = call(site("older", space={"tile": [64, 128]}), vadd, args(), 256)
    (path,) = record_files()
    data = json.loads(path.read_text())
    del data["context"]["space"]  # as records were written before they stated their space
    path.write_text(json.dumps(data))
    new_process()
    hit = call(site("older", space={"tile": [64, 128]}), vadd, args(), 256)
    assert (hit.source, hit.config) == ("disk", first.config)
    # Another space tunes beside it, under its own digest; the older record still decides.
    other = call(site("older", space={"tile": [32, 256]}), vadd, args(), 256)
    assert other.source == "tuned" and len(record_files()) == 2
    assert json.loads(path.read_text()) == data
    new_process()
    for space, made in (({"tile": [64, 128]}, first), ({"tile": [32, 256]}, other)):
        again = call(site("older", space=space), vadd, args(), 256)
        assert (again.source, again.config) == ("disk", made.config)
    assert len(tune_count) == 2


def _plain(configs: list[Config], n: int = 256):
    a, b, c, _ = args(n)
    res = autotune_launch(
        vadd,
        space=configs,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        effort="quick",
        name="plain-two-lists",
    )
    torch.testing.assert_close(c, a + b)
    return res


def test_one_autotune_launch_kernel_and_key_with_two_configuration_lists_each_hit(
    tune_count: list,
) -> None:
    from tunedsl.runtime import api

    lists = ([Config(tile=64), Config(tile=128)], [Config(tile=32), Config(tile=256)])
    sources = []
    for configs in (*lists, *lists):
        new_process(*api._sites.values())  # each call as a program of its own
        sources.append(_plain(configs).source)
    assert sources == ["tuned", "tuned", "disk", "disk"], sources
    assert len(tune_count) == 2 and len(record_files()) == 2


# Two instances, each with its own space too large to list (searched lazily) filtered by its
# own constraint: a bound method reading the instance's limits.
LAZY_SCRIPT = """
import json

import torch
import triton
import triton.language as tl

from tunedsl import Space, autotune, cdiv


@triton.jit
def fill(out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.full((BLOCK,), 1, tl.int32), mask=offs < n)


class Filler:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi
        # PAD makes the space large: 3 * 5000 points, more than are ever listed
        self.space = Space(BLOCK=[32, 64, 128], PAD=list(range(5000)), constraint=self.ok)

    def ok(self, c):
        return self.lo <= c["BLOCK"] <= self.hi and c["PAD"] < 2

    def __call__(self, out):
        n = out.numel()
        return autotune(space=self.space, blocks=cdiv(n, $BLOCK) + 0 * $PAD, effort="quick",
                        fill(out, n, BLOCK=$BLOCK))


seen = []
for f in (Filler(64, 128), Filler(32, 32), Filler(32, 128)):
    out = torch.zeros(100, dtype=torch.int32)
    r = f(out)
    assert bool((out == 1).all())
    seen.append([r.source, r.config["BLOCK"], r.config["PAD"], f.ok(r.config)])
print("RESULT", json.dumps(seen))
"""


def _run_lazy(script: Path, cache: Path, seed: str) -> tuple[list, str]:
    env = {
        **os.environ,
        "TUNEDSL_CACHE_DIR": str(cache),
        "TRITON_INTERPRET": "1",
        "PYTHONHASHSEED": seed,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(script.parent),
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT")]
    return json.loads(line.split(" ", 1)[1]), done.stderr


def test_lazy_spaces_with_constraints_of_other_instances_each_keep_their_record(
    tmp_path: Path,
) -> None:
    script = tmp_path / "lazy_spaces.py"
    script.write_text(textwrap.dedent(LAZY_SCRIPT).lstrip())
    cache = tmp_path / "cache"
    first, _ = _run_lazy(script, cache, "1")
    # Each instance tuned its own space (the constraints differ only by what self holds; the
    # first one's choice is in the third's space, not chosen from it), and each later one's
    # record went beside the first's, not over it.
    assert [s[0] for s in first] == ["tuned", "tuned", "tuned"], first
    assert all(s[3] for s in first), first
    files = sorted((cache / "records").glob("*.json"))
    spaces = {json.loads(f.read_text())["context"]["space"] for f in files}
    assert len(files) == 3 and len(spaces) == 3, files
    # Another process (another hash seed): each instance hits its own record, with its choice.
    again, err = _run_lazy(script, cache, "2")
    assert "not in the current space" not in err, err
    assert again == [["disk", *s[1:]] for s in first], (first, again)


def test_a_lazy_spaces_record_of_the_digest_naming_only_its_constraint_does_not_decide(
    tmp_path: Path,
) -> None:
    import hashlib

    from tunedsl import Space

    script = tmp_path / "lazy_spaces.py"
    script.write_text(textwrap.dedent(LAZY_SCRIPT).lstrip())
    cache = tmp_path / "cache"
    _run_lazy(script, cache, "1")

    def ok(c):  # named as the instances' constraint: the older digest told no more
        return True

    space = Space(BLOCK=[32, 64, 128], PAD=list(range(5000)), constraint=ok)
    older = hashlib.sha256(("lazy:" + repr(space)).encode()).hexdigest()[:32]
    for path in (cache / "records").glob("*.json"):  # as written before: either space's
        data = json.loads(path.read_text())
        data["context"]["space"] = older
        path.write_text(json.dumps(data))
    again, _ = _run_lazy(script, cache, "2")
    # Neither record states its instance's space now: each instance tunes its own again.
    assert [s[0] for s in again] == ["tuned"] * 3 and all(s[3] for s in again), again
    third, err = _run_lazy(script, cache, "3")
    assert "not in the current space" not in err, err
    assert third == [["disk", *s[1:]] for s in again], (again, third)


def test_a_lazy_spaces_constraint_under_functools_cache_counts_by_what_it_reads() -> None:
    import functools

    from tunedsl import Space
    from tunedsl.runtime.space_records import constraint_text

    def space(hi: int) -> Space:
        @functools.cache
        def ok(c: Config) -> bool:
            return bool(c["BLOCK"] <= hi)

        return Space(BLOCK=[32, 64, 128], PAD=list(range(5000)), constraint=ok)

    assert constraint_text(space(128)) == constraint_text(space(128))
    assert constraint_text(space(128)) != constraint_text(space(32))
