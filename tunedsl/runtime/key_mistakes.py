"""Mistakes in a site's ``key=`` (runtime layer): a value that would not repeat from call to
call (a tensor, an object keyed by its address), or kernel parameter names given as
``triton.autotune``'s ``key=`` is, which never change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tunedsl.errors import UsageError
from tunedsl.model.keys import is_numpy_scalar, is_tensor

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo

__all__ = ["check_key", "check_key_names"]

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
        again = "" if why.endswith("no key can hold") else ", so every new one would tune again"
        raise UsageError(f"{label}: {why}{again}; {_KEY_FIX}")


def check_key_names(key: Any, info: KernelInfo, label: str) -> None:
    """``key=`` is a value: parameter names (``key=["M", "N"]``, ``triton.autotune``'s form,
    or ``key="N"``, also where some name is none of them, which Triton leaves out) never
    change, so every call would share one decision."""
    names = [key] if isinstance(key, str) else key if isinstance(key, (list, tuple)) else []
    if not names or not all(isinstance(k, str) for k in names):
        return
    present = [k for k in names if k in info.arg_names]
    if not present:  # labels such as ("fp16", "rowmajor"): a value like any other
        return
    absent = [k for k in names if k not in info.arg_names]
    what = "a parameter" if isinstance(key, str) else "parameters"
    fix = f"key={present[0]}" if len(present) == 1 else f"key=({', '.join(present)})"
    lacks = (
        f" (`{absent[0]}` is not a parameter of the kernel: triton.autotune leaves such a "
        "name out of its key)"
        if absent
        else ""
    )
    raise UsageError(
        f"{label}: key={key!r} names {what} of the kernel, as triton.autotune's key= "
        f"does{lacks}; tunedsl's key= is a value, and this one is the same on every call, "
        f"so every call would share one decision: pass the values, {fix}"
    )


def _unstable(value: Any, where: str) -> str | None:
    if isinstance(value, _STABLE_SCALARS):
        return None
    if is_tensor(value):
        shape = tuple(getattr(value, "shape", ()))
        return f"`{where}` is a tensor (shape {shape}): the key would be its values"
    if isinstance(value, (tuple, list, set, frozenset)):  # a torch.Size is a tuple of ints
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
    if is_numpy_scalar(value):  # np.prod(x.shape): a number, keyed as its Python value
        return None
    if hasattr(value, "__array__"):
        return f"`{where}` is an array ({type(value).__name__}): the key would be its values"
    if " at 0x" in repr(value):
        return (
            f"`{where}` is a {type(value).__name__} whose printed form is its address "
            f"({value!r}): the key would be that object"
        )
    try:
        hash(value)
    except TypeError:
        return f"`{where}` is a {type(value).__name__} ({value!r:.60}), which no key can hold"
    return None
