"""Dynamo's private hooks that ``backends/torch_compile.py`` traces a site with (checked on
PyTorch 2.11, 2.12 and 2.13): ``comptime`` (a callback Dynamo runs while it traces), a
traced variable's real object, and an identity guard on it."""

from __future__ import annotations

from typing import Any


def comptime() -> Any:
    """``torch._dynamo.comptime.comptime``: ``comptime(fn)`` inside a traced function runs
    ``fn(ctx)`` while Dynamo traces it."""
    from torch._dynamo.comptime import comptime as run_while_tracing

    return run_while_tracing


def traced_object(var: Any) -> Any:
    """The Python object a traced variable (``ctx.get_local(name)`` of a comptime callback)
    stands for, with a guard on its identity: compiled code is used only with that object."""
    from torch._dynamo.guards import GuardBuilder, install_guard

    vt = var._i_will_not_complain_if_bc_breaks_VariableTracker().realize()
    if type(vt).__name__ == "TritonKernelVariable":  # a @triton.jit or autotuned kernel
        value = vt.kernel
    elif hasattr(vt, "value"):  # a site, a C fused launch, an interpreted kernel
        value = vt.value
    else:
        value = var.as_python_constant()  # a plain function (a mistake the call reports)
    if vt.source is not None:
        install_guard(vt.source.make_guard(GuardBuilder.ID_MATCH))
    return value
