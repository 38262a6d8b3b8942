"""Whether a ``prune=`` reads the data of the tensors it is given.

A site whose prune reads an argument keys its decisions on that argument's value; of a
tensor, that is its dtype and shape (``model/prune_keys.py``): its data never joins a key
(reading it on every call would copy it from the GPU). A prune that decides by the data
(``int(args["lens"].max())``, the longest of a batch's rows) would have the decision made
for one call's data reused for another's. While the prune runs, a torch function mode
notes such a read: every read of a tensor's data ends in turning a value of it, or of a
tensor computed from it, into Python (``int()``, ``float()``, ``bool()``, ``item()``,
``tolist()``, ``in``, printing it, handing it to NumPy through DLPack), or in computing a
tensor whose size the data sets (``nonzero()``, ``unique()``, a mask as an index: its
``numel()`` counts the data's rows; a value computed from it given as a size or a slice's
bound, ``torch.arange(lens.max())``, which PyTorch reads in C++). Its shape, dtype, strides
and the like are no such read. The prune is handed the tensors themselves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: The tensor methods that turn its data into Python values.
_TO_PYTHON = frozenset(
    {
        "__bool__", "__int__", "__float__", "__index__", "__complex__", "__contains__",
        "__format__", "__repr__", "__str__", "__array__", "item", "tolist", "numpy",
        "equal", "allclose", "__dlpack__", "to_dlpack",
    }
)  # fmt: skip

#: The operations whose result's size the data sets (a count of its rows is a read of it).
_SIZED_BY_DATA = frozenset(
    {
        "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "_unique",
        "_unique2", "bincount", "repeat_interleave",
    }
)  # fmt: skip

#: The operations that make a tensor from sizes alone (no tensor to work on comes first).
_FACTORIES = frozenset(
    {
        "arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
        "linspace", "logspace", "eye",
    }
)  # fmt: skip

#: The operations that take sizes, counts or bounds, which PyTorch reads from a tensor
#: given for one (``torch.arange(lens.max())``) in C++, no Python conversion to see.
_TAKES_SIZES = frozenset(
    {
        "arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
        "linspace", "logspace", "eye", "new_empty", "new_zeros", "new_ones", "new_full",
        "narrow", "narrow_copy", "expand", "reshape", "view", "repeat", "tile", "pad",
        "unfold", "split", "tensor_split", "chunk", "topk", "kthvalue", "roll", "select",
        "unflatten", "as_strided", "resize_", "__getitem__",
    }
)  # fmt: skip


#: What a tensor tells besides its data that no key holds (a key holds its dtype, shape,
#: strides and 16-byte alignment): where its memory is, whether it takes gradients.
_KEYLESS = frozenset(
    {
        "data_ptr", "storage_offset", "untyped_storage", "storage", "is_set_to", "is_pinned",
        "is_shared", "requires_grad", "grad", "grad_fn", "is_leaf", "_base", "_version",
    }
)  # fmt: skip


class _DataReads(TorchFunctionMode):
    """Notes in ``seen`` (argument name -> method) a read of the data of the tensors in
    ``names`` (by ``id``: argument name) or of a tensor computed from them."""

    def __init__(self, names: dict[int, str], seen: dict[str, str]) -> None:
        super().__init__()
        self.names, self.seen = names, seen
        self.held: list[Any] = []  # the computed tensors named, so that no id is reused

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = next((self.names[id(a)] for a in _flat((args, kwargs)) if id(a) in self.names), None)
        out = func(*args, **kwargs)
        if name is None:
            return out
        method = getattr(func, "__name__", "")
        if method == "__get__":  # a property (`x.requires_grad`): its descriptor's name
            method = "." + str(getattr(getattr(func, "__self__", None), "__name__", ""))
        if (
            method in _TO_PYTHON
            or method.lstrip(".") in _KEYLESS
            or method in _SIZED_BY_DATA
            or _sized_by_data(method, args)
        ):
            self.seen.setdefault(name, method)
        elif method in _TAKES_SIZES:
            sized = self._sized_by(method, args, kwargs)
            if sized is not None:
                self.seen.setdefault(sized, method)
        for value in _flat((out,)):
            if isinstance(value, torch.Tensor):
                self.names[id(value)] = name
                self.held.append(value)
        return out

    def _sized_by(self, method: str, args: Any, kwargs: Any) -> str | None:
        """The name of the argument a tensor given as a size, count or bound (a slice's, for
        an index) was computed from, if any: never the tensor an operation works on (its
        first argument, but for a factory's)."""
        given = args if method in _FACTORIES else args[1:]
        if method == "__getitem__":  # only a slice's bounds: an index picks, it does not size
            given = [(i.start, i.stop, i.step) for i in _slices(given)]
        found = (self.names[id(a)] for a in _flat((given, kwargs)) if id(a) in self.names)
        return next(found, None)


def _sized_by_data(method: str, args: Any) -> bool:
    """A mask as an index (``x[x > 256]``), or ``torch.where`` of a condition alone: their
    results' sizes count the data's rows."""
    if method == "where":
        return len(args) == 1
    if method in ("__getitem__", "index_select", "take"):
        return any(
            isinstance(a, torch.Tensor) and a.dtype in (torch.bool, torch.uint8)
            for a in _flat(args[1:])
        )
    return False


def _slices(items: Any) -> list[slice]:
    found: list[slice] = []
    for item in items:
        if isinstance(item, tuple | list):
            found += _slices(item)
        elif isinstance(item, slice):
            found.append(item)
    return found


def _flat(items: Any) -> list[Any]:
    found = []
    for item in items:
        if isinstance(item, tuple | list):
            found += _flat(item)
        elif isinstance(item, dict):
            found += _flat(tuple(item.values()))
        elif isinstance(item, slice):  # an index's bounds: x[:, : lens.max()]
            found += _flat((item.start, item.stop, item.step))
        else:
            found.append(item)
    return found


@contextlib.contextmanager
def data_reads(values: Mapping[str, Any], seen: dict[str, str]) -> Iterator[None]:
    """Within it, a read of the data of a tensor among ``values`` is noted in ``seen``
    (argument name -> the method that read it). Nothing is noted while ``torch.compile``
    traces (its tensors hold no data)."""
    names = {id(v): n for n, v in values.items() if isinstance(v, torch.Tensor)}
    if not names or torch.compiler.is_compiling():
        yield
        return
    with _DataReads(names, seen):
        yield


def described(name: str, method: str) -> str:
    """A read of the tensor argument ``name`` as an error names it: the data (`int()` of it,
    `.item()` of it) or a fact no key holds (`x.requires_grad`, `x.data_ptr()`)."""
    if method.lstrip(".") in _KEYLESS:
        read = f"{name}{method}" if method.startswith(".") else f"{name}.{method}()"
        return f"`{read}` of the tensor argument `{name}`"
    data = f"the data of the tensor argument `{name}`"
    if method == "__getitem__":
        return f"{data} (a mask of it, or a bound computed from it, in an index: its data sets the result's size)"
    if method in _TAKES_SIZES:
        return f"{data} (a value computed from it given to `{method}()` as a size, count or bound)"
    if method in ("__dlpack__", "to_dlpack"):
        return f"{data} (it handed to another library through DLPack)"
    if method.startswith("__") and method.endswith("__"):
        word = method.strip("_")
        how = "`in`" if word == "contains" else f"`{word}()`"
    else:
        how = f"`.{method}()`"
    sized = ", whose result's size its data sets" if method in (*_SIZED_BY_DATA, "where") else ""
    return f"{data} ({how} of it{sized})"
