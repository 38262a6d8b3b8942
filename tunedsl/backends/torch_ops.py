"""``tunedsl.torch_op``: a tunedsl launch as a PyTorch custom operator (backends layer).

``torch.compile(fullgraph=True)`` cannot trace a tunedsl site (its call-key lookup and
tuning are Python the compiler does not model: "Failed to trace builtin operator"), so the
launch is wrapped in ``torch.library.custom_op``: the compiler sees one opaque operator with
a fake (meta) implementation for shapes, and at run time the operator's body calls the site
eagerly, which takes the tuned configuration (tuning on the first call of a new key, or the
stored record). This works from PyTorch 2.4 on, including 2.11 to 2.13.

Why not ``torch.library.triton_op`` + ``wrap_triton``: they trace *into* the function and need
``wrap_triton(kernel)[grid](...)`` written there with a fixed configuration; the site's
choice of configuration is a run-time dictionary lookup (and maybe a tuning run) that the
tracer cannot follow. The price of the custom op: Inductor does not fuse into it, and a
tuning run happens on the first eager execution (``torch.compile``'s warm-up for
``mode="reduce-overhead"``), never during graph capture (``backends/capture.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tunedsl.errors import UsageError


def torch_op(
    name: str,
    *,
    mutates_args: Iterable[str] | str = (),
    fake: Callable[..., Any] | None = None,
    device_types: str | Sequence[str] | None = None,
) -> Callable[[Callable[..., Any]], Any]:
    """Decorate a function that launches tunedsl kernels so it becomes the custom operator
    ``name`` (``"namespace::op"``), callable inside ``torch.compile(fullgraph=True)``.

    The function needs type annotations (``torch.Tensor``, ``int``, ``float``, ...), as for
    ``torch.library.custom_op``. ``mutates_args``: the parameters it writes in place
    (``"unknown"`` if unsure). ``fake(*args)`` returns empty tensors of the outputs' shapes
    and dtypes for the compiler; when omitted, a function annotated ``-> None`` gets a no-op
    fake, and any other function must pass one.
    """
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise UsageError(f"torch_op: name {name!r} must look like 'namespace::op_name'")

    def decorate(fn: Callable[..., Any]) -> Any:
        import torch

        returns = inspect.signature(fn).return_annotation
        op = torch.library.custom_op(
            name,
            mutates_args=mutates_args if isinstance(mutates_args, str) else tuple(mutates_args),
            device_types=device_types,
        )(fn)
        if fake is not None:
            op.register_fake(fake)
        elif returns is None or returns == "None":
            op.register_fake(lambda *args, **kwargs: None)
        else:
            raise UsageError(
                f"torch_op({name!r}): {fn.__qualname__} returns tensors, so pass fake= "
                "(a function returning empty tensors of the outputs' shapes, e.g. "
                "`fake=lambda x: torch.empty_like(x)`) for torch.compile"
            )
        return op

    return decorate
