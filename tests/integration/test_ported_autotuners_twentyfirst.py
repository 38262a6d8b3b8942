"""A twenty-first batch of other autotuners' tests, ported to tunedsl: Triton's
``Autotuner.run`` (python/triton/runtime/autotuner.py), which calls its ``pre_hook`` once
more after benchmarking, as ``pre_hook(args, reset_only=True)``, before the tuning call's own
launch; and its ``prune_configs_by={"perf_model": ...}`` mapping on a list of
``triton.Config`` where only some set ``num_warps`` (python/triton/ops/matmul_perf_model.py's
``early_config_prune`` reads ``config.num_warps`` and ``config.num_stages``).

Real kernels under Triton's interpreter through ``autotune_launch``."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from ported_kernels_twentyfirst import atomic_sum, copy

from tunedsl import autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton


# ported from: triton-lang/triton python/triton/runtime/autotuner.py::Autotuner.run
def test_a_pre_hook_taking_reset_only_zeroes_before_the_tuning_calls_own_launch() -> None:
    # An atomic sum into an output holding stale values (torch.empty's): the hook that zeroes
    # it, Triton's replacement for reset_to_zero, runs once more with reset_only=True after
    # tuning, so the tuning call's own launch starts from zero (1000, not 1007).
    n = 1000
    x, out = torch.ones(n), torch.full((1,), 7.0)
    flags: list[bool] = []

    def zero(args: dict[str, Any], reset_only: bool = False) -> None:
        flags.append(reset_only)
        args["out"].zero_()

    result = autotune_launch(
        atomic_sum, space={"BLOCK": [32, 64, 128]}, grid=lambda c: (cdiv(n, c.BLOCK),),
        args=(x, out, n), kwargs=lambda c: {"BLOCK": c.BLOCK}, pre_hook=zero,
        name="ported21-reset-only",
    )  # fmt: skip
    assert result.source == "tuned" and out.item() == 1000.0
    assert flags[-1] is True and flags.count(True) == 1
    # A hook in tunedsl's own form, one argument, is never given the keyword.
    seen: list[int] = []
    out.fill_(7.0)
    autotune_launch(
        atomic_sum, space={"BLOCK": [32, 64]}, grid=lambda c: (cdiv(n, c.BLOCK),),
        args=(x, out, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
        pre_hook=lambda args: seen.append(args["BLOCK"]), reset_to_zero=["out"],
        name="ported21-one-argument-hook",
    )  # fmt: skip
    assert seen and out.item() == 1000.0


# ported from: triton-lang/triton python/triton/runtime/autotuner.py::Autotuner.prune_configs
def test_the_perf_model_mapping_runs_on_a_list_space_where_some_set_num_warps() -> None:
    # configs=[Config({"BLOCK_SIZE": 32}), Config({"BLOCK_SIZE": 128}, num_warps=8),
    # Config({"BLOCK_SIZE": 64})]: Triton calls the model with num_warps 4, 8 and 4.
    n = 1024
    src, dst = torch.randn(n), torch.empty(n)
    modelled: list[tuple[int, int]] = []

    def model(**kw: Any) -> float:
        modelled.append((kw["BLOCK_SIZE"], kw["num_warps"]))
        return kw["BLOCK_SIZE"] / kw["num_warps"] / kw["num_stages"]

    space = [{"BLOCK_SIZE": 32}, {"BLOCK_SIZE": 128, "num_warps": 8}, {"BLOCK_SIZE": 64}]
    result = autotune_launch(
        copy, space=space, grid=lambda c: (cdiv(n, c.BLOCK_SIZE),), args=(dst, src, n),
        kwargs=lambda c: {"BLOCK_SIZE": c.BLOCK_SIZE},
        prune=lambda configs, args: sorted(configs, key=lambda c: model(
            **{"num_warps": 4, "num_stages": 3, "num_ctas": 1, **args, **c.as_dict()}))[:2],
        name="ported21-perf-model",
    )  # fmt: skip
    assert torch.equal(dst, src)
    assert set(modelled) == {(32, 4), (128, 8), (64, 4)}
    assert result.config.BLOCK_SIZE in (32, 128)  # the model's two lowest: 32/4/3, 128/8/3
    # Reading a launch option a configuration leaves out names the default and the read.
    with pytest.raises(
        AttributeError, match=r"num_stages=3: read it as cfg.get\('num_stages', 3\)"
    ):
        result.config.num_stages  # noqa: B018
