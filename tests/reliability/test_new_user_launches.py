"""Launches a new user writes whose grid and kernel disagree, which used to give a wrong
result in silence or a misleading error: each is now named at the user's line, or runs.

Real kernels under Triton's interpreter, run by ``tunedsl run`` in a subprocess (the helpers
of ``test_new_user_mistakes.py``); the scripts check their own results.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_new_user_mistakes import _line_of, _run

pytestmark = pytest.mark.needs_triton


@pytest.mark.parametrize(
    "launch",
    [
        "autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=64))",
        "autotune(space=[dict(tile=64, num_warps=2), dict(tile=128, num_warps=4)],"
        " blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=64))",
        "autotune_launch(vadd, space={'tile': [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),"
        " args=(a, b, c, n), kwargs={'TILE': 64})",
    ],
    ids=["dsl", "dsl-list-space", "autotune_launch"],
)
def test_a_lowercase_field_for_an_uppercase_parameter_given_a_fixed_value_is_an_error(
    tmp_path: Path, launch: str
) -> None:
    # The README's spelling (field `tile`, parameter `TILE`) with `TILE=64` written for
    # `TILE=$tile`: only a field spelled exactly like the parameter was checked, so every
    # configuration ran TILE=64 while the grid followed `tile`, and tile=128 (half the
    # programs, timed fastest) was chosen: half of c was never written, in silence.
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
    assert "space field `tile` takes 2 values" in proc.stderr, proc.stderr
    assert "passes `TILE=64` to the kernel's parameter `TILE` under every configuration" in (
        proc.stderr
    )
    assert "`TILE=$tile`" in proc.stderr
    assert f'user_script.py", line {_line_of(tmp_path, "# HERE")}' in proc.stderr


def test_a_field_that_reaches_another_parameter_is_not_taken_for_one_named_like_it(
    tmp_path: Path,
) -> None:
    # `tile` is given to `T`, and `TILE` (named like it but for another purpose) is fixed:
    # the field reaches the kernel, so no mistake.
    proc = _run(
        tmp_path,
        """
        @triton.jit
        def scaled(a, c, n, TILE: tl.constexpr, T: tl.constexpr):
            i = tl.program_id(0) * T + tl.arange(0, T)
            tl.store(c + i, tl.load(a + i, mask=i < n) * TILE, mask=i < n)


        n = 1000
        a = torch.randn(n)
        c = torch.zeros(n)
        res = autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                       scaled(a, c, n, TILE=2, T=$tile))
        assert torch.allclose(c, a * 2)
        print("ok", res.config)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_a_field_that_only_sizes_the_grid_of_a_kernel_that_ignores_it_is_warned_of(
    tmp_path: Path,
) -> None:
    # `bs` sizes the grid and the launch gives BLOCK=128 under every configuration: each
    # configuration ran one kernel on another number of programs, and bs=256 (half the
    # programs, timed fastest) was chosen: half of c unwritten, in silence.
    proc = _run(
        tmp_path,
        """
        @triton.jit
        def add_one(x, y, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)


        @triton.jit
        def add_one_persistent(x, y, n, BLOCK: tl.constexpr):  # reads the program count
            for t in tl.range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
                i = t * BLOCK + tl.arange(0, BLOCK)
                tl.store(y + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)


        n = 1000
        x = torch.randn(n)
        y = torch.zeros(n)
        autotune(space=dict(progs=[2, 4]), blocks=$progs,  # PERSISTENT
                 add_one_persistent(x, y, n, BLOCK=128))
        assert torch.allclose(y, x + 1)
        print("persistent ok")
        # `pad` reaches neither kernel nor grid: BLOCK moves the grid, not it (no word)
        autotune(space=dict(BS=[64, 128], pad=[0, 1]), blocks=cdiv(n, $BS) + 0 * $pad,
                 add_one(x, y, n, BLOCK=$BS))
        res = autotune(space=dict(bs=[64, 128, 256]), blocks=cdiv(n, $bs),  # HERE
                       add_one(x, y, n, BLOCK=128))
        print("chosen", res.config)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "persistent ok" in proc.stdout
    line = _line_of(tmp_path, "# HERE")
    assert f"user_script.py:{line}: UserWarning" in proc.stderr, proc.stderr
    assert "space field `bs` changes only the grid" in proc.stderr
    assert "tl.num_programs" in proc.stderr and "BLOCK=$bs" not in proc.stderr
    assert proc.stderr.count("changes only the grid") == 1  # the persistent kernel: no word


def test_a_grid_of_a_tl_constexpr_global_launches_its_value(tmp_path: Path) -> None:
    # A persistent kernel's program count kept in one `tl.constexpr` global, the kernel's
    # stride and the grid: such an object is callable (it forwards calls to its value), so
    # blocks=PROGS was refused as "a function", Triton's `lambda meta: ...` idiom.
    proc = _run(
        tmp_path,
        """
        PROGS = tl.constexpr(3)


        @triton.jit
        def triple(x, y, n, TILE: tl.constexpr):
            for t in tl.range(tl.program_id(0), tl.cdiv(n, TILE), PROGS):
                i = t * TILE + tl.arange(0, TILE)
                tl.store(y + i, tl.load(x + i, mask=i < n) * 3, mask=i < n)


        for n in (1000, 1000, 700):
            x, y, z = torch.randn(n), torch.zeros(n), torch.zeros(n)
            res = autotune(space=dict(tile=[32, 64]), blocks=PROGS, triple(x, y, n, TILE=$tile))
            again = autotune(space=dict(tile=[32, 64]), blocks=(PROGS, 1),
                             triple(x, z, n, TILE=$tile))
            assert torch.allclose(y, x * 3) and torch.allclose(z, x * 3)
            print(res.source, again.source)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["tuned", "tuned", "memory", "memory", "tuned", "tuned"]
