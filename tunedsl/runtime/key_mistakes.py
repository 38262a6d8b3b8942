"""Mistakes in a site's ``key=`` (runtime layer): a value that would not repeat from call to
call (a tensor, an object keyed by its address), kernel parameter names given as
``triton.autotune``'s ``key=`` is, which never change, or two unequal values printed alike,
which the record key (written by the printed form) could not tell apart."""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

from tunedsl.errors import UsageError
from tunedsl.model.keys import hashable_user_key, is_numpy_scalar, is_tensor, json_safe

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo

__all__ = ["check_key", "check_key_names", "check_key_on_miss"]

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


def check_key_on_miss(key: Any, site_id: str, label: str) -> None:
    """The checks of a ``key=`` new to the site's table: ``check_key``, and that no value
    written by its printed form was written alike by an unequal one at this site."""
    check_key(key, label)
    printed: list[tuple[Any, str]] = []
    json_safe(hashable_user_key(key), printed)
    for value, text in printed:
        if value.__class__.__eq__ is object.__eq__:
            continue  # equal only to itself: its printed form is all the equality it has
        with _PRINTED_LOCK:
            if len(_PRINTED) >= _MAX_PRINTED:
                _PRINTED.clear()
            first = _PRINTED.setdefault((site_id, text), value)
        if first is not value and not _equal(first, value):
            raise UsageError(
                f"{label}: key={key!r:.80} holds a {type(value).__name__} printed {text!r}, "
                f"as an unequal one of an earlier call was ({_state(first)}, now "
                f"{_state(value)}): the record key is written by the printed form, so they "
                "would share one decision. Fix: give key= a value whose printed form tells "
                "them apart: a tuple of its fields, or a dataclass (written by its fields)"
            )


# (site id, printed form) -> the first key= value written by it, filled on misses only (a
# hit never writes a record key). Bounded: a serving loop may meet a new key on every call.
_PRINTED: dict[tuple[str, str], Any] = {}
_MAX_PRINTED = 1024
_PRINTED_LOCK = threading.Lock()


def _state(value: Any) -> str:
    # What tells the two apart where the printed form does not: the instance's attributes.
    state = getattr(value, "__dict__", None)
    return f"{state}"[:80] if state else f"{type(value).__qualname__} {value!r:.60}"


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an __eq__ that raises, or an answer with no truth value: no verdict
        return True


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
    fields = dataclasses.is_dataclass(value) and not isinstance(value, type)
    for field in dataclasses.fields(value) if fields else ():  # written by these (key_json)
        if field.compare:  # a field == ignores is not written: an address there is no matter
            why = _unstable(getattr(value, field.name), f"{where}.{field.name}")
            if why is not None:
                return why
    if hasattr(value, "__array__"):
        return f"`{where}` is an array ({type(value).__name__}): the key would be its values"
    if not fields and " at 0x" in repr(value):
        return (
            f"`{where}` is a {type(value).__name__} whose printed form is its address "
            f"({value!r}): the key would be that object"
        )
    try:
        hash(value)
    except TypeError:
        return f"`{where}` is a {type(value).__name__} ({value!r:.60}), which no key can hold"
    return None
