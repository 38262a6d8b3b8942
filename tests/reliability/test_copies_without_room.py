"""The copies tuning takes of the caller's values (``restore_value=``, the in-place watch):
their size, and what happens where the device has no room for them (nothing is left
changed all the same). The device's out-of-memory error is forced on the CPU by making the
clone of large tensors raise it (a CPU tensor has no device to fill); the kernels are
real, under Triton's interpreter."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv
from tunedsl.backends import triton as bt

pytestmark = pytest.mark.needs_triton

LARGE = 1 << 12  # elements from which a copy on the device "has no room"


@pytest.fixture
def no_room_for_large(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``bt.clone`` of a tensor of ``LARGE`` elements or more raises the out-of-memory
    error a device full to the brim raises; the sizes refused are listed."""
    refused: list[int] = []
    clone = bt.clone

    def full_device(x: Any) -> Any:
        if x.numel() >= LARGE:
            refused.append(x.numel())
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return clone(x)

    monkeypatch.setattr(bt, "clone", full_device)
    return refused


@triton.jit
def bump(X, N, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(X + offs, tl.load(X + offs, mask=offs < N) + 1, mask=offs < N)


def test_restore_value_without_room_on_the_device_copies_to_host(
    no_room_for_large: list[int],
) -> None:
    """``restore_value=["X"]`` with no room on the device for ``X``'s copy: it is copied in
    host memory and put back from there before every launch, with one warning (the whole
    tuning failed with the out-of-memory error); the call leaves ``x + 1``."""
    n = 1 << 13
    x = torch.arange(n, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = autotune_launch(
            bump, space={"tile": [1024, 2048, 4096]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, n), kwargs=lambda cfg: {"TILE": cfg.tile}, restore_value=["X"],
            isolate=False, name="restore-no-room",
        )  # fmt: skip
    assert no_room_for_large, "the device copy was never refused"
    assert res.source == "tuned"
    assert all(r.status == "ok" for r in res.timings.values()), res.timings
    assert torch.equal(x, torch.arange(n, dtype=torch.float32) + 1), x
    said = " ".join(str(w.message) for w in caught)
    assert "restore_value" in said and "host memory" in said, said


@triton.jit
def count(X, SX, N, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.atomic_add(X + offs * SX, tl.full((TILE,), 1.0, tl.float32), mask=offs < N)


@pytest.mark.parametrize("restore", [["X"], None], ids=["restore_value", "watch"])
def test_a_broadcast_argument_is_copied_at_the_size_of_its_storage(
    monkeypatch: pytest.MonkeyPatch, restore: list[str] | None
) -> None:
    """``torch.zeros(1).expand(n)`` (one float of storage, ``n`` elements by stride 0),
    which the kernel adds ``n`` into: ``restore_value=`` and the in-place watch copied it
    at its full logical size (``n`` floats); now the one float it covers, and the call
    still leaves exactly one launch's sum."""
    n = 1 << 16
    copies: list[int] = []  # the bytes of storage of every copy tuning takes
    for name in ("clone", "clone_to_host"):
        made = getattr(bt, name)
        monkeypatch.setattr(bt, name, lambda x, made=made: _noted(made(x), copies))
    x = torch.zeros(1).expand(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the watch's warning that X is updated in place
        res = autotune_launch(
            count, space={"tile": [8192, 16384]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, x.stride(0), n), kwargs=lambda cfg: {"TILE": cfg.tile},
            restore_value=restore, isolate=False, name=f"broadcast-copy-{restore}",
        )  # fmt: skip
    assert res.source == "tuned"
    assert all(r.status == "ok" for r in res.timings.values()), res.timings
    assert float(x[0]) == float(n), float(x[0])
    assert copies and max(copies) == 4, copies


def _noted(copy: Any, sizes: list[int]) -> Any:
    sizes.append(copy.untyped_storage().nbytes())
    return copy
