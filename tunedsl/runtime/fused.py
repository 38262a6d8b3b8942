"""The fast path of one site entry: repeat check, ``bind`` and direct launch in one C call.

A serving loop calls a site with the same argument layout every step. For such a call the
site's generic path (``Site._call``, the entry's repeat check, ``Entry.launch``, the
``Launcher``) runs several Python frames and re-packs the launch arguments with
star-arguments. The fused launch (``native_fused.c``, the extension ``native.py`` loads)
does the same steps in one C call, with the launcher's constants (function, metadata,
trailing defaults, device) bound and every argument passed positionally. A tensor argument
is passed as the device address the check read for its alignment: the launch then neither
calls ``data_ptr()`` again nor asks the driver whether the address is device memory (a
locked driver call per tensor). That question was answered when the entry first launched
these arguments' layout, and the check guarantees that this call's tensors have the same
dispatch keys and device as that call's.

It returns the entry's ``LaunchResult`` after launching, or None, before launching, for a
call of another layout or with holes (the site then builds the call key). A call of this
layout that the direct launch does not cover (a configuration-dependent argument that
changed, a launch hook, another device) goes to the entry's launcher, as the generic path
would send it. So the fused launch only ever does what the generic path would do.

Where it cannot be had (the extension not built, ``TUNEDSL_SAFE=fused``, a Triton whose
launch-hook test is not the one the C form knows, a layout without a structured check) the
entry has none: its calls take the generic path, whose repeat check still skips the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.model.hole import HOLE
from tunedsl.model.repeat_check import RepeatCheckCode
from tunedsl.runtime import native
from tunedsl.runtime.entry import Entry, Fused

if TYPE_CHECKING:
    from tunedsl.backends.triton_launch import DirectPlan


# The launch-hook test the C form does (compat.LAUNCH_HOOKED_CODE's form it knows): a plan
# whose Triton needs another test has no fused launch.
NATIVE_HOOKED_CODE = "({rt}.launch_enter_hook.calls or {rt}.launch_exit_hook.calls)"


def fuse_entry(
    kernel: Any,
    entry: Entry,
    code: RepeatCheckCode,
    args: Sequence[Any],
    static_kwargs: Mapping[str, Any],
    fallback: Callable[..., Any] | None = None,
) -> Fused | None:
    """The fused launch of ``entry`` for calls of ``kernel`` that pass ``code``, or None:
    where its launcher launches directly, the entry needs nothing per call beyond the launch
    (zeroing, holes) and the C form can be had. ``fallback``, the site's call: the fused
    launch then also takes the whole call, ``(kernel, args, kwargs, bind, key, lazy)``, and
    hands a call it turns down to ``fallback`` (see :func:`takes_whole_call`)."""
    plan_of = getattr(entry.launcher_object, "plan", None)
    if plan_of is None or entry.zeroing or any(a is HOLE for a in args) or not knobs.fused_launch():
        return None
    plan = plan_of(static_kwargs)
    if plan is None or plan.hooked_code != NATIVE_HOOKED_CODE or not code.arg_checks:
        return None
    fused_type = native.fused_type()
    if fused_type is None:
        return None
    return make_fused(fused_type, kernel, entry, code, plan, fallback)


def takes_whole_call(fused: Fused | None) -> bool:
    """Whether ``fused`` was built with a fallback: the site's call itself."""
    return getattr(fused, "takes_whole_call", False) is True


def make_fused(
    fused_type: Any,
    kernel: Any,
    entry: Entry,
    check: RepeatCheckCode,
    plan: DirectPlan,
    fallback: Callable[..., Any] | None = None,
) -> Fused:
    """The C fused launch (``native_fused.c``, of type ``fused_type``) of ``entry``."""
    if fallback is not None:  # the site's call: Dynamo must trace it as the site's call
        from tunedsl.backends import torch_compile

        if not torch_compile.note_fused_type(fused_type, fallback):
            fallback = None  # this PyTorch's Dynamo cannot trace it: not the site's call
    fused: Fused = fused_type(
        kernel,
        tuple(c.test for c in check.arg_checks),
        tuple(c.low for c in check.arg_checks),
        tuple(c.expected for c in check.arg_checks),
        check.tensor_positions,
        check.reads_pointers,
        plan.int_pointers,  # tensors as the addresses read (see the module docstring)
        check.env["hole"],
        check.env["constexpr_key"],
        check.env["check"],
        entry.config,
        entry.result,
        entry,
        entry.launcher,
        plan.dyn0,
        plan.runtime,
        plan.run,
        plan.device,
        plan.get_device,
        plan.get_stream,
        tuple(plan.middle),
        tuple(plan.tail),
        plan.packs_args,
        fallback,
        check.kwargs_sample,
    )
    return fused
