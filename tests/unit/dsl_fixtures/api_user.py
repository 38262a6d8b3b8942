"""A plain module that uses tunedsl's Python API (no macro): it keeps Python's pyc path."""

from tunedsl import autotune_launch, cdiv


def blocks(n: int) -> int:
    return cdiv(n, 128)


LAUNCHER = autotune_launch
