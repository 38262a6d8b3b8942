"""A call's tensors against the GPU Triton launches on (runtime layer).

Triton launches a kernel on the current device. A CUDA tensor argument on another GPU is
refused at launch with "Pointer argument (at 0) cannot be accessed from Triton (cpu
tensor?)": tuned in this process, every configuration fails with it; tuned in a worker
(``isolate=True``), the tuning succeeds there and the launch after it fails. A new key is
checked before anything is decided, so the error names the argument, the two devices and
the fix; a key already decided costs nothing more (its launch fails as Triton's does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunedsl.backends import triton as bt
from tunedsl.backends.arg_device import cuda_device_of
from tunedsl.errors import UsageError


def check_call_device(
    kernel: Any, args: Sequence[Any], static_kwargs: Mapping[str, Any], label: str
) -> None:
    """Raise ``UsageError`` when a CUDA tensor argument is not on the current device."""
    if bt.interpreting():
        return
    names = _arg_names(kernel)
    current: int | None = None
    positional = [(names[i] if i < len(names) else f"#{i}", v) for i, v in enumerate(args)]
    values = [*positional, *static_kwargs.items()]
    for name, value in values:
        # a tensor's device, a tensor descriptor's base tensor's, a tuple's first tensor's
        index = cuda_device_of((value,), {})
        if index is None:
            continue
        if current is None:
            current = bt.current_device_index()
        if index != current:
            kernel_name = getattr(kernel, "__name__", None) or "the kernel"
            raise UsageError(
                f"{label}: argument {name!r} of {kernel_name} is on cuda:{index} but the current "
                f"device is cuda:{current}, and Triton launches a kernel on the current device. "
                f"Fix: call it under `with torch.cuda.device({index}):` (or "
                f"`torch.cuda.set_device({index})`), or move the tensors to cuda:{current}"
            )


def _arg_names(kernel: object) -> tuple[str, ...]:
    try:
        return bt.kernel_info(kernel).arg_names
    except Exception:  # not a kernel the runtime can describe: positions name them
        return ()
