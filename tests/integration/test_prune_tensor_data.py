"""A ``prune=`` that reads the data of a tensor argument (the longest row of a batch, from a
tensor of row lengths): a tensor's data joins no key, so the decision made for one call's
data was reused for another whose prune drops it (wrong values, silently). Real kernels
under the interpreter, ``autotune_launch`` as a user calls it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch
from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton


@triton.jit
def varlen_rowmax(x, lens, y, stride, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    n = tl.load(lens + r)
    c = tl.arange(0, BLOCK)
    v = tl.load(x + r * stride + c, mask=c < n, other=-float("inf"))
    tl.store(y + r, tl.max(v, axis=0))


def _rowmax(x: torch.Tensor, lens: torch.Tensor, prune: Any, name: str, key: Any = None) -> Any:
    y = torch.empty(x.shape[0])
    result = autotune_launch(
        varlen_rowmax,
        space={"block": [128, 256, 512, 1024]},
        grid=lambda cfg: (x.shape[0],),
        args=(x, lens, y, x.stride(0)),
        kwargs=lambda cfg: {"BLOCK": cfg.block},
        prune=prune,
        key=key,
        name=name,  # a site of its own per test: no decision of another test's is in memory
        mode="off",  # the site's default, the first configuration prune keeps: no timing noise
    )
    return y, result


def _covering(configs: list[Any], args: dict[str, Any]) -> list[Any]:
    longest = int(args["lens"].max())
    return [c for c in configs if c.block >= longest]


@pytest.mark.parametrize(
    "reads",
    [
        pytest.param(_covering, id="int-of-max"),
        pytest.param(
            lambda configs, args: [c for c in configs if c.block >= args["lens"].max()],
            id="compared",
        ),
        pytest.param(
            lambda configs, args: [c for c in configs if c.block >= max(args["lens"].tolist())],
            id="tolist",
        ),
        # Counting the data's rows through a result whose size it sets, and NumPy through
        # DLPack: each was missed, and the next call's data got this call's decision.
        pytest.param(
            lambda configs, args: (
                [c for c in configs if c.block >= 1024]
                if args["lens"][args["lens"] > 64].numel()
                else configs
            ),
            id="masked-numel",
        ),
        pytest.param(
            lambda configs, args: (
                [c for c in configs if c.block >= 1024]
                if (args["lens"] > 64).nonzero().shape[0]
                else configs
            ),
            id="nonzero-shape",
        ),
        pytest.param(
            lambda configs, args: (
                [c for c in configs if c.block >= 1024]
                if len(torch.unique(args["lens"])) > 0 and args["lens"].numel() == 4
                else configs
            ),
            id="unique",
        ),
        pytest.param(
            lambda configs, args: [
                c for c in configs if c.block >= int(np.from_dlpack(args["lens"]).max())
            ],
            id="from_dlpack",
        ),
        # A value computed from the data given as a size or a slice's bound: PyTorch reads
        # it in C++, and the result's size then told the prune the data's maximum.
        pytest.param(
            lambda configs, args: [
                c for c in configs if c.block >= torch.arange(args["lens"].max()).numel()
            ],
            id="arange-size",
        ),
        pytest.param(
            lambda configs, args: [
                c for c in configs if c.block >= args["x"][:, : args["lens"].max()].shape[1]
            ],
            id="slice-bound",
        ),
        pytest.param(
            lambda configs, args: [
                c for c in configs if c.block >= args["x"].new_empty(args["lens"].max()).numel()
            ],
            id="new-empty-size",
        ),
    ],
)
def test_a_prune_reading_a_tensors_data_without_a_key_is_named(
    reads: Any, request: pytest.FixtureRequest
) -> None:
    x = torch.randn(4, 1024)
    lens = torch.full((4,), 100, dtype=torch.int32)
    with pytest.raises(UsageError) as err:
        _rowmax(x, lens, reads, f"unkeyed_{request.node.callspec.id}")
    said = str(err.value)
    assert "reads the data of the tensor argument `lens`" in said, said
    assert "put it in key=" in said


@pytest.mark.parametrize(
    ("reads", "named"),
    [
        (lambda configs, args: configs if args["x"].requires_grad else configs[1:], "`x.requires_grad`"),
        (lambda configs, args: configs if args["x"].storage_offset() == 0 else configs[1:], "`x.storage_offset()`"),
        (lambda configs, args: configs if args["x"].data_ptr() % 128 == 0 else configs[1:], "`x.data_ptr()`"),
        (lambda configs, args: configs if args["x"].untyped_storage().nbytes() > 0 else configs[1:], "`x.untyped_storage()`"),
    ],
    ids=["requires_grad", "storage_offset", "data_ptr", "storage"],
)  # fmt: skip
def test_a_prune_reading_what_a_tensors_key_leaves_out_is_named(reads: Any, named: str) -> None:
    """Training calls (``requires_grad``) against inference ones, a view's offset, a 128-byte
    alignment: two calls of the same dtype, shape and strides shared one decision, and the
    second launched what its prune drops, in silence."""
    x = torch.randn(4, 1024)
    lens = torch.full((4,), 100, dtype=torch.int32)
    with pytest.raises(UsageError) as err:
        _rowmax(x, lens, reads, f"keyless_{named}")
    said = str(err.value)
    assert f"reads {named} of the tensor argument `x`, which joins no key" in said, said
    assert "put it in key=" in said


@pytest.mark.filterwarnings("ignore:.*key= no longer groups calls")
def test_a_prune_reading_a_tensors_data_keyed_by_it_is_right_for_each_call() -> None:
    x = torch.randn(4, 1024)
    for longest in (100, 700, 100):
        lens = torch.full((4,), longest, dtype=torch.int32)
        y, result = _rowmax(x, lens, _covering, "keyed", key=int(lens.max()))
        assert result.config.block >= longest
        torch.testing.assert_close(y, x[:, :longest].max(dim=1).values)


def test_a_prune_reading_a_tensors_shape_and_dtype_runs_and_gets_the_tensor_itself() -> None:
    seen: dict[str, Any] = {}

    def by_width(configs: list[Any], args: dict[str, Any]) -> list[Any]:
        seen["x"] = args["x"]
        wide = args["x"].shape[1] > 512 and args["lens"].dtype == torch.int32
        return [c for c in configs if c.block >= (1024 if wide else 128)]

    x = torch.randn(4, 1024)
    lens = torch.full((4,), 1000, dtype=torch.int32)
    y, result = _rowmax(x, lens, by_width, "by_width")
    assert seen["x"] is x and result.config.block == 1024
    torch.testing.assert_close(y, x[:, :1000].max(dim=1).values)


@pytest.mark.parametrize(
    "shaped",
    [
        lambda x: torch.reshape(x, (-1,)).shape[0],
        lambda x: torch.narrow(x, 1, 0, 8).shape[1],
        lambda x: torch.nn.functional.pad(x, (0, 28)).shape[1],
        lambda x: len(torch.split(x, 512, 1)),
        lambda x: torch.select(x, 0, 0).shape[0],
        lambda x: torch.unflatten(x, 1, (32, 32)).shape[1],
        lambda x: x[:, : x.shape[1] // 2].shape[1],
        lambda x: torch.zeros(x.shape[0]).numel(),
    ],
    ids=["reshape", "narrow", "pad", "split", "select", "unflatten", "slice", "zeros"],
)
def test_a_prune_reshaping_a_tensor_by_its_shape_alone_runs(shaped: Any) -> None:
    """The tensor an operation works on is no size given to it: these prunes read shapes
    only (the functions' forms were refused as reading `x`'s data)."""
    x = torch.randn(4, 1024)
    lens = torch.full((4,), 1000, dtype=torch.int32)

    def by_shape(configs: list[Any], args: dict[str, Any]) -> list[Any]:
        return [c for c in configs if c.block >= (1024 if shaped(args["x"]) > 0 else 128)]

    y, result = _rowmax(x, lens, by_shape, f"by_shape_{id(shaped)}")
    assert result.config.block == 1024
    torch.testing.assert_close(y, x[:, :1000].max(dim=1).values)
