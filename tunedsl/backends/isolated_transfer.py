"""Sending a tuning to a measurement worker (backends layer): the kernel by value, the inputs
copied (see ``isolated.py`` for why and what it costs).

- ``dumps``: cloudpickle, with each Triton kernel (and ``@triton.constexpr_function``)
  reduced to its Python function plus its ``triton.jit`` options and its source (made again
  in the worker), or to a reference (module, qualified name) when it lives in an importable
  module.
- ``pack_inputs``/``rebuild_variant``: each tensor argument's storage copied once (arguments
  sharing a storage share it in the worker), with dtype, shape, strides and offset.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import linecache
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.backends import compat
from tunedsl.model.keys import is_tensor
from tunedsl.model.variant import Variant


@dataclass(frozen=True)
class TensorRef:
    """A tensor argument: a view into one of the copied storages."""

    storage: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


def _triton_kind(obj: Any) -> str | None:
    """``"jit"`` for a Triton kernel or ``@triton.jit`` function, ``"constexpr"`` for a
    ``@triton.constexpr_function``; None for anything else."""
    cls = type(obj)
    if not cls.__module__.startswith("triton."):
        return None
    if cls.__name__ in ("JITFunction", "InterpretedFunction"):
        return "jit"
    return "constexpr" if cls.__name__ == "ConstexprFunction" else None


def _jit_options(kernel: Any) -> dict[str, Any]:
    """The ``triton.jit`` keyword arguments that rebuild ``kernel`` from its function."""
    inner = getattr(kernel, "jit_function", kernel)  # InterpretedFunction wraps a JITFunction
    options: dict[str, Any] = {}
    names = getattr(inner, "arg_names", ())
    # Each changes what Triton specializes, so the binary the worker times; by name (a
    # position given there names the same parameter).
    for flag in ("do_not_specialize", "do_not_specialize_on_alignment"):
        listed = getattr(inner, flag, None)
        if listed:
            options[flag] = [names[i] if isinstance(i, int) else i for i in listed]
    for name in ("debug", "noinline"):
        value = getattr(inner, name, None)
        if value is not None:
            options[name] = value
    return options


def _source_of(obj: Any) -> tuple[str, int, list[str]] | None:
    """Where the Triton function ``obj`` was written: its file name, first line and lines,
    as it read them when it was made (the file may be edited since; None: no source)."""
    fn = obj.fn
    source = compat.jit_source(obj)
    if source is None:
        try:
            source = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            return None
    lines, start = source
    return fn.__code__.co_filename, max(start, 1), list(lines)


def _give_source(fn: Any, source: tuple[str, int, list[str]]) -> None:
    """Make ``fn``'s source readable here as where it was written. A Triton kernel reads it
    when it is made (the interpreter when it first runs), but cloudpickle 3.1 and later ship
    a function's code as from ``<dynamic-code>``, and a notebook cell or a file edited since
    is not here to read: the lines sent stand for the file, as a notebook's cells do."""
    filename, start, lines = source
    code = fn.__code__
    if code.co_filename != filename:
        fn.__code__ = code.replace(co_filename=filename)
    with contextlib.suppress(OSError, TypeError):
        if inspect.getsourcelines(fn) == (lines, start):
            return  # read from the file itself, unchanged
    padded = ["\n"] * (start - 1) + list(lines)
    linecache.cache[filename] = (sum(map(len, padded)), None, padded, filename)


def _rebuild_jit(
    fn: Any, options: dict[str, Any], source: tuple[str, int, list[str]] | None = None
) -> Any:
    import triton

    if source is not None:
        _give_source(fn, source)
    return triton.jit(fn, **options)


def _rebuild_constexpr_function(fn: Any, source: tuple[str, int, list[str]] | None) -> Any:
    import triton

    if source is not None:
        _give_source(fn, source)
    return triton.constexpr_function(fn)


def _import_jit(module: str, qualname: str) -> Any:
    import importlib

    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _by_reference(kernel: Any) -> tuple[str, str] | None:
    fn = getattr(kernel, "fn", None)
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname or module not in sys.modules:
        return None
    try:
        if _import_jit(module, qualname) is kernel:
            return module, qualname
    except Exception:
        pass
    return None


def dumps(obj: Any) -> bytes:
    """cloudpickle, with Triton kernels reduced to (function, jit options) or a reference."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc,name-defined]
        def reducer_override(self, obj: Any) -> Any:
            kind = _triton_kind(obj)
            if kind is not None:  # each holds a lock: made again there, from its function
                ref = _by_reference(obj)
                if ref is not None:
                    return _import_jit, ref
                if kind == "constexpr":
                    return _rebuild_constexpr_function, (obj.fn, _source_of(obj))
                return _rebuild_jit, (obj.fn, _jit_options(obj), _source_of(obj))
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def pack_inputs(variants: Sequence[Variant]) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """(storages copied to the CPU, variants as tuples with tensors replaced by TensorRef)."""
    import torch

    storages: list[Any] = []
    index_of: dict[tuple[str, int, int], int] = {}

    def ref(t: Any) -> TensorRef:
        storage = t.untyped_storage()
        # Its size too: two storages over one memory (``torch.from_dlpack`` of a slice) start
        # at one address, and a view of the larger one reaches past the smaller one's copy.
        where = (str(t.device), storage.data_ptr(), storage.nbytes())
        index = index_of.get(where)
        if index is None:
            index = index_of[where] = len(storages)
            # As a uint8 tensor: torch cannot unpickle a bare UntypedStorage.
            raw = t.new_empty(0, dtype=torch.uint8).set_(storage)
            storages.append(raw.to("cpu", copy=True))
        return TensorRef(
            index,
            str(t.dtype).removeprefix("torch."),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
        )

    def pack(value: Any) -> Any:
        if is_tensor(value):
            return ref(value)
        if isinstance(value, tuple | list):
            return type(value)(pack(x) for x in value)
        return value

    packed = [
        (
            v.config,
            tuple(pack(a) for a in v.args),
            {k: pack(x) for k, x in v.kwargs.items()},
            v.grid,
            dict(v.options),
        )
        for v in variants
    ]
    return storages, packed


def rebuild_storages(storages: list[Any], device: int | None) -> list[Any]:
    """The copied storages (uint8 tensors) on the worker's device, as untyped storages."""
    if device is not None:
        storages = [s.cuda(device) for s in storages]
    return [s.untyped_storage() for s in storages]


def rebuild_variant(packed: tuple[Any, ...], storages: list[Any]) -> Variant:
    import torch

    def unpack(value: Any) -> Any:
        if isinstance(value, TensorRef):
            storage = storages[value.storage]
            dtype = getattr(torch, value.dtype)
            empty = torch.empty(0, dtype=dtype, device=storage.device)
            return empty.set_(storage, value.offset, value.shape, value.stride)
        if isinstance(value, tuple | list):
            return type(value)(unpack(x) for x in value)
        return value

    config, args, kwargs, grid, options = packed
    return Variant(
        config=config,
        args=tuple(unpack(a) for a in args),
        kwargs={k: unpack(x) for k, x in kwargs.items()},
        grid=grid,
        options=options,
    )
