"""Dynamo's private hooks (checked on PyTorch 2.11, 2.12 and 2.13): what
``backends/torch_compile.py`` traces a site with (``comptime``, a callback Dynamo runs while
it traces; a traced variable's real object and an identity guard on it), and the graph break
with a message that ``backends/torch_ops.py`` puts before ``autotune_launch``."""

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


def run_eagerly(code: Any) -> None:
    """Dynamo never compiles a frame of ``code`` nor any frame it calls: they run as written
    (``set_code_exec_strategy`` with ``SKIP`` for the frame and its callees; no cost outside
    compiled code). Without that hook (an older PyTorch) nothing changes."""
    from torch._C._dynamo import eval_frame

    from_torch = getattr(eval_frame, "set_code_exec_strategy", None)
    action = getattr(eval_frame, "_FrameAction", None)
    strategy = getattr(eval_frame, "_FrameExecStrategy", None)
    if from_torch is None or action is None or strategy is None:
        return
    from_torch(code, strategy(action.SKIP, action.SKIP))


def graph_break(message: str) -> None:
    """``torch._dynamo.graph_break(msg=)``: inside a trace, break the graph here; with
    ``fullgraph=True`` the break is an error that shows ``message`` (PyTorch 2.11 to 2.13).
    Outside a trace it does nothing."""
    import torch

    torch._dynamo.graph_break(msg=message)
