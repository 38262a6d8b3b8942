"""Small helpers usable inside ``blocks=`` expressions."""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """Ceiling division for positive integers: the number of blocks of size ``b`` covering ``a``."""
    return -(-a // b)
