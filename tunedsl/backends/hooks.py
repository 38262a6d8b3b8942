"""The user's tuning hooks (backends layer): what ``pre_hook``/``post_hook`` receive, how
``pre_hook`` is called (docs/runtime.md, "The hook rule"), and what ``verify=`` may name.

The in-process measurer (``inprocess.py``), the isolated worker and the verify-only path of
the tuner share these, so a hook sees the same arguments wherever it runs.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.backends.inplace import data_arguments, names_tensors
from tunedsl.errors import UsageError
from tunedsl.model.options import did_you_mean
from tunedsl.model.variant import Variant


def call_pre_hook(hook: Callable[..., Any], args: Mapping[str, Any]) -> None:
    """Run the user's ``pre_hook``. Its error is the caller's, not the configuration's: it
    stops the tuning (as in ``triton.autotune``) instead of dropping the configuration. A
    hook that sets a host tensor descriptor's block shape (Triton's tutorials set it from the
    configuration) is an error: see ``DESCRIPTOR_HOOK_FIX``."""
    fix = "a hook's error stops the tuning, it does not drop the configuration: fix the hook"
    before = {n: list(d.block_shape) for n, d in args.items() if _host_descriptor(d)}
    call_user(hook, dict(args), "pre_hook=", fix)
    for name, shape in before.items():
        if list(args[name].block_shape) != shape:
            raise UsageError(
                f"pre_hook= set the block shape of the tensor descriptor {name!r} "
                f"({shape} to {list(args[name].block_shape)}): {DESCRIPTOR_HOOK_FIX}"
            )


#: Why a ``pre_hook`` may not set what a configuration compiles with, and the port that works.
DESCRIPTOR_HOOK_FIX = (
    "tunedsl compiles each configuration before any pre_hook runs, and runs pre_hook only "
    "while tuning, so a hook cannot give a descriptor the configuration's block; build the "
    "descriptors per configuration in the launch instead: kwargs=lambda cfg: {'a_desc': "
    "TensorDescriptor.from_tensor(a, [cfg.BM, cfg.BK]), ...} (docs/triton-autotune.md)"
)


def _host_descriptor(value: Any) -> bool:
    """A host-side tensor descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``)."""
    return hasattr(value, "block_shape") and hasattr(value, "base") and hasattr(value, "strides")


def descriptor_hook_hint(settings: Any, args: Sequence[Any]) -> str | None:
    """Where every configuration failed, a ``pre_hook`` is given and the launch passes host
    tensor descriptors: the hook may be Triton's block-shape hook, which cannot work here."""
    if getattr(settings, "pre_hook", None) is None or not any(map(_host_descriptor, args)):
        return None
    return f"if pre_hook= sets the tensor descriptors' block shapes: {DESCRIPTOR_HOOK_FIX}"


