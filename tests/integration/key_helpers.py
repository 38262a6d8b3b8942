"""Helpers for the `key=` tests: a real site keyed by a given value, and a key class whose
printed form leaves a field out (real kernels under the interpreter)."""

from __future__ import annotations

from typing import Any

import torch


def copy_keyed(key: object, name: str) -> Any:
    """A 1000-element copy launched with ``key=key`` at the site ``name``; its result."""
    from ported_kernels_twentyfirst import copy

    from tunedsl import autotune_launch, cdiv

    n = 1000
    src, dst = torch.randn(n), torch.empty(n)
    result = autotune_launch(
        copy, space={"BLOCK_SIZE": [64, 128]}, grid=lambda c: (cdiv(n, c.BLOCK_SIZE),),
        args=(dst, src, n), kwargs=lambda c: {"BLOCK_SIZE": c.BLOCK_SIZE}, key=key, name=name,
    )  # fmt: skip
    assert torch.equal(dst, src)
    return result


class Shape:  # hashable, compares by (m, n), prints only m
    def __init__(self, m: int, n: int) -> None:
        self.m, self.n = m, n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and (self.m, self.n) == (other.m, other.n)

    def __hash__(self) -> int:
        return hash((self.m, self.n))

    def __repr__(self) -> str:
        return f"Shape(m={self.m})"
