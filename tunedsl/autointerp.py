"""A CPU that just works: turn Triton's interpreter on when no GPU driver is present.

Triton picks its backend when it first needs a driver: each installed backend's
``is_active()`` is asked, and with none active every launch fails with "0 active drivers".
The NVIDIA backend is active when ``libcuda.so.1`` loads, ``cuInit(0)`` succeeds and a device
is visible; the AMD backend when torch sees a HIP device. Neither can succeed without the
driver's device nodes (``/dev/nvidia*``, WSL's ``/dev/dxg``, ROCm's ``/dev/kfd``), so their
absence is a cheap and safe sign of "no GPU": no torch or triton import, and no ``cuInit``
(which is not fork-safe) in the user's process. ``CUDA_VISIBLE_DEVICES=""`` (or ``-1``) hides
every NVIDIA device and counts as none too.

``tunedsl run``, the import hook (``import tunedsl.activate``) and ``%load_ext tunedsl`` call
``enable_if_no_gpu()`` before any kernel code runs: with no driver it sets
``TRITON_INTERPRET=1`` (Triton reads it when it is imported) and says so once on stderr. It
leaves an explicit ``TRITON_INTERPRET`` alone, and ``TUNEDSL_NO_AUTO_INTERPRET=1`` turns it
off; ``TUNEDSL_QUIET=1`` silences the notice. When Triton is already imported the switch would come
too late: a warning then says exactly what to do instead.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from collections.abc import Iterator

from tunedsl import knobs

_announced = False
_left_alone = 0  # depth of left_alone(): callers that decide about the interpreter themselves


def gpu_driver_present() -> bool:
    """Whether a GPU driver Triton could use is present (device nodes and visible devices)."""
    nvidia = bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/dxg")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if nvidia and visible is not None and visible.strip() in ("", "-1"):
        nvidia = False  # every NVIDIA device hidden: Triton counts none
    amd = os.path.exists("/dev/kfd")
    return nvidia or amd


def too_late_message() -> str:
    """What to do when Triton was imported before the interpreter could be turned on."""
    return (
        "no GPU driver found and Triton is already imported without its interpreter, so "
        "kernels will fail with '0 active drivers'. Set TRITON_INTERPRET=1 before Python "
        "starts (`TRITON_INTERPRET=1 python script.py`), or run the script with `tunedsl "
        "run`, or import tunedsl.activate / `%load_ext tunedsl` before importing triton "
        "or torch"
    )


def no_driver_message(reasons: list[str], kernel: object = None) -> str | None:
    """When every configuration failed with Triton's "0 active drivers": what to do."""
    if not reasons or not all("active drivers" in why for why in reasons):
        return None
    if knobs.triton_interpret_env() and _in_tritons_autotuner(kernel):
        # Triton's autotuner times its configurations with a GPU driver, interpreter or not.
        return (
            "the kernel is wrapped in @triton.autotune, which times its configurations on a "
            "GPU, even under Triton's interpreter; remove @triton.autotune and put its "
            "configurations in space= (tunedsl tunes them on the CPU too)"
        )
    found = "Triton found no GPU driver ('0 active drivers'). "
    # What kept tunedsl run and the import hook from turning the interpreter on: its advice
    # to use them would change nothing.
    if "TRITON_INTERPRET" in os.environ and not knobs.triton_interpret_env():
        value = os.environ["TRITON_INTERPRET"]
        return found + (
            f"TRITON_INTERPRET={value!r} is set and is not on (Triton takes 1, true, on, yes "
            "or y), and tunedsl never overrides it: set TRITON_INTERPRET=1 to run on the CPU"
        )
    if knobs.no_auto_interpret():
        return found + (
            "TUNEDSL_NO_AUTO_INTERPRET is set, so tunedsl run, the import hook and %load_ext "
            "leave Triton's interpreter off: unset it, or set TRITON_INTERPRET=1, to run on "
            "the CPU"
        )
    return found + (
        "To run on the CPU, turn Triton's "
        "interpreter on before Triton is imported: `TRITON_INTERPRET=1 python script.py`, or "
        "`tunedsl run script.py` (it does so by itself when no GPU driver is present), or "
        "`import tunedsl.activate` / `%load_ext tunedsl` before importing torch or triton"
    )


def _in_tritons_autotuner(kernel: object) -> bool:
    for _ in range(8):  # @triton.heuristics and @triton.autotune wrap the JIT function
        if type(kernel).__name__ == "Autotuner":
            return True
        kernel = getattr(kernel, "fn", None)
    return False


@contextlib.contextmanager
def left_alone() -> Iterator[None]:
    """Within: ``enable_if_no_gpu`` leaves Triton's interpreter as it is and says nothing.

    For ``tunedsl.precompile.precompile``, which imports scripts through the import hook but
    decides about the interpreter itself (it compiles, or cross-compiles for ``target=``,
    and launches nothing without a GPU): the hook must neither turn the interpreter on
    behind its back nor warn that kernels will fail, as the command's
    ``TUNEDSL_NO_AUTO_INTERPRET=1`` keeps it from doing."""
    global _left_alone
    _left_alone += 1
    try:
        yield
    finally:
        _left_alone -= 1


def enable_if_no_gpu(where: str, announce: bool = True) -> bool:
    """Turn the interpreter on when there is no GPU driver; True when it is (now) on.

    ``where`` names the caller in the one notice (``tunedsl run``, ``%load_ext tunedsl``);
    ``announce=False``: no notice (the caller runs no kernel, only judges as for the
    interpreter)."""
    global _announced
    if "TRITON_INTERPRET" in os.environ:
        return os.environ["TRITON_INTERPRET"].strip().lower() in ("1", "true", "yes", "on")
    if _left_alone or knobs.no_auto_interpret() or gpu_driver_present():
        return False
    if "triton" in sys.modules:
        if not _announced:
            _announced = True
            print(f"tunedsl: warning: {too_late_message()}", file=sys.stderr, flush=True)
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    if announce and not _announced and not knobs.quiet():  # a notice: TUNEDSL_QUIET hides it
        _announced = True
        print(
            f"tunedsl: no GPU driver found: {where} runs kernels through Triton's interpreter "
            "on the CPU (TRITON_INTERPRET=1; times are not GPU speeds; "
            "TUNEDSL_NO_AUTO_INTERPRET=1 turns this off)",
            file=sys.stderr,
            flush=True,
        )
    return True
