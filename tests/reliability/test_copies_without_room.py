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


@triton.jit
def copy_or_trash(dst, src, N, TRASH: tl.constexpr, BLOCK: tl.constexpr):
    """dst = src. With TRASH, each program also writes its block of ``src`` times 100, and
    the second program raises (``tl.assume``): a launch that wrote an input, then failed."""
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + i, mask=i < N)
    tl.store(dst + i, x, mask=i < N)
    if TRASH:
        tl.store(src + i, x * 100, mask=i < N)
        tl.assume(pid < 1)


def test_a_comparison_that_raises_leaves_the_other_arguments_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A configuration whose launch writes ``src`` and then raises is put back before the
    next launch; comparing ``dst`` with its copy raises (as a copy in host memory compared
    with a device tensor does): every argument's restore is its own, so ``src`` is put back
    all the same (the first raising comparison ended them all, and the next configuration
    ran on the trashed ``src``)."""
    n = 1000
    original = torch.randn(n)
    src, dst = original.clone(), torch.zeros(n)
    equal = bt.equal

    def across_devices(a: Any, b: Any) -> bool:
        if a is dst:
            raise RuntimeError("Expected all tensors to be on the same device, but found at "
                               "least two devices, cuda:0 and cpu!")  # fmt: skip
        return equal(a, b)

    monkeypatch.setattr(bt, "equal", across_devices)
    seen: list[bool] = []  # whether each launch of a configuration that trashes nothing saw src

    def note(args: dict[str, Any]) -> None:
        if not args["TRASH"]:
            seen.append(torch.equal(args["src"], original))

    bad, good = ({"TRASH": True, "BLOCK": 128}, {"TRASH": False, "BLOCK": 128})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the watch's, on comparisons that raise
        res = autotune_launch(
            copy_or_trash, space=[bad, good, {"TRASH": False, "BLOCK": 256}],
            grid=lambda c: (cdiv(n, c.BLOCK),), args=(dst, src, n),
            kwargs=lambda c: {"TRASH": c.TRASH, "BLOCK": c.BLOCK}, pre_hook=note,
            isolate=False, name="compare-raises",
        )  # fmt: skip
    assert not res.config.TRASH
    assert seen and all(seen), f"{seen.count(False)} of {len(seen)} launches saw a trashed src"
    assert torch.equal(src, original) and torch.equal(dst, original)
