"""Mistakes in a site's ``key=`` (runtime layer): a value that would not repeat from call to
call (a tensor, an object keyed by its address), kernel parameter names given as
``triton.autotune``'s ``key=`` is, which never change, or a value tunedsl cannot write into
the record key so that its written form is its equality (``model/key_json``): a custom class,
whatever its ``__eq__`` and ``repr``, which another process would read back by its printed
form."""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any

from tunedsl.errors import UsageError
from tunedsl.model.keys import is_numpy_scalar, is_tensor

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo

__all__ = ["check_key", "check_key_names"]

_KEY_FIX = (
    "key on sizes and other plain values that repeat, e.g. key=x.shape, key=(m, n) or key=n // 1024"
)
_PLAIN_FIX = "Fix: pass a tuple of its fields, or make it a dataclass"


def check_key(key: Any, label: str) -> None:
    """``key=`` must repeat for calls that should share a decision: a tensor keys on its
    printed values and an object on its address, so every new one would tune again."""
    why = _unstable(key, "key=")
    if why is not None and why.endswith(_PLAIN_FIX):
        raise UsageError(f"{label}: {why}")
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
    """Why ``value`` (at ``where`` in ``key=``) is no key: a value that would not repeat, or
    one whose written form (``key_json``) would not be its equality; None for a plain value."""
    if value is None:
        return None
    base = next((b for b in _PLAIN if isinstance(value, b)), None)
    if base is not None and type(value).__eq__ is base.__eq__:  # an IntEnum member: an int
        if base is dict:
            for k, item in value.items():
                why = _unstable(k, f"{where} key {k!r:.40}") or _unstable(item, f"{where}[{k!r}]")
                if why is not None:
                    return why
        elif base in (tuple, list, set, frozenset):  # a torch.Size, a namedtuple: a tuple
            for i, item in enumerate(value):
                why = _unstable(item, f"{where}[{i}]")
                if why is not None:
                    return why
        return None
    if is_tensor(value):
        shape = tuple(getattr(value, "shape", ()))
        return f"`{where}` is a tensor (shape {shape}): the key would be its values"
    if is_numpy_scalar(value) or _is_dtype(value):  # np.prod(x.shape), x.dtype, x.device
        return None
    if isinstance(value, type):  # float, np.float32: equal only to itself, printed by its name
        return None
    if isinstance(value, enum.Enum) and type(value).__eq__ is object.__eq__:
        return None  # written by its class and name, equal only to itself
    if _plain_dataclass(value):
        for field in dataclasses.fields(value):  # written by these (key_json)
            if field.compare:  # a field == ignores is not written: an address there is no matter
                why = _unstable(getattr(value, field.name), f"{where}.{field.name}")
                if why is not None:
                    return why
    elif hasattr(value, "__array__"):
        return f"`{where}` is an array ({type(value).__name__}): the key would be its values"
    elif " at 0x" in repr(value):
        return (
            f"`{where}` is a {type(value).__name__} whose printed form is its address "
            f"({value!r}): the key would be that object"
        )
    try:
        hash(value)
    except TypeError:
        return f"`{where}` is a {type(value).__name__} ({value!r:.60}), which no key can hold"
    if _plain_dataclass(value):
        return None
    return (
        f"`{where}` is a {type(value).__qualname__} ({value!r:.60}): the record key is read "
        "by other processes, and tunedsl writes a key= value so that its written form is its "
        "equality only for plain values (numbers, strings, tuples, lists, dicts, sets, enum "
        "members, dtypes, classes, dataclasses with their generated __eq__), so unequal ones could "
        "share one decision. " + _PLAIN_FIX
    )


_PLAIN: tuple[type, ...] = (int, float, str, bytes, tuple, list, dict, set, frozenset)


# Torch's and Triton's value types that print as what they are, compared by that value.
_TORCH_VALUES = frozenset({"dtype", "device", "layout", "memory_format"})


def _is_dtype(value: Any) -> bool:
    """A dtype, device, layout or memory format of torch, a dtype of numpy or Triton: written
    by its printed form (``torch.float16``, ``device(type='cuda', index=0)``), its value."""
    kind = type(value)
    if kind.__module__ == "torch":
        return kind.__name__ in _TORCH_VALUES
    return any(
        c.__name__ == "dtype" and c.__module__.split(".")[0] in ("numpy", "triton")
        for c in kind.__mro__
    )


def _plain_dataclass(value: Any) -> bool:
    """A dataclass instance whose class was itself decorated with eq=True and keeps the
    __eq__ dataclasses generated (compiled from a string): equal exactly when its compared
    fields are. Not a subclass adding its own __eq__, nor eq=False: no verdict, refused."""
    cls = type(value)
    params = cls.__dict__.get("__dataclass_params__")
    eq = cls.__dict__.get("__eq__")
    return (
        params is not None
        and getattr(params, "eq", False)
        and eq is not None
        and eq is cls.__eq__
        and getattr(getattr(eq, "__code__", None), "co_filename", None) == "<string>"
        and getattr(eq, "__qualname__", "") == f"{cls.__qualname__}.__eq__"
    )
