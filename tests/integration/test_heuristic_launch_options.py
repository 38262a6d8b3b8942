"""A ``@triton.heuristics`` that reads a launch option of the configuration
(``args["num_warps"]``), as Triton's heuristics see them under ``triton.autotune``: tuned
and launched under the interpreter too. A real kernel under Triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton


@triton.heuristics({"ROWS": lambda args: args["num_warps"]})
@triton.jit
def rowsum(X, OUT, R, C, ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_C)
    mask = (r[:, None] < R) & (c[None, :] < C)
    x = tl.load(X + r[:, None] * C + c[None, :], mask=mask, other=0.0)
    tl.store(OUT + r, tl.sum(x, axis=1), mask=r < R)


def test_a_heuristic_reading_num_warps_sees_each_configurations_value() -> None:
    x = torch.randn(10, 8)
    for rows in (10, 7):  # a tuning, then the hit of another key
        out = torch.full((rows,), float("nan"))
        res = autotune_launch(
            rowsum, space={"num_warps": [1, 2, 4]},
            grid=lambda cfg, rows=rows: (cdiv(rows, cfg.num_warps),),
            args=(x[:rows], out, rows, 8), kwargs={"BLOCK_C": 8},
            name="heuristic-num-warps",
        )  # fmt: skip
        assert torch.allclose(out, x[:rows].sum(1), atol=1e-5), (res.config, out)
        assert all(r.status == "ok" for r in res.timings.values()), res.timings


def test_configurations_told_apart_only_by_what_a_heuristic_reads_are_each_run() -> None:
    """Under the interpreter, configurations with the same arguments and grid that differ in
    launch options alone are measured once (the interpreter ignores the options); a heuristic
    reading ``num_warps`` makes them different kernels: each is run and verified."""
    x = torch.randn(8, 8)
    out = torch.zeros(8)
    res = autotune_launch(
        rowsum, space={"num_warps": [1, 2]}, grid=(4,),  # 4 programs of num_warps rows
        args=(x, out, 8, 8), kwargs={"BLOCK_C": 8},
        verify=lambda args: {"OUT": args["X"].sum(1)}, name="heuristic-twins",
    )  # fmt: skip
    assert res.config.num_warps == 2, res.timings
    assert res.timings[res.config].status == "ok"
    assert torch.allclose(out, x.sum(1), atol=1e-5)


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("restore_values", "restore_value"), ("reset_to_zeros", "reset_to_zero"),
     ("prehook", "pre_hook"), ("keys", "key"), ("num_warp", "num_warps")],
)  # fmt: skip
def test_a_misspelled_keyword_of_autotune_launch_is_named_with_the_one_meant(
    typo: str, meant: str
) -> None:
    """``autotune_launch`` takes launch hints as its other keywords: a misspelled option
    (``restore_values=``) was called an unknown launch hint, with only the hints listed."""
    from tunedsl.errors import UsageError

    x, out = torch.randn(4, 8), torch.zeros(4)
    with pytest.raises(UsageError, match=rf"test_heuristic_launch_options\.py:\d+.*`{meant}=`"):
        autotune_launch(
            rowsum, space={"num_warps": [1, 2]}, grid=lambda cfg: (cdiv(4, cfg.num_warps),),
            args=(x, out, 4, 8), kwargs={"BLOCK_C": 8}, name=f"typo-{typo}",
            **{typo: ["OUT"] if "_" in typo else 4},
        )  # fmt: skip
    assert not out.any()
