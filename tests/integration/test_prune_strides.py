"""A ``prune=`` that reads a tensor argument's strides (``is_contiguous()``, ``stride(0)``),
which it may read freely: two calls whose tensors differ only in their strides' values share
a record key (the key keeps the strides' pattern), and the decision made for the first was
launched for the second from memory although prune drops it there (wrong values, silently;
a new process ran prune and was right). Real kernels under the interpreter."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton


@triton.jit
def copy_rows(x, y, M, N, row_stride, FLAT: tl.constexpr, TILE: tl.constexpr):
    k = tl.program_id(0) * TILE + tl.arange(0, TILE)
    if FLAT:  # right only where x is contiguous: element k is at x + k
        v = tl.load(x + k, mask=k < M * N)
    else:
        v = tl.load(x + (k // N) * row_stride + k % N, mask=k < M * N)
    tl.store(y + k, v, mask=k < M * N)


def _flat_only_when_contiguous(configs: list[Any], args: dict[str, Any]) -> list[Any]:
    return configs if args["x"].is_contiguous() else [c for c in configs if not c.flat]


def _copy(x: torch.Tensor, name: str, mode: str) -> tuple[torch.Tensor, Any]:
    M, N = x.shape
    y = torch.empty(M, N)
    result = autotune_launch(
        copy_rows,
        space={"flat": [True, False], "tile": [64, 128]},
        grid=lambda cfg: (cdiv(M * N, cfg.tile),),
        args=(x, y, M, N, x.stride(0)),
        kwargs=lambda cfg: {"FLAT": cfg.flat, "TILE": cfg.tile},
        prune=_flat_only_when_contiguous,
        name=name,
        mode=mode,
    )
    return y, result


@pytest.mark.parametrize("mode", ["off", "on"])
def test_a_decision_prune_drops_for_other_strides_is_not_launched_from_memory(
    mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path))
    contiguous = torch.randn(16, 32)
    padded = torch.randn(16, 48)[:, :32]  # rows 48 apart: the same strides' pattern
    name = f"prune_strides_{mode}"
    for x in (contiguous, padded, contiguous, padded):
        y, result = _copy(x, name, mode)
        assert torch.equal(y, x), (x.stride(), result.config, result.source)
        if not x.is_contiguous():
            assert result.config.flat is False, result
