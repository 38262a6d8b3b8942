"""A tensor that only a configuration-dependent descriptor passes (runtime layer).

The call key sees the launch's arguments before any configuration is bound: a ``$``-using
argument is a hole there. When such an argument is a tensor descriptor of a tensor that no
other argument passes (``TensorDescriptor.from_tensor(x, [$BM, $BK])``), nothing of that
tensor's shape or dtype reaches the key, and calls of every shape would share one
decision. Without ``key=`` that is a ``UsageError`` on the site's first tuning, with the
fix. A plain tensor made per configuration (a scratch buffer, ``torch.zeros($SPLIT * n)``)
is sized from the configuration and the call's keyed arguments, so it is no such case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.model.hole import HOLE
from tunedsl.model.keys import dtype_name, is_tensor, is_tensor_descriptor


def _tensors(value: Any, bases_only: bool = False) -> Iterator[Any]:
    # The tensors a launch argument passes: itself, a descriptor's base, a tuple's items
    # (with bases_only, the descriptors' bases alone).
    if is_tensor(value):
        if not bases_only:
            yield value
    elif is_tensor_descriptor(value):
        yield value.base
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item, bases_only)


def check(
    arg_names: Sequence[str],
    args: Sequence[Any],
    static_kwargs: Mapping[str, Any],
    holes: Sequence[Any],
    dyn_kwargs: Mapping[str, Any],
    storage: Callable[[Any], int],
    label: str,
) -> None:
    """``args`` with ``HOLE`` where ``holes`` (one configuration's values) go; ``storage``
    gives a tensor's storage address, so a view of a keyed tensor counts as keyed."""
    keyed = [a for a in args if a is not HOLE] + list(static_kwargs.values())
    seen = {storage(t) for value in keyed for t in _tensors(value)}
    positions = [i for i, a in enumerate(args) if a is HOLE]
    named = [
        (arg_names[i] if i < len(arg_names) else f"argument {i}", v)
        for i, v in zip(positions, holes, strict=False)
    ]
    for name, value in [*named, *dyn_kwargs.items()]:
        for t in _tensors(value, bases_only=True):
            if storage(t) in seen:
                continue
            raise UsageError(
                f"{label}: `{name}` depends on the configuration and describes a tensor "
                f"({dtype_name(t.dtype)}, shape {list(t.shape)}) that no other argument "
                "passes, so the key cannot see its shape or dtype and calls of every shape "
                "would share one decision; give autotune(...) a key= of what the decision "
                "depends on (key=(x.shape, str(x.dtype)) for that tensor x), or pass the "
                "tensor itself to the kernel too"
            )
