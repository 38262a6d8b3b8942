"""Run-time mistakes in a macro call, reported at the user's line with the fix.

The front end catches what it can see in the text (``tunedsl expand --check``); these are
the mistakes only the values show: a kernel that is not a Triton kernel, a ``blocks=`` that
is a tensor, a nested tuple or a function, a ``key=`` that differs on every call. Each becomes a ``UsageError`` naming the macro
part and the fix, raised once, on the first call, before any configuration is tried (the
alternative was one Triton error per configuration).

``at_user_frame`` strips tunedsl's frames from such an error: the site re-raises it from its
call, so the traceback ends at the user's own line (``tunedsl run`` and IPython also hide the
site's one remaining frame).
"""

from __future__ import annotations

import operator
from typing import Any, TypeVar

from tunedsl.errors import UsageError
from tunedsl.model.keys import is_tensor

E = TypeVar("E", bound=BaseException)


def at_user_frame(err: E) -> E:
    """``err`` without the frames below the site's call (tunedsl's own)."""
    return err.with_traceback(None)


def check_kernel(kernel: Any, label: str, kernel_text: str) -> None:
    """The launch must call a Triton kernel: a ``@triton.jit`` function (or Triton's wrappers)."""
    if hasattr(kernel, "run") or hasattr(kernel, "fn"):
        return
    name = getattr(kernel, "__qualname__", None) or type(kernel).__name__
    what = "a plain Python function" if callable(kernel) else f"a {type(kernel).__name__}"
    raise UsageError(
        f"{label}: the kernel launch `{kernel_text}` calls {name}, {what}, not a Triton "
        f"kernel; decorate it with @triton.jit:\n    @triton.jit\n    def {name}(...): ..."
    )


def grid_dims(grid: Any) -> tuple[int, ...]:
    """``blocks=`` (``grid=`` of ``autotune_launch``) as a tuple of 1 to 3 ints, or an error."""
    fix = "pass an int or a flat tuple of 1 to 3 ints, e.g. blocks=cdiv(n, $tile)"
    if callable(grid) and not is_tensor(grid):
        raise UsageError(
            "blocks=/grid= is a function: tunedsl takes the grid itself, not Triton's "
            "`lambda meta: ...`; write it with configuration fields instead, e.g. "
            "blocks=cdiv(n, $tile) (autotune_launch: grid=lambda cfg: ... receives the "
            "configuration)"
        )
    if is_tensor(grid):
        raise UsageError(
            f"blocks=/grid= is a tensor ({getattr(grid, 'shape', '?')}); {fix} (use int(x) "
            "or x.item() for a count held in a tensor)"
        )
    out: tuple[Any, ...]
    if isinstance(grid, int) and not isinstance(grid, bool):
        out = (grid,)
    else:
        try:
            out = tuple(grid)
        except TypeError:
            out = ()
    if not 1 <= len(out) <= 3:
        raise UsageError(f"blocks=/grid= must have 1 to 3 dimensions, got {grid!r}; {fix}")
    # A float or str dimension failed deep inside the launch, and a negative one launched
    # nothing and "tuned" (found by tests/reliability/test_bad_arguments.py).
    for dim in out:
        if callable(dim) and not is_tensor(dim):
            return grid_dims(dim)  # `blocks=fn` arrives as `(fn,)`: the message for a function
        if isinstance(dim, (tuple, list)):
            raise UsageError(
                f"blocks=/grid= is a nested tuple {grid!r}; a launch grid is flat: (x, y, z)"
            )
        if is_tensor(dim):
            raise UsageError(
                f"blocks=/grid= has a tensor dimension in {grid!r}; {fix} (use int(x))"
            )
        if isinstance(dim, bool) or not hasattr(dim, "__index__") or operator.index(dim) < 0:
            raise UsageError(
                f"blocks=/grid= must be an int or a tuple of 1 to 3 non-negative ints, got {grid!r}"
            )
    return tuple(operator.index(d) for d in out)


# Key parts whose value is the same from call to call (and from process to process).
_STABLE_SCALARS = (int, float, str, bytes, bool, type(None))
_KEY_FIX = (
    "key on sizes and other plain values that repeat, e.g. key=x.shape, key=(m, n) or key=n // 1024"
)


def check_key(key: Any, label: str) -> None:
    """``key=`` must repeat for calls that should share a decision: a tensor keys on its
    printed values and an object on its address, so every new one would tune again."""
    why = _unstable(key, "key=")
    if why is not None:
        raise UsageError(f"{label}: {why}, so every new one would tune again; {_KEY_FIX}")


def _unstable(value: Any, where: str) -> str | None:
    if isinstance(value, _STABLE_SCALARS):
        return None
    if is_tensor(value):
        shape = tuple(getattr(value, "shape", ()))
        return f"`{where}` is a tensor (shape {shape}): the key would be its values"
    if isinstance(value, (tuple, list)):  # a torch.Size is a tuple of ints
        for i, item in enumerate(value):
            why = _unstable(item, f"{where}[{i}]")
            if why is not None:
                return why
        return None
    if isinstance(value, dict):
        for k, item in value.items():
            why = _unstable(item, f"{where}[{k!r}]")
            if why is not None:
                return why
        return None
    if hasattr(value, "__array__"):
        return f"`{where}` is an array ({type(value).__name__}): the key would be its values"
    if " at 0x" in repr(value):
        return (
            f"`{where}` is a {type(value).__name__} whose printed form is its address "
            f"({value!r}): the key would be that object"
        )
    return None
