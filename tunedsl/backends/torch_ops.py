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
    (``"unknown"`` if unsure; a function annotated ``-> None`` must name some). ``fake(*args)``
    returns empty tensors of the outputs' shapes and dtypes for the compiler; when omitted, a
    function annotated ``-> None`` gets a no-op fake, and any other function must pass one.
    """
    if (
        not isinstance(name, str)
        or name.count("::") != 1
        or not all(part.isidentifier() for part in name.split("::"))
    ):
        raise UsageError(
            f"torch_op: name {name!r} must look like 'namespace::op_name', both Python "
            "identifiers (letters, digits and _)"
        )
    mutated = _names(mutates_args, f"torch_op({name!r}): mutates_args", "'unknown'")
    devices = (
        None
        if device_types is None
        else _names(device_types, f"torch_op({name!r}): device_types", "")
    )
    if fake is not None and not callable(fake):
        raise UsageError(
            f"torch_op({name!r}): fake={fake!r} is not callable; pass a function returning "
            "empty tensors of the outputs' shapes, e.g. `fake=lambda x: torch.empty_like(x)`"
        )

    def decorate(fn: Callable[..., Any]) -> Any:
        import torch

        if not callable(fn):
            raise UsageError(f"torch_op({name!r}) decorates a function, not {fn!r}")
        returns = inspect.signature(fn).return_annotation
        try:
            op = torch.library.custom_op(name, mutates_args=mutated, device_types=devices)(fn)
        except (ValueError, RuntimeError) as err:  # PyTorch's schema and device checks
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise UsageError(
                f"torch_op({name!r}) on {getattr(fn, '__qualname__', fn)}: PyTorch refused "
                f"it: {first}"
            ) from None
        if (returns is None or returns == "None") and not mutated:
            # An operator with no output and no declared write does nothing the compiler
            # can see: torch.compile drops or reorders it, and the caller reads stale data.
            raise UsageError(
                f"torch_op({name!r}): {fn.__qualname__} returns None and mutates_args= names "
                "no argument, so torch.compile sees an operator that does nothing (it may drop "
                "it: the tensors it writes keep their old values); list the parameters it "
                "writes, e.g. `mutates_args=['x']` (or 'unknown')"
            )
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


def _names(value: Any, what: str, or_string: str) -> Any:
    """A string, or a tuple of strings from any iterable of them; else a UsageError."""
    if isinstance(value, str):
        return value
    try:
        names = tuple(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) for n in names):
        alternative = f" or the string {or_string}" if or_string else " or one string"
        raise UsageError(f"{what}={value!r}: give a list of names{alternative}")
    return names


_is_compiling: Callable[[], bool] | None = None  # torch.compiler.is_compiling, once imported


def break_graph_for_launch() -> None:
    """Inside a ``torch.compile`` trace, break the graph before ``autotune_launch``, whose
    call-site lookup Dynamo cannot trace, with a message that names the fixes (with
    ``fullgraph=True`` the break is an error that shows it; without, the call runs eagerly,
    as it did before). Every ``autotune_launch`` call asks: the check is kept at hand."""
    global _is_compiling
    if _is_compiling is None:
        import torch

        _is_compiling = torch.compiler.is_compiling
    if _is_compiling():
        from tunedsl.backends.compat.dynamo import graph_break

        graph_break(
            "tunedsl.autotune_launch runs eagerly, outside the graph. With fullgraph=True "
            "write the launch as a DSL site (autotune(...), which traces), or wrap the call "
            "in tunedsl.torch_op (docs/pytorch.md)."
        )


def keep_eager(code: Any) -> None:
    """Once Dynamo is loaded, it never compiles a frame of ``code`` nor of what it calls:
    after :func:`break_graph_for_launch`'s break, ``autotune_launch`` runs as written (Dynamo
    would otherwise compile the rest of it, breaking again at ``sys._getframe`` with a
    warning to report that to PyTorch, then at the site's locks and generators)."""
    from tunedsl.backends import dynamo_watch
    from tunedsl.backends.compat.dynamo import run_eagerly

    dynamo_watch.when_dynamo_loaded(lambda: run_eagerly(code))
