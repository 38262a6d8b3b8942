"""restore_value, reset_to_zero and verify with real kernels under the interpreter.

Each data-safety test first shows that WITHOUT the option tuning corrupts the result,
so the option is what makes it right.
"""

from __future__ import annotations

import pytest
import torch
from runtime_kernels import scale_inplace, sum_atomic, vadd_wrong_for_big_tiles

from tunedsl import Config, autotune_launch, cdiv
from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton
SPACE = {"tile": [64, 128, 256]}


def scale(x: torch.Tensor, **options):
    n = x.numel()
    return autotune_launch(
        scale_inplace,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        **options,
    )


def total(x: torch.Tensor, out: torch.Tensor, **options):
    n = x.numel()
    return autotune_launch(
        sum_atomic,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, out, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        **options,
    )


def test_in_place_kernel_is_restored_with_or_without_restore_value() -> None:
    x = torch.arange(200, dtype=torch.float32)
    original = x.clone()
    with pytest.warns(UserWarning, match="restore_value"):  # found while tuning
        res = scale(x, name="scale-unsafe")
    assert res.source == "tuned"
    torch.testing.assert_close(x, original * 2)

    x = original.clone()
    res = scale(x, name="scale-safe", restore_value=["x"])
    assert res.source == "tuned"
    torch.testing.assert_close(x, original * 2)  # restored before the real launch
    scale(x, name="scale-safe", restore_value=["x"])  # a cache hit is one plain launch
    torch.testing.assert_close(x, original * 4)


def test_accumulating_kernel_with_reset_to_zero() -> None:
    x = torch.ones(256)
    out = torch.zeros(1)
    res = total(x, out, name="sum-safe", reset_to_zero=["out"])
    assert res.source == "tuned" and out.item() == 256.0
    res = total(x, out, name="sum-safe", reset_to_zero=["out"])  # zeroed on every hit too
    assert res.source == "memory" and out.item() == 256.0


def test_pre_and_post_hooks_run_around_repetitions() -> None:
    x = torch.ones(256)
    out = torch.zeros(1)
    pre, post = [], []
    total(
        x,
        out,
        name="sum-hooks",
        pre_hook=lambda args: (pre.append(sorted(args)), args["out"].zero_()),
        post_hook=lambda args, exception: post.append(exception),
    )
    # The arguments, and the launch options as Triton's hooks get them (Config's defaults).
    assert pre and pre[0] == ["TILE", "n", "num_ctas", "num_stages", "num_warps", "out", "x"]
    assert post == [None, None, None]  # once per configuration, no error


def test_unknown_names_are_usage_errors() -> None:
    x = torch.ones(64)
    with pytest.raises(UsageError, match="'y' is not a parameter"):
        scale(x, name="bad-name", restore_value=["y"])
    with pytest.raises(UsageError, match="'n' is not a tensor"):
        scale(x, name="bad-name2", reset_to_zero=["n"])


def wrong(a, b, c, **options):
    n = a.numel()
    return autotune_launch(
        vadd_wrong_for_big_tiles,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        **options,
    )


def test_verify_rejects_a_wrong_configuration() -> None:
    a, b = torch.randn(300), torch.randn(300)
    c = torch.empty(300)
    res = wrong(a, b, c, name="wrong-verified", verify=True)
    rejected = res.timings[Config(tile=256)]
    assert rejected.status == "rejected" and "'c' differs" in rejected.reason
    assert res.config in (Config(tile=64), Config(tile=128))
    torch.testing.assert_close(c, a + b)


def test_verify_with_names_and_reference_function() -> None:
    a, b = torch.randn(300), torch.randn(300)
    c = torch.empty(300)
    res = wrong(a, b, c, name="wrong-named", verify=["c"])
    assert res.timings[Config(tile=256)].status == "rejected"

    calls = []

    def reference(inputs):
        calls.append(sorted(inputs))
        return {"c": inputs["a"] + inputs["b"]}

    res = wrong(a, b, c, name="wrong-reference", verify=reference, atol=1e-5, rtol=1e-5)
    assert calls == [["TILE", "a", "b", "c", "n"]]
    statuses = {cfg.tile: r.status for cfg, r in res.timings.items()}
    assert statuses == {64: "ok", 128: "ok", 256: "rejected"}
    torch.testing.assert_close(c, a + b)


def test_without_verify_the_wrong_configuration_may_win() -> None:
    # Shows that verify is what protects the result: without it tile=256 is measured as ok.
    a, b = torch.randn(300), torch.randn(300)
    c = torch.empty(300)
    res = wrong(a, b, c, name="wrong-unverified")
    assert res.timings[Config(tile=256)].status == "ok"


def test_verify_keeps_inputs_intact_for_in_place_kernels() -> None:
    x = torch.arange(100, dtype=torch.float32)
    original = x.clone()
    res = scale(x, name="scale-verified", verify=True, restore_value=["x"])
    assert all(r.status == "ok" for r in res.timings.values())
    torch.testing.assert_close(x, original * 2)
