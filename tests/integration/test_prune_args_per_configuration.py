"""``prune``'s ``args`` holds only the values of a call alike for every configuration: with
``args=`` a function of the configuration (``args=lambda c: (dst, src, n, c.B)``), a
position whose value follows the configuration is left out of it, as the same value passed
through ``kwargs=lambda c: {...}`` or written with ``$`` in the DSL is (docs/runtime.md,
"Spaces and configurations"). Real kernels under Triton's interpreter."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from ported_kernels_twentyfirst import copy
from runtime_helpers import new_api_process, site

from tunedsl import autotune_launch, cdiv
from tunedsl.runtime.prune_args import alike

pytestmark = pytest.mark.needs_triton

N = 1000


def _plain(configs: list[Any], args: Any) -> dict[str, Any]:
    """The values of ``args`` that are no tensors."""
    return {k: v for k, v in args.items() if not isinstance(v, torch.Tensor)}


def test_an_args_function_leaves_a_configuration_value_out_of_prunes_args() -> None:
    # The config's field B is the kernel's BLOCK_SIZE, passed positionally (args=fn), as a
    # keyword (kwargs=fn) or with $ (the DSL's call shape): args never holds BLOCK_SIZE.
    src, dst = torch.randn(N), torch.empty(N)
    space = {"B": [64, 128, 256]}
    seen: list[dict[str, Any]] = []

    def prune(configs: list[Any], args: Any) -> list[Any]:
        seen.append(_plain(configs, args))
        return configs[-1:]

    autotune_launch(
        copy, space=space, grid=lambda c: (cdiv(N, c.B),), args=lambda c: (dst, src, N, c.B),
        prune=prune, name="prune-args-fn",
    )  # fmt: skip
    autotune_launch(
        copy, space=space, grid=lambda c: (cdiv(N, c.B),), args=(dst, src, N),
        kwargs=lambda c: {"BLOCK_SIZE": c.B}, prune=prune, name="prune-kwargs-fn",
    )  # fmt: skip
    dsl = site("prune-dsl", space=space, placeholders=(), options={"prune": prune})
    dsl(copy, (dst, src, N), {}, lambda c: ((), {"BLOCK_SIZE": c.B}, (cdiv(N, c.B),)), None, None)
    assert seen == [{"N": N}] * 3  # args=fn, kwargs=fn, the DSL
    assert torch.equal(dst, src)


def test_a_perf_model_prune_keeps_the_configuration_its_model_ranks_best() -> None:
    # A perf-model prune that lets the launch's arguments win over the configuration's
    # fields ({**c.as_dict(), **args}): it ranks each configuration by its own BLOCK_SIZE
    # (the larger the faster here), never by the default configuration's 64 for all three.
    src, dst = torch.randn(N), torch.empty(N)
    modelled: list[int] = []

    def model(**kw: Any) -> float:
        modelled.append(kw["BLOCK_SIZE"])
        return -kw["BLOCK_SIZE"]

    result = autotune_launch(
        copy, space={"BLOCK_SIZE": [64, 128, 256]}, grid=lambda c: (cdiv(N, c.BLOCK_SIZE),),
        args=lambda c: (dst, src, N, c.BLOCK_SIZE),
        prune=lambda configs, args: sorted(configs, key=lambda c: model(
            **{"num_warps": 4, "num_stages": 3, **c.as_dict(), **args}))[:1],
        name="prune-args-fn-perf-model",
    )  # fmt: skip
    assert sorted(modelled) == [64, 128, 256]
    assert result.config.BLOCK_SIZE == 256
    assert torch.equal(dst, src)


def test_an_args_function_keeps_values_alike_for_every_configuration_in_prunes_args() -> None:
    # N computed afresh under each configuration (an equal int, another object) and the same
    # tensors stay in args; a tensor made afresh under each configuration does not.
    src, dst = torch.randn(N), torch.empty(N)
    seen: list[dict[str, Any]] = []

    def prune(configs: list[Any], args: Any) -> list[Any]:
        seen.append({k: v if k == "N" else id(v) for k, v in args.items()})
        return configs[:1]

    autotune_launch(
        copy, space={"B": [64, 128]}, grid=lambda c: (cdiv(N, c.B),),
        args=lambda c: (dst, src, int(str(N)), c.B), prune=prune, name="prune-args-fn-alike",
    )  # fmt: skip
    assert seen == [{"dst": id(dst), "src": id(src), "N": N}]
    seen.clear()
    out = torch.empty(N)
    autotune_launch(
        copy, space={"B": [64, 128]}, grid=lambda c: (cdiv(N, c.B),),
        args=lambda c: (torch.empty(N) if c.B == 128 else out, src, N, c.B), prune=prune,
        name="prune-args-fn-fresh-tensor",
    )  # fmt: skip
    # A buffer made afresh under one configuration is alike where it is the same kind of
    # tensor (prune reads what a tensor is, not its data): it stays in args.
    assert [sorted(d) for d in seen] == [["N", "dst", "src"]]


def test_reading_a_configuration_value_from_args_names_it_and_the_fix() -> None:
    # The same read, with BLOCK_SIZE given by args=fn, by kwargs=fn and with $ (the DSL's).
    src, dst = torch.randn(N), torch.empty(N)
    message = r"'BLOCK_SIZE'.*depends on the configuration.*read the configuration's field"
    with pytest.raises(KeyError, match=message):
        autotune_launch(
            copy, space={"B": [64, 128]}, grid=lambda c: (cdiv(N, c.B),),
            args=lambda c: (dst, src, N, c.B), prune=_reads_block, name="prune-args-fn-reads",
        )  # fmt: skip
    with pytest.raises(KeyError, match=message):
        autotune_launch(
            copy, space={"B": [64, 128]}, grid=lambda c: (cdiv(N, c.B),), args=(dst, src, N),
            kwargs=lambda c: {"BLOCK_SIZE": c.B}, prune=_reads_block, name="prune-kwargs-reads",
        )  # fmt: skip
    dsl = site("prune-dsl-reads", space={"B": [64, 128]}, placeholders=(),
               options={"prune": _reads_block})  # fmt: skip
    with pytest.raises(KeyError, match=message):
        dsl(copy, (dst, src, N), {}, lambda c: ((), {"BLOCK_SIZE": c.B}, (1,)), None, None)


def _reads_block(configs: list[Any], args: Any) -> list[Any]:
    return [c for c in configs if c.B <= args["BLOCK_SIZE"]]


def test_a_space_too_large_to_list_leaves_a_configuration_value_out_of_prunes_args() -> None:
    # 3 * 4 * 399 points, more than are listed: the args= function is evaluated under the
    # default and, per axis, the configurations moving that axis alone to its two ends, not
    # a sample.
    src, dst = torch.randn(N), torch.empty(N)
    seen: list[list[str]] = []
    probed: list[Any] = []

    def prune(configs: list[Any], args: Any) -> list[Any]:
        seen.append(sorted(args))
        return [c for c in configs if c.num_stages == 1][:1]

    def args(c: Any) -> tuple[Any, ...]:
        probed.append(c)
        return (dst, src, N, c.B)

    space = {"B": [64, 128, 256], "num_warps": [1, 2, 4, 8], "num_stages": list(range(1, 400))}
    autotune_launch(
        copy, space=space, grid=lambda c: (cdiv(N, c.B),), args=args, prune=prune,
        mode="off", name="prune-args-fn-large",
    )  # fmt: skip
    assert seen == [["N", "dst", "src"]]
    assert torch.equal(dst, src)
    default = probed[0]
    moved = {tuple(k for k in default if c[k] != default[k]) for c in set(probed) - {default}}
    assert moved == {("B",), ("num_warps",), ("num_stages",)}


def test_a_view_made_under_each_configuration_stays_in_prunes_args() -> None:
    # x.reshape(-1) is another tensor object under each configuration, with the same data,
    # offset, shape, strides and dtype: prune reads args["src"].numel(), and runs.
    x, out = torch.randn(4, N // 4), torch.empty(4, N // 4)
    seen: list[int] = []

    def prune(configs: list[Any], args: Any) -> list[Any]:
        seen.append(args["src"].numel())
        return [c for c in configs if c.B <= args["src"].numel()][-1:]

    result = autotune_launch(
        copy, space={"B": [64, 128, 256]}, grid=lambda c: (cdiv(N, c.B),),
        args=lambda c: (out.reshape(-1), x.reshape(-1), N, c.B), prune=prune,
        name="prune-args-fn-view",
    )  # fmt: skip
    assert seen == [N]
    assert result.config.B == 256
    assert torch.equal(out, x)
    # A view of other data, offset or strides is not alike (prune would see the default's).
    flat = x.reshape(-1)
    assert alike(x.reshape(-1), flat) and alike(list(x.shape), list(x.shape))
    assert alike(torch.ones(3), torch.empty(3))  # the same kind of tensor, other storage
    assert not alike(flat[1:], flat) and not alike(x.t(), x.t().contiguous())
    assert not alike(torch.ones(3), torch.ones(3, dtype=torch.float64))
    assert not alike(list(x.shape), [N // 4, 4]) and not alike(list(x.shape), tuple(x.shape))


@triton.jit
def copy_x(dst, src, N, BLOCK_SIZE: tl.constexpr, X: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


def test_an_args_function_runs_a_few_times_per_new_key_not_once_per_configuration() -> None:
    # A 3000-point space (listable) with two axes: prune's args cost at most the default
    # and two configurations per axis (5 evaluations) over what the launch itself makes,
    # counted against a site of the two configurations prune keeps, without prune=; also
    # when both are disk hits in a new process.
    src, dst = torch.randn(N), torch.empty(N)
    calls = {"pruned": 0, "alone": 0}

    def launch(name: str, space: dict[str, list[int]], **kw: Any) -> str:
        def args(c: Any) -> tuple[Any, ...]:
            calls[name] += 1
            return (dst, src, N, c.B, c.X)

        return autotune_launch(
            copy_x, space=space, grid=lambda c: (cdiv(N, c.B),), args=args, effort="quick",
            name=f"prune-args-fn-cost-{name}", **kw,
        ).source  # fmt: skip

    big = {"B": [64, 128, 256], "X": list(range(1000))}
    for source in ("tuned", "disk"):
        calls.update(pruned=0, alone=0)
        got = launch("pruned", big, prune=lambda cs, a: [c for c in cs if c.X == 0 and c.B < 256])
        assert (got, launch("alone", {"B": [64, 128], "X": [0]})) == (source, source)
        assert calls["pruned"] - calls["alone"] <= 1 + 2 * len(big), (source, calls)
        new_api_process()
    assert torch.equal(dst, src)


def test_a_value_one_end_of_an_axis_leaves_alike_is_still_seen_to_follow_it() -> None:
    # BLOCK_SIZE=min(c.B, 64) with the default at 64: the axis's first other value (128)
    # gives 64 again; only its other end (32) shows the value follows B. Probed at one
    # value an axis, prune saw BLOCK_SIZE=64 for every configuration.
    src, dst = torch.randn(N), torch.empty(N)
    seen: list[list[str]] = []

    def prune(configs: list[Any], args: Any) -> list[Any]:
        seen.append(sorted(args))
        return configs

    space = {"B": [64, 128, 256, 16, 32], "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3, 4]}
    autotune_launch(
        copy, space=space, grid=lambda c: (cdiv(N, min(c.B, 64)),),
        args=lambda c: (dst, src, N, min(c.B, 64)), prune=prune, name="prune-args-clamped",
        effort="quick",
    )  # fmt: skip
    assert seen and all("BLOCK_SIZE" not in names for names in seen), seen
    torch.testing.assert_close(dst, src)
