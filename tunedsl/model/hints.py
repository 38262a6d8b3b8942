"""Launch hints: which configuration fields become Triton launch options, and how.

``num_warps``, ``num_stages``, ``num_ctas`` and ``maxnreg`` pass through unchanged.
``occupancy=k`` (cuTile's hint: "k blocks of this kernel should fit on one SM") has no
Triton option, so it is translated per target:

- NVIDIA: a register cap. ``k`` blocks of ``num_warps`` warps hold ``k * num_warps * 32``
  threads, which share the SM's register file, so each thread may use at most
  ``regs_per_sm // (k * num_warps * 32)`` registers, rounded *down* to the allocation
  granularity (8) and capped at 255 (the ISA limit). That becomes ``maxnreg`` (or lowers
  an explicit ``maxnreg``). If the threads alone do not fit (``k * num_warps * 32 >
  max_threads_per_sm``) or the cap is below 16 registers, the configuration is infeasible.
- AMD: ``waves_per_eu=k`` (the same intent, in the AMD backend's own option).
- The interpreter: recorded in the configuration, no effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.options import HINT_NAMES, hint_value_problem

HINTS = frozenset(HINT_NAMES)
REG_ALLOC_GRANULARITY = 8
MAX_REGS_PER_THREAD = 255
MIN_REGS_PER_THREAD = 16
DEFAULT_NUM_WARPS = 4  # Triton's default when a configuration names none


class InfeasibleConfig(UsageError):
    """A configuration whose hints cannot be met on this target (dropped with its reason)."""


@dataclass(frozen=True)
class TargetFacts:
    """What hint translation needs to know about the device."""

    backend: str  # "cuda", "hip" or "interpreter"
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    warp_size: int = 32


INTERPRETER = TargetFacts("interpreter")


def occupancy_register_cap(
    occupancy: int, num_warps: int, regs_per_sm: int, max_threads_per_sm: int, warp_size: int = 32
) -> int:
    """Registers per thread so that ``occupancy`` blocks of ``num_warps`` warps fit on one SM.

    >>> occupancy_register_cap(2, 4, 65536, 2048)   # 65536 / (2*4*32) = 256 -> 255
    255
    >>> occupancy_register_cap(4, 8, 65536, 2048)   # 65536 / 1024 = 64
    64
    >>> occupancy_register_cap(3, 4, 65536, 2048)   # 170.67 -> 168 (multiple of 8)
    168
    """
    if not isinstance(occupancy, int) or isinstance(occupancy, bool) or occupancy < 1:
        raise InfeasibleConfig(f"occupancy={occupancy!r} must be a positive integer")
    threads = occupancy * num_warps * warp_size
    if threads > max_threads_per_sm:
        raise InfeasibleConfig(
            f"occupancy={occupancy} with num_warps={num_warps} needs {threads} threads per SM; "
            f"the device has {max_threads_per_sm}"
        )
    cap = regs_per_sm // threads
    cap -= cap % REG_ALLOC_GRANULARITY
    cap = min(cap, MAX_REGS_PER_THREAD)
    if cap < MIN_REGS_PER_THREAD:
        raise InfeasibleConfig(
            f"occupancy={occupancy} with num_warps={num_warps} leaves {cap} registers per "
            f"thread (minimum {MIN_REGS_PER_THREAD})"
        )
    return cap


def hint_fields(config: Config, static_hints: Mapping[str, Any]) -> dict[str, Any]:
    """The hints that apply to ``config``: the site's static hints, overridden by the space's."""
    merged = {k: v for k, v in static_hints.items() if v is not None}
    for name in HINT_NAMES:
        if name in config:
            value = config[name]
            if value is not None:
                merged[name] = value
    for name, value in merged.items():
        if name not in HINTS:
            raise UsageError(f"unknown launch hint {name!r}; hints are {', '.join(HINT_NAMES)}")
        problem = hint_value_problem(name, value, value is static_hints.get(name))
        if problem is not None:
            raise UsageError(problem)
    return merged


def launch_options(
    config: Config, static_hints: Mapping[str, Any], target: TargetFacts
) -> dict[str, Any]:
    """Triton launch options for ``config`` on ``target`` (raises InfeasibleConfig)."""
    hints = hint_fields(config, static_hints)
    occupancy = hints.pop("occupancy", None)
    if target.backend == "interpreter":
        # The interpreter drops launch options before it runs the kernel, but a
        # @triton.heuristics wrapper reads them first (args["num_warps"]), as on a GPU.
        return hints
    if occupancy is not None:
        if target.backend == "hip":
            hints["waves_per_eu"] = occupancy
        else:
            cap = occupancy_register_cap(
                occupancy,
                hints.get("num_warps", DEFAULT_NUM_WARPS),
                target.regs_per_sm,
                target.max_threads_per_sm,
                target.warp_size,
            )
            hints["maxnreg"] = min(cap, hints.get("maxnreg", cap))
    return hints


def hint_parameter_fix(kernel: str, name: str) -> str:
    """The fix for a kernel parameter named like a launch hint that the space tunes
    (tutorial 02's ``num_stages: tl.constexpr``), which no space field can reach."""
    field = name.removeprefix("num_") if name.startswith("num_") else f"{name}_value"
    return (
        f"{kernel} takes a parameter `{name}`, and Triton gives a launch's `{name}=` to it "
        f"and to the compiler alike: name the space's field otherwise and pass it in the "
        f"launch, `{field}=[...]` in space= and `{name}=${field}` "
        f"(`{name}=cfg.{field}` in kwargs= of autotune_launch)"
    )


def missing_fix(kernel: str, missing: Sequence[str], space_hints: Sequence[str]) -> str:
    """The fix for kernel parameters a launch leaves out: pass them, or for one named like a
    hint of the space, :func:`hint_parameter_fix` (passing it would set the hint twice)."""
    hinted = [hint_parameter_fix(kernel, p) for p in missing if p in space_hints]
    return hinted[0] if hinted else f"pass {'them' if len(missing) > 1 else 'it'} in the launch"


def check_hint_twice(
    kwargs: Mapping[str, Any],
    config: Config,
    static_hints: Mapping[str, Any],
    label: str,
    params: Sequence[str] = (),
    kernel: str = "the kernel",
) -> None:
    """A launch hint passed in the launch (``num_warps=8``) and set by the space or a static
    hint too: Triton's GPU launch fails every configuration on the name given twice, and the
    interpreter, which runs the kernel without them, would tune values that never apply.
    A kernel parameter of that name (``params``) gets :func:`hint_parameter_fix`."""
    for name in HINT_NAMES:
        if name not in kwargs:
            continue
        if name in config:
            where = f"by the space's field `{name}`"
        elif static_hints.get(name) is not None:
            where = f"as a static hint `{name}={static_hints[name]!r}` of autotune(...)"
        else:
            continue
        fix = (
            hint_parameter_fix(kernel, name)
            if name in params and name in config
            else "give it in one place (a field of space= to tune it, a keyword of "
            "autotune(...) to fix it)"
        )
        raise UsageError(f"{label}: `{name}=` is given in the launch and {where}: {fix}")
