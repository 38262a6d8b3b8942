"""The fused hot path of one site entry: repeat check, ``bind`` and direct launch in one
generated function.

A serving loop calls a site with the same argument layout every step. For such a call the
site's general path runs four Python frames (``Site.__call__``, the repeat check, the
launcher, its hook test) and re-packs the launch arguments with star-arguments. The fused
function does the same steps in one frame, with the launcher's constants (function,
metadata, trailing defaults, device) bound as names and every argument passed positionally.
A tensor argument is passed as the device address the check read for its alignment: the
launcher then neither calls ``data_ptr()`` again nor asks the driver whether the address is
device memory (a locked driver call per tensor). That question was answered when the entry
first launched these arguments' layout, and the check guarantees that this call's tensors
have the same dispatch keys and device as that call's.

It returns the entry's ``LaunchResult`` after launching, or None, before launching, for a
call of another layout (the site then builds the call key). A call of this layout that the
direct launch does not cover (a configuration-dependent argument that changed, a launch
hook, another device) goes to the entry's launcher, as the general path would send it. So
the fused function only ever does what the general path would do.

Where the C form can be had (``runtime/native.py``), the fused launch is that object, built
from the same check in structured form (``RepeatCheckCode.arg_checks``): the same steps
without the bytecodes. ``make_python_fused`` is the generated function, the reference the
C form is tested against.
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
# whose Triton needs another test keeps the Python form.
NATIVE_HOOKED_CODE = "({rt}.launch_enter_hook.calls or {rt}.launch_exit_hook.calls)"


def make_fused(
    kernel: Any,
    entry: Entry,
    check: RepeatCheckCode,
    plan: DirectPlan,
    fallback: Callable[..., Any] | None = None,
) -> Fused:
    """The fused launch of ``entry`` for calls of ``kernel`` that pass ``check``: its C form
    where that can be had, else the generated Python function. ``fallback``, the site's
    call: the C form then also takes the whole call, ``(kernel, args, kwargs, bind, key,
    lazy)``, and hands a call it turns down to ``fallback`` (see :func:`takes_whole_call`)."""
    if knobs.native_launch() and plan.hooked_code == NATIVE_HOOKED_CODE and check.arg_checks:
        fused_type = native.fused_type()
        if fused_type is not None:
            return make_native_fused(fused_type, kernel, entry, check, plan, fallback)
    return make_python_fused(kernel, entry, check, plan)


def takes_whole_call(fused: Fused | None) -> bool:
    """Whether ``fused`` is a C form built with a fallback: the site's call itself."""
    return getattr(fused, "takes_whole_call", False) is True


def make_native_fused(
    fused_type: Any,
    kernel: Any,
    entry: Entry,
    check: RepeatCheckCode,
    plan: DirectPlan,
    fallback: Callable[..., Any] | None = None,
) -> Fused:
    """The C form (``native_fused.c``) of :func:`make_python_fused`."""
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


def make_python_fused(kernel: Any, entry: Entry, check: RepeatCheckCode, plan: DirectPlan) -> Fused:
    """The fused launch of ``entry`` as a generated Python function."""
    # Tensors go to the launcher as the addresses the check read (see the module docstring).
    as_address = (
        set(check.tensor_positions) if plan.int_pointers and check.reads_pointers else set()
    )
    kernel_args = [
        *(f"p{i}" if i in as_address else f"a{i}" for i in range(check.arity)),
        *(f"T{i}" for i in range(len(plan.tail))),
    ]
    launch_args = ", ".join(
        [
            "get_stream(DEVICE)",
            *(f"M{i}" for i in range(len(plan.middle))),
            *(
                ["(" + "".join(f"{a}, " for a in kernel_args) + ")"]
                if plan.packs_args
                else kernel_args
            ),
        ]
    )
    pointers = "".join(f"    {line}\n" for line in check.pointers)
    env: dict[str, Any] = dict(check.env)
    env.update(
        KERNEL=kernel,
        CONFIG=entry.config,
        RESULT=entry.result,
        entry=entry,
        LAUNCH=entry.launcher,
        DYN0=plan.dyn0,  # the plan's own copy
        rt=plan.runtime,
        run=plan.run,
        DEVICE=plan.device,
        get_device=plan.get_device,
        get_stream=plan.get_stream,
    )
    env.update({f"M{i}": v for i, v in enumerate(plan.middle)})
    env.update({f"T{i}": v for i, v in enumerate(plan.tail)})
    body = (
        "def fused(kernel, args, kwargs, bind):\n"
        f"    if kernel is not KERNEL or len(args) != {check.arity} or {check.kwargs_mismatch}:\n"
        "        return None\n"
        f"    {check.names} = args\n"
        f"    if not {check.layout}:\n"
        "        return None\n"
        f"{pointers}"
        f"    if not ({check.test}):\n"
        "        return None\n"
        "    holes, dyn, grid = bind(CONFIG)\n"
        "    if holes:\n"
        "        return None\n"
        "    entry.used = True\n"
        "    try:\n"
        f"        direct = dyn == DYN0 and not {plan.hooked_code.format(rt='rt')}\n"
        "    except AttributeError:  # a hook assigned in place of Triton's chain\n"
        "        direct = False\n"
        "    if not direct or get_device() != DEVICE:\n"
        "        LAUNCH(grid, args, kwargs, dyn, holes)\n"
        "        return RESULT\n"
        "    n = len(grid)\n"
        "    if n == 1:\n"
        f"        run(grid[0], 1, 1, {launch_args})\n"
        "    elif n == 2:\n"
        f"        run(grid[0], grid[1], 1, {launch_args})\n"
        "    else:\n"
        f"        run(grid[0], grid[1], grid[2], {launch_args})\n"
        "    return RESULT\n"
    )
    exec(compile(body, f"<tunedsl fused launch of {entry.config!r}>", "exec"), env)
    return env["fused"]  # type: ignore[no-any-return]


def fuse_entry(
    kernel: Any,
    entry: Entry,
    code: RepeatCheckCode,
    args: Sequence[Any],
    static_kwargs: Mapping[str, Any],
    fallback: Callable[..., Any],
) -> Fused | None:
    """The fused launch of ``entry`` (``runtime/fused.py``) where its launcher launches
    directly and the entry needs nothing per call beyond the launch (zeroing, holes)."""
    plan_of = getattr(entry.launcher_object, "plan", None)
    if plan_of is None or entry.zeroing or any(a is HOLE for a in args) or not knobs.fused_launch():
        return None
    plan = plan_of(static_kwargs)
    return None if plan is None else make_fused(kernel, entry, code, plan, fallback)
