"""A ``@triton.heuristics`` that reads a launch option of the configuration
(``args["num_warps"]``), as Triton's heuristics see them under ``triton.autotune``: tuned
and launched under the interpreter too. A real kernel under Triton's interpreter."""

from __future__ import annotations

from typing import Any

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


OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg")
SEEN: list[dict[str, int]] = []


def _factor(args: dict[str, Any]) -> int:
    """What the heuristic sees of the launch options, recorded; a factor made of them."""
    seen = {name: args[name] for name in OPTION_NAMES if name in args}
    SEEN.append(seen)
    return sum(seen.values())


@triton.heuristics({"FACTOR": _factor})
@triton.jit
def scaled(X, OUT, N, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(OUT + i, tl.load(X + i, mask=i < N) * FACTOR, mask=i < N)


def _cpu_bench(fn: Any, quantiles: Any = None) -> Any:
    fn()  # triton.autotune times with the GPU driver's benchmarker; one run stands in here
    return [1.0, 1.0, 1.0] if quantiles else 1.0


@pytest.mark.parametrize("hints", [{}, {"maxnreg": 128}], ids=["defaults", "maxnreg"])
def test_a_heuristic_reads_the_launch_options_triton_autotune_gives_it(
    hints: dict[str, int],
) -> None:
    """A space without ``num_warps`` (and with ``maxnreg`` a static hint or unset): under
    ``triton.autotune`` every configuration carries ``num_warps``, ``num_stages`` and
    ``num_ctas`` (``maxnreg`` when set), so a heuristic reading ``args["num_warps"]`` works;
    under tunedsl it failed every configuration with ``KeyError``. The same heuristic sees
    the same options under both, and the kernel computes the same result."""
    n, x = 64, torch.randn(64)
    configs = [triton.Config({"BLOCK": b}, **hints) for b in (16, 32)]
    theirs = triton.autotune(configs, key=["N"], do_bench=_cpu_bench)(scaled)
    SEEN.clear()
    expected = torch.zeros(n)
    theirs[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, expected, n)
    seen_by_triton = {tuple(sorted(s.items())) for s in SEEN}
    SEEN.clear()
    out = torch.zeros(n)
    res = autotune_launch(
        scaled, space={"BLOCK": [16, 32]}, grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(x, out, n), kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        name=f"heuristic-defaults-{len(hints)}", **hints,
    )  # fmt: skip
    assert all(r.status == "ok" for r in res.timings.values()), res.timings
    assert {tuple(sorted(s.items())) for s in SEEN} == seen_by_triton, (SEEN, seen_by_triton)
    assert ("maxnreg" in SEEN[0]) == bool(hints), SEEN
    assert torch.equal(out, expected), (out, expected)


def test_a_launch_option_the_launch_passes_itself_is_not_given_twice() -> None:
    """The launch passing ``num_warps=2`` keeps its value; the defaults fill the others."""
    n, x = 64, torch.randn(64)
    SEEN.clear()
    out = torch.zeros(n)
    res = autotune_launch(
        scaled, space={"BLOCK": [16, 32]}, grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(x, out, n), kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "num_warps": 2},
        name="heuristic-passed-num-warps",
    )  # fmt: skip
    assert all(r.status == "ok" for r in res.timings.values()), res.timings
    plain = triton.Config({})  # the defaults of the Triton in use
    want = {"num_warps": 2, "num_stages": plain.num_stages, "num_ctas": plain.num_ctas}
    assert SEEN and all(s == want for s in SEEN), SEEN
    assert torch.equal(out, x * sum(want.values()))


@triton.jit
def plain_copy(X, OUT, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(OUT + i, tl.load(X + i, mask=i < N), mask=i < N)


@pytest.mark.parametrize("hints", [{}, {"maxnreg": 128}], ids=["defaults", "maxnreg"])
def test_hooks_see_the_launch_options_triton_autotunes_hooks_see(hints: dict[str, int]) -> None:
    """``pre_hook``/``post_hook`` of a space without ``num_warps``: Triton's hooks get every
    configuration's ``num_warps``, ``num_stages`` and ``num_ctas`` (``maxnreg`` when set);
    tunedsl's lacked them, and a hook reading ``args["num_warps"]`` stopped the tuning."""
    n, x = 64, torch.randn(64)
    seen: list[tuple[str, tuple[tuple[str, int], ...]]] = []

    def pre(args: dict[str, Any], reset_only: bool = False) -> None:  # Triton's signature
        seen.append(("pre", tuple((k, args[k]) for k in OPTION_NAMES if k in args)))

    def post(args: dict[str, Any], exception: Any = None) -> None:
        seen.append(("post", tuple((k, args[k]) for k in OPTION_NAMES if k in args)))

    configs = [triton.Config({"BLOCK": b}, **hints) for b in (16, 32)]
    theirs = triton.autotune(configs, key=["N"], do_bench=_cpu_bench, pre_hook=pre, post_hook=post)(
        plain_copy
    )
    theirs[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, torch.zeros(n), n)
    seen_by_triton = set(seen)
    seen.clear()
    out = torch.zeros(n)
    autotune_launch(
        plain_copy, space={"BLOCK": [16, 32]}, grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(x, out, n), kwargs=lambda cfg: {"BLOCK": cfg.BLOCK}, pre_hook=pre,
        post_hook=post, name=f"hook-defaults-{len(hints)}", **hints,
    )  # fmt: skip
    assert set(seen) == seen_by_triton, (seen, seen_by_triton)
    assert torch.equal(out, x)


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
