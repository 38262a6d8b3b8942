"""What the many-keys warning says differs between a site's tuned keys, from the readable
keys of real tensors and values (``keys.readable_key``, as a site's miss makes them)."""

from __future__ import annotations

from typing import Any

import pytest

from tunedsl.model import keys
from tunedsl.model.hole import HOLE
from tunedsl.runtime.many_keys import advice, differences

torch = pytest.importorskip("torch")

NAMES = ("x", "bias", "n", "stride", "FLAG")


def key(*args: Any, user_key: Any = None, prune: Any = None) -> dict[str, Any]:
    out = keys.readable_key(
        NAMES, args, {}, user_key, frozenset({"FLAG"}), HOLE, {"FLAG": False}, with_align=True
    )
    if prune is not None:
        out["prune"] = prune
    return out


def test_keys_differing_in_what_triton_compiles_apart_are_named_without_bucket_advice() -> None:
    x = torch.zeros(64, 64)
    unaligned = torch.zeros(65)[1:]
    found = [
        key(x, None, 64, 1, True, user_key="one"),
        key(x.t(), x, 64, 1, True, user_key="one"),  # another stride pattern, a bias
        key(x.half(), None, 65, 1, user_key="one"),  # a dtype, an int class, FLAG's default
        key(unaligned, None, 64, 3, True, user_key="one"),  # unaligned, another class
        key((x, 1), None, 64, 1, True, user_key="one"),  # a tuple in place of a tensor
    ]
    sizes, prune, compiled = differences(found)
    assert sizes == [] and prune == []
    assert compiled == [
        "the constexpr `FLAG` (True, its default)",
        "whether `bias` is None",
        "the int class of `n` and `stride` (1, a multiple of 16, or another)",
        "the type of `x`",
    ]
    told = advice(found[:4], has_key=True)
    assert "the dtype of `x` (float32, float16)" in told
    assert "the stride pattern of `x`" in told and "whether `x` is 16-byte aligned" in told
    assert "tuned once per value" in told and "tunedsl sweep" in told
    assert "coarser" not in told and "vary in size" not in told


def test_keys_differing_in_size_or_in_what_prune_reads_get_the_advice_that_fits() -> None:
    shapes = [key(torch.zeros(n), None, 16, 1) for n in (10, 20, 30)]
    assert differences(shapes) == (["the shape of `x`"], [], [])
    told = advice(shapes, has_key=False)
    assert "bucket the sizes with key=" in told and "its own kernel" not in told
    x = torch.zeros(8)
    bucketed = [key(x, None, 16, 1, user_key=b) for b in (1, 2)]
    assert "they differ in the key= value (2 distinct)." in advice(bucketed, has_key=True)
    read = [
        key(x, None, 16, 1, user_key=1, prune={"n": {"type": "int", "value": v}}) for v in (3, 5)
    ]
    told = advice(read, has_key=True)
    assert "they differ in `n`, which prune= reads." in told, told
    assert "coarser" not in told and "let prune= decide from the configurations alone" in told
    # Keys alike in their arguments and key=: the site's settings or environment differ.
    assert "settings, space= or environment" in advice([read[0], read[0]], has_key=True)


def test_keys_told_apart_by_what_prune_reads_are_not_told_to_coarsen_key() -> None:
    # key=n (or key=next_power_of_2(n)) with a prune reading the exact n: each n is its own
    # key whatever key= is. The advice was "make key= coarser, e.g. key=next_power_of_2(n)",
    # which, followed, still tuned every n.
    x = torch.zeros(8)
    for bucket in (lambda n: n, lambda n: 1 << (n - 1).bit_length()):
        found = [
            key(x, None, 16, 1, user_key=bucket(n), prune={"n": {"type": "int", "value": n}})
            for n in range(32, 32 * 18, 32)
        ]
        told = advice(found, has_key=True)
        assert "`n`, which prune= reads" in told, told
        assert "coarser key= cannot group these calls" in told, told
        assert "make prune= read something coarse that key= holds" in told, told
        assert "make key= coarser" not in told and "key= on what it reads" not in told, told
    # Keys of one prune value but several key= values: a coarser key= still groups them.
    some = [
        key(x, None, 16, 1, user_key=n, prune={"n": {"type": "int", "value": n // 64}})
        for n in (32, 48, 96, 112)
    ]
    told = advice(some, has_key=True)
    assert "make key= coarser" in told and "cannot group" not in told, told
