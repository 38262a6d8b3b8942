"""Mistakes a new user makes in a first kernel script, which used to give a wrong result in
silence: each is now named at the user's line, or left out of the tuning with a warning.

Real kernels under Triton's interpreter, run by ``tunedsl run`` in a subprocess, so what is
checked is what a user sees; the scripts check their own results.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rel_helpers import child_env

pytestmark = pytest.mark.needs_triton

HEADER = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, autotune_launch, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)


"""


def _run(tmp_path: Path, body: str, *, cache: str = "cache") -> subprocess.CompletedProcess[str]:
    text = HEADER + textwrap.dedent(body).lstrip()
    script = tmp_path / "user_script.py"
    script.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)],
        env=child_env(tmp_path / cache, TUNEDSL_QUIET="1"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )


def _line_of(tmp_path: Path, marker: str) -> int:
    text = (tmp_path / "user_script.py").read_text().splitlines()
    return next(i for i, t in enumerate(text, 1) if marker in t)


def test_a_configuration_whose_grid_is_empty_is_left_out_and_named(tmp_path: Path) -> None:
    # `n // $tile` (cdiv forgotten): tile=256 launches no program for n=200, so it did no
    # work, was timed fastest and was chosen; every later call left `c` unwritten.
    proc = _run(
        tmp_path,
        """
        n = 200
        a, b = torch.randn(n), torch.randn(n)

        def add():
            c = torch.zeros(n)
            res = autotune(space=dict(tile=[64, 128, 256]), blocks=n // $tile,  # HERE
                           vadd(a, b, c, n, TILE=$tile))
            return c, res

        for _ in range(2):
            c, res = add()
            print(res.source, res.config.tile)
            assert res.config.tile != 256, res.config
            assert res.timings[res.config].status == "ok"
        print("failed:", res.timings[res.space[-1]].status, res.timings[res.space[-1]].reason)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "failed: failed its grid (0,) has a zero dimension" in proc.stdout
    line = _line_of(tmp_path, "# HERE")
    assert f"user_script.py:{line}: UserWarning" in proc.stderr, proc.stderr
    assert "Config(tile=256) gives blocks= a grid of (0,)" in proc.stderr
    assert "blocks=cdiv(n, $tile)" in proc.stderr
    assert proc.stderr.count("launches no program") == 1  # once, not per call


def test_a_call_whose_every_grid_is_empty_still_runs(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        """
        a = torch.randn(0)
        c = torch.empty(0)
        res = autotune(space=dict(tile=[64, 128]), blocks=cdiv(0, $tile), vadd(a, a, c, 0, TILE=$tile))
        print("ok", res.source)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok empty" in proc.stdout
    assert "launches no program" not in proc.stderr


def test_an_empty_call_decides_nothing_for_its_key_bucket(tmp_path: Path) -> None:
    """n=0 shares the bucket (and Triton's int class) of n=16, n=64...: a tune of the empty
    call would time launches that run nothing, and its pick would decide every size of the
    bucket, in this process and, through its record, in the next."""
    proc = _run(
        tmp_path,
        """
        import os
        from pathlib import Path

        def add(a, b, c, n):
            return autotune(space=dict(tile=[16, 32, 64, 128]), blocks=cdiv(n, $tile),
                            key=n // 1024, vadd(a, b, c, n, TILE=$tile))

        def records():
            return sorted(Path(os.environ["TUNEDSL_CACHE_DIR"]).rglob("*.json"))

        before = records()
        e = torch.empty(0)
        for _ in range(2):
            print("empty:", add(e, e, torch.empty(0), 0).source)
        print("records after the empty calls:", len(records()) - len(before))
        a = torch.randn(64)
        c = torch.empty(64)
        res = add(a, a, c, 64)
        assert torch.equal(c, a + a)
        print("64:", res.source, len(records()) - len(before))
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("empty: empty") == 2, proc.stdout
    assert "records after the empty calls: 0" in proc.stdout
    assert "64: tuned 1" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    "launch",
    [
        "autotune(space=dict(TILE=[64, 128]), blocks=cdiv(n, $TILE), vadd(a, b, c, n, TILE=64))",
        "autotune(space=dict(TILE=[64, 128]), blocks=cdiv(n, $TILE), vadd(a, b, c, n, 64))",
        "autotune_launch(vadd, space={'TILE': [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.TILE),),"
        " args=(a, b, c, n), kwargs={'TILE': 64})",
    ],
    ids=["dsl-keyword", "dsl-positional", "autotune_launch"],
)
def test_a_field_named_like_a_parameter_given_a_fixed_value_is_an_error(
    tmp_path: Path, launch: str
) -> None:
    # The kernel ran with TILE=64 under every configuration while the grid followed the
    # field: the first call's result was right by chance (an earlier configuration had
    # written c), every later call with TILE=128 covered half of c.
    proc = _run(
        tmp_path,
        f"""
        n = 1000
        a, b = torch.randn(n), torch.randn(n)
        c = torch.zeros(n)
        res = {launch}  # HERE
        print("launched", res.config)
        """,
    )
    assert proc.returncode == 1, proc.stdout
    assert "launched" not in proc.stdout
    assert "UsageError" in proc.stderr
    assert "space field `TILE` takes 2 values" in proc.stderr
    assert "passes `TILE=64` to the kernel's parameter `TILE` under every configuration" in (
        proc.stderr
    )
    assert f'user_script.py", line {_line_of(tmp_path, "# HERE")}' in proc.stderr
    assert "tunedsl/runtime" not in proc.stderr, proc.stderr


def test_a_field_passed_through_an_expression_is_accepted(tmp_path: Path) -> None:
    # The field reaches the parameter (transformed): no mistake.
    proc = _run(
        tmp_path,
        """
        n = 1000
        a, b = torch.randn(n), torch.randn(n)
        for _ in range(2):
            c = torch.zeros(n)
            res = autotune(space=dict(TILE=[32, 64]), blocks=cdiv(n, 2 * $TILE),
                           vadd(a, b, c, n, TILE=2 * $TILE))
            assert torch.allclose(c, a + b)
        print("ok", res.config)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_an_expression_raising_under_one_configuration_names_it(tmp_path: Path) -> None:
    # `tile=0` in the space: cdiv raised ZeroDivisionError from tunedsl's frames, with no
    # word of which configuration; the user's exception is kept, with a note naming it.
    proc = _run(
        tmp_path,
        """
        n = 1000
        a, b, c = torch.randn(n), torch.randn(n), torch.zeros(n)
        space = dict(tile=[64, 0])
        autotune(space=space, blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=$tile))  # HERE
        """,
    )
    assert proc.returncode == 1, proc.stdout
    line = _line_of(tmp_path, "# HERE")
    assert "ZeroDivisionError" in proc.stderr
    assert f'user_script.py", line {line}, in <lambda>' in proc.stderr  # the expression
    if sys.version_info >= (3, 11):  # exception notes
        assert (
            f"user_script.py:{line}:1 (vadd): raised by blocks= or the launch's arguments "
            "under Config(tile=0)"
        ) in proc.stderr, proc.stderr


def test_a_float_grid_says_it_is_a_float(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        """
        n = 1000
        a, b, c = torch.randn(n), torch.randn(n), torch.zeros(n)
        autotune(space=dict(tile=[32, 64]), blocks=cdiv(n / 2, $tile), vadd(a, b, c, n, TILE=$tile))
        """,
    )
    assert proc.returncode == 1, proc.stdout
    assert "got (16.0,): 16.0 is a float (`/` divides into one)" in proc.stderr, proc.stderr
    assert "blocks=cdiv(n, $tile)" in proc.stderr
    # Only cdiv: `//` and int() round down, so they drop the last, partial block.
    assert "`//`" not in proc.stderr and "int()" not in proc.stderr, proc.stderr
    assert "cdiv rounds up, so the last, partial block is launched" in proc.stderr


ROWSUM = """
@triton.jit
def rowsum(x, out, M, N, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x + r * N + cols, mask=cols < N, other=0.0)
    tl.store(out + r, tl.sum(acc))


def rsum(x):
    M, N = x.shape
    out = torch.empty(M)
    res = autotune(space=dict(block=[32, 64, 128]), blocks=M, key=KEY,
                   prune=lambda cs, args: [c for c in cs if c.block <= args["N"]],
                   rowsum(x, out, M, N, BLOCK=$block))
    assert torch.allclose(out, x.sum(1), atol=1e-4)
    return res


for n in (40, 100, 100):
    print(rsum(torch.randn(4, n)).source)
"""


@pytest.mark.parametrize(
    ("key", "warns"), [("N", False), ("(M, N)", False), ("x.shape", False), ("N // 64", True)]
)
def test_prune_reading_what_key_holds_is_not_said_to_split_it(
    tmp_path: Path, key: str, warns: bool
) -> None:
    # key=N with a prune= reading N: calls of one key= value agree on N, so no bucket is
    # split; the warning told the user to "key= on what prune= reads", which they did.
    proc = _run(tmp_path, ROWSUM.replace("KEY", key))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["default", "tuned", "memory"]  # n=40: one block fits
    assert ("key= no longer groups calls" in proc.stderr) is warns, proc.stderr


ROWCOPY = """
@triton.jit
def rowcopy(x, y, M, N, stride, limit, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = (cols < N) & (cols < limit)
    tl.store(y + r * N + cols, tl.load(x + r * stride + cols, mask=m), mask=m)


def copy(x, limit, tag):
    M, N = x.shape
    y = torch.zeros(M, N)
    res = autotune(space=dict(block=[16, 32, 64]), blocks=M, key=KEY,
                   prune=lambda cs, args: [c for c in cs if READ],
                   rowcopy(x, y, M, N, x.stride(0), limit, BLOCK=$block))
    assert torch.equal(y[:, :limit], x[:, :limit])
    return res


for m, n, limit, tag in CALLS:
    print(copy(torch.randn(m, n), limit, tag).source)
"""


@pytest.mark.parametrize(
    ("key", "read", "calls", "named"),
    [
        # limit == tag on the first call only: the second, of the same key=, shows it.
        ("(N, tag)", 'c.block >= args["limit"]', "(4, 64, 64, 64), (4, 64, 16, 64)", "`limit`"),
        # key=(M, N) written with N: a contiguous x's row stride equals N on every call,
        # yet the key holds N, not the stride.
        (
            "(M, N)",
            'c.block >= min(args["N"], args["stride"])',
            "(4, 32, 32, 0), (4, 64, 64, 0)",
            "`stride`",
        ),
    ],
    ids=["coincidence-on-the-first-call", "equal-to-a-key-item-named-otherwise"],
)
def test_prune_reading_what_key_holds_only_by_coincidence_is_said_to_split_it(
    tmp_path: Path, key: str, read: str, calls: str, named: str
) -> None:
    # The warning compared values on the first call only: a value that equalled a key
    # item there (limit == tag, stride == N) was taken as held, and the calls that split
    # key= buckets later were never told.
    script = ROWCOPY.replace("KEY", key).replace("READ", read).replace("CALLS", f"[{calls}]")
    proc = _run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "no longer groups" in line]
    assert len(warnings) == 1, proc.stderr
    assert f"reads {named}, so each distinct value" in warnings[0], warnings[0]


def test_a_computed_name_that_changes_keeps_the_first_and_warns(tmp_path: Path) -> None:
    # name=f"layer{i}": the site took each new name on a miss and kept deciding hits under
    # the old one, so records were split over names that never meant separate decisions.
    proc = _run(
        tmp_path,
        """
        for i, n in enumerate([1000, 2000, 1000]):
            a, b, c = torch.randn(n), torch.randn(n), torch.zeros(n)
            res = autotune(space=dict(tile=[64, 128]), name=f"layer{i}",  # HERE
                           blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=$tile))
            assert torch.allclose(c, a + b)
            print(res.site, res.source)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["layer0", "tuned", "layer0", "tuned", "layer0", "memory"]
    assert f"user_script.py:{_line_of(tmp_path, '# HERE')}: UserWarning" in proc.stderr
    assert "name= gave 'layer1' here but 'layer0' on the site's first call" in proc.stderr
    ls = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "ls", "--json"],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sorted(r["site"] for r in json.loads(ls.stdout)) == ["layer0", "layer0"]


def test_a_prune_without_return_is_named_as_such(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        """
        def keep_big(configs, args):
            [c for c in configs if c.tile >= 128]  # the `return` forgotten

        n = 1000
        a, b, c = torch.randn(n), torch.randn(n), torch.zeros(n)
        autotune(space=dict(tile=[64, 128]), prune=keep_big, blocks=cdiv(n, $tile),
                 vadd(a, b, c, n, TILE=$tile))
        """,
    )
    assert proc.returncode == 1, proc.stdout
    assert "prune=keep_big returned None (a missing `return`?)" in proc.stderr, proc.stderr


def test_a_relative_cache_dir_stays_put_when_the_script_changes_directory(
    tmp_path: Path,
) -> None:
    # TUNEDSL_CACHE_DIR=rel-cache was resolved against the working directory of each use:
    # after os.chdir the records went to a second cache, and the next run tuned again.
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "user_script.py"
    script.write_text(
        HEADER
        + textwrap.dedent(
            """
            import os

            def add(n):
                a, c = torch.randn(n), torch.zeros(n)
                res = autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                               vadd(a, a, c, n, TILE=$tile))
                assert torch.allclose(c, a + a)
                return res.source

            print(add(100))
            os.chdir("elsewhere")
            print(add(200))
            """
        )
    )
    env = child_env(tmp_path / "unused", TUNEDSL_QUIET="1", TUNEDSL_CACHE_DIR="rel-cache")

    def run() -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "tunedsl", "run", str(script)],
            env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert run() == ["tuned", "tuned"]
    assert not (tmp_path / "elsewhere" / "rel-cache").exists()
    assert len(list((tmp_path / "rel-cache" / "records").glob("*.json"))) == 2
    assert run() == ["disk", "disk"]  # the next run finds both


def test_a_triton_style_meta_grid_names_the_field_meant(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        """
        n = 1000
        a, b, c = torch.randn(n), torch.randn(n), torch.zeros(n)
        autotune_launch(vadd, space={"tile": [64, 128]},
                        grid=lambda meta: (cdiv(n, meta["TILE"]),),  # HERE
                        args=lambda cfg: (a, b, c, n, cfg.tile))
        """,
    )
    assert proc.returncode == 1, proc.stdout
    assert "has no field 'TILE'; did you mean 'tile'?" in proc.stderr, proc.stderr
    assert f'user_script.py", line {_line_of(tmp_path, "# HERE")}' in proc.stderr


def test_a_small_in_place_update_is_applied_once_not_once_per_tuning_launch(
    tmp_path: Path,
) -> None:
    # An optimizer step `p -= lr * g` with lr=1e-4 changes p by less than the in-place
    # watch's tolerance (1e-3) per launch: p was taken for an output, and the tuning's
    # launches applied the step dozens of times, in silence. Every written argument is now
    # put back after tuning.
    proc = _run(
        tmp_path,
        """
        @triton.jit
        def sgd(p, g, lr, n, TILE: tl.constexpr):
            i = tl.program_id(0) * TILE + tl.arange(0, TILE)
            m = i < n
            tl.store(p + i, tl.load(p + i, mask=m) - lr * tl.load(g + i, mask=m), mask=m)

        n = 4096
        p, g = torch.randn(n), torch.randn(n)
        expected = p - 1e-4 * g
        res = autotune(space=dict(tile=[64, 128, 256, 512]), blocks=cdiv(n, $tile),
                       sgd(p, g, 1e-4, n, TILE=$tile))
        torch.testing.assert_close(p, expected, rtol=0, atol=1e-6)
        print("one step", res.source)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "one step tuned" in proc.stdout
