"""The largest launch grid CUDA takes (model layer, pure Python).

CUDA launches at most ``2**31 - 1`` programs along x and ``65535`` along y and z; a grid past
that fails at launch with a driver error that names neither the site nor the dimension
("invalid argument"), and Triton's interpreter runs it without a word. So a site checks the
grid where it computes one off the hot path (the candidates of a new key, a launch that
failed, an interpreted launch) and says which dimension, its value
and the fix. Under the interpreter the same limits hold (the grid is meant for a GPU); on
an AMD GPU (``hip``), whose limits differ, nothing is checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunedsl.errors import UsageError

__all__ = ["MAX_GRID", "check_grid", "dims_of", "over_limit"]

#: The most programs along x, y and z.
MAX_GRID = (2**31 - 1, 65535, 65535)

_AXES = "xyz"


def dims_of(grid: Any) -> tuple[int, ...] | None:
    """A grid as bound (an int, or a tuple of 1 to 3 ints) as a tuple; None for anything
    else (what the launch refuses on its own)."""
    dims = (grid,) if isinstance(grid, int) else grid
    if isinstance(dims, tuple) and 1 <= len(dims) <= 3 and all(type(d) is int for d in dims):
        return dims
    return None


def over_limit(grid: Sequence[int]) -> int | None:
    """The first axis of ``grid`` (1 to 3 ints) past ``MAX_GRID``, or None."""
    for axis, (size, most) in enumerate(zip(grid, MAX_GRID, strict=False)):
        if size > most:
            return axis
    return None


def check_grid(
    grid: Sequence[int], label: str = "", arg: str = "blocks=", backend: str = "cuda"
) -> None:
    """A ``UsageError`` (starting with ``label``, the site's place, where given) when a
    dimension of ``grid`` is past what CUDA launches; ``arg``: where the user wrote it;
    ``backend``: the target's (``TargetFacts.backend``)."""
    axis = None if backend == "hip" else over_limit(grid)
    if axis is None:
        return
    size = grid[axis]
    if axis == 0:
        fix = "launch fewer programs, each looping over several of the tiles inside the kernel"
    else:
        swapped = list(grid)
        swapped[0], swapped[axis] = swapped[axis], swapped[0]
        fix = (
            f"swap the grid's axes so this count is x ({arg}{tuple(swapped)}, reading it in the kernel with tl.program_id(0) and the other "
            f"with tl.program_id({axis})), or loop inside the kernel over part of it"
        )
    where = f"{label}: " if label else ""
    raise UsageError(
        f"{where}{arg} gives a grid of {tuple(grid)}, whose {_AXES[axis]} dimension, {size}, "
        f"is past what CUDA launches (at most {MAX_GRID[1]} programs along y and z, "
        f"{MAX_GRID[0]} along x): {fix}"
    )