def takes_reset_only(hook: Callable[..., Any]) -> bool:
    """Whether ``hook`` takes Triton's ``reset_only=`` keyword (``pre_hook(args,
    reset_only=False)``), by name or through ``**kwargs``."""
    import inspect

    try:
        params = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: not Triton's form
        return False
    return any(
        (p.name == "reset_only" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD
        for p in params
    )


def call_user(fn: Callable[..., Any], arg: Any, option: str, fix: str) -> Any:
    """``fn(arg)`` for a function the user gave as ``option``; its error (a bug of the
    caller's, not of a configuration) is a ``UsageError`` naming the option and where it was
    raised."""
    try:
        return fn(arg)
    except UsageError:
        raise
    except Exception as err:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        first = next((line for line in str(err).splitlines() if line.strip()), "")
        raise UsageError(
            f"{option} raised {type(err).__name__}: {first[:300]} (at {frame.filename}:"
            f"{frame.lineno}); {fix}"
        ) from err


def hook_args(info: Any, v: Variant, hints: Mapping[str, Any]) -> dict[str, Any]:
    """What ``pre_hook``/``post_hook`` receive for ``v``: its arguments by parameter name
    and its launch options (``num_warps``, ...), as Triton's hooks see them. ``hints`` are
    the site's static hints."""
    from tunedsl.backends import triton as bt
    from tunedsl.model.hints import hint_fields

    bound = bt.bind_arguments(info, v.args, v.kwargs)
    # The interpreter's launches get the hints too (it drops them before running the
    # kernel), so a hook reading args["num_warps"] runs on the CPU as on a GPU; and, as
    # triton.autotune's hooks, triton.Config's defaults of those the configuration leaves unset.
    options = {**bt.config_launch_defaults(), **(v.options or hint_fields(v.config, hints))}
    return {**{k: x for k, x in options.items() if k not in bound}, **bound}


def check_named(bound: Mapping[str, Any], settings: Any, info: Any, label: str) -> None:
    """The names ``restore_value=``, ``reset_to_zero=`` and ``verify=[...]`` give must be
    tensor parameters of the kernel (``None``, an optional buffer, is skipped as Triton
    does; a tensor descriptor stands for its tensor, a tuple for the tensors in it): checked
    before any configuration runs, by a site on each new key and by every tuning, with
    ``label`` (the site's place) and the parameter a misspelled name is closest to."""
    data = data_arguments(bound)
    tensors = [n for n, v in bound.items() if v is not None and names_tensors(n, data)]
    name = info.qualname.rsplit(".", 1)[-1]
    signature = f"{name}({', '.join(info.arg_names)})"
    verify = settings.verify
    named = {"restore_value": settings.restore_value, "reset_to_zero": settings.reset_to_zero}
    if verify not in (None, True, False) and not callable(verify):
        named["verify"] = tuple(verify)
    for option, names in named.items():
        for given in names:
            if given in bound and (bound[given] is None or names_tensors(given, data)):
                continue
            if given in bound:
                value = bound[given]
                what = f"{given!r} is not a tensor (the launch passes the "
                what += f"{type(value).__name__} {value!r})"[:200]
            else:
                what = f"{given!r} is not a parameter of {signature}"
            close = did_you_mean(given, tensors) if given not in bound else None
            hint = (
                f"did you mean {close!r}?"
                if close
                else f"its tensor parameters are: {', '.join(tensors) or '(none)'}"
            )
            raise UsageError(f"{label}: {option}=: {what}; {hint}")


def check_output(
    name: str,
    tensors: Sequence[str],
    reference: Mapping[str, Any] | None,
    bound: Mapping[str, Any],
    bt: Any,
) -> None:
    """An output ``verify=`` compares must be a tensor parameter, and the reference
    ``verify=fn`` returned for it a tensor of its shape (checked before any configuration
    runs: a wrong reference would reject every configuration, or one of None none)."""
    if name not in tensors:
        raise UsageError(
            f"verify: {name!r} is not a tensor parameter of the kernel; tensor "
            f"parameters are: {', '.join(tensors)}"
        )
    bad = reference is not None and bt.reference_problem(reference[name], bound[name])
    if bad:
        raise UsageError(
            f"verify=fn: the reference for {name!r} {bad}; return the expected tensor, "
            f"of the output's shape, or leave {name!r} out of the dict to not compare it"
        )


def reset_only_pre_hook(settings: Any, info: Any, chosen: Variant) -> None:
    """``triton.autotune`` calls its ``pre_hook`` once more after tuning, as
    ``pre_hook(args, reset_only=True)`` with the chosen configuration's arguments, before the
    tuning call's own launch (a hook zeroing an accumulator zeroes it for that launch too):
    a hook that takes ``reset_only`` gets that call here, after the arguments are put back."""
    hook = settings.pre_hook
    if hook is None or not takes_reset_only(hook):
        return
    args = hook_args(info, chosen, settings.hints)
    call_user(lambda a: hook(a, reset_only=True), args, "pre_hook=", "fix the hook")
