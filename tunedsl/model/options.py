"""Names the macro accepts: launch hints and tuning options (pure data, shared with the front end)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

# Space fields or macro keywords with these names are launch options, never kernel arguments.
HINT_NAMES: tuple[str, ...] = ("num_warps", "num_stages", "num_ctas", "maxnreg", "occupancy")

# Tuning options accepted as macro keywords and by autotune_launch.
OPTION_NAMES: tuple[str, ...] = (
    "restore_value",
    "reset_to_zero",
    "prune",
    "verify",
    "rtol",
    "atol",
    "pre_hook",
    "post_hook",
    "default",
    "mode",
    "effort",
    "name",
    "isolate",
    "timing",
    "capture",
    "search",
    "seed",
    "budget",
)

# triton.autotune's keywords that tunedsl spells otherwise: the error for one names the
# counterpart instead of a near miss among tunedsl's keywords.
TRITON_COUNTERPARTS: dict[str, str] = {
    "configs": "space=",
    "prune_configs_by": "prune= (a function of the configurations and the arguments)",
    "warmup": "effort= or budget= (tunedsl sizes its own measurements)",
    "rep": "effort= or budget= (tunedsl sizes its own measurements)",
    "do_bench": "timing= (tunedsl times with its own timer; it takes no do_bench)",
    "use_cuda_graph": 'timing="graph"',
    "cache_results": "none needed: decisions are always stored",
}


# `grid=` is how a Triton launch (and autotune_launch) names what the macro calls blocks=.
GRID_HINT = (
    "the grid is `blocks=` in autotune(...), written with configuration fields: "
    "blocks=cdiv(n, $tile) (`grid=` is autotune_launch's keyword)"
)


# Options of Triton's AMD backend that its configurations carry (``triton.Config({...,
# "waves_per_eu": 2})``): keywords of the kernel's launch on AMD, never tunedsl's hints.
AMD_OPTION_NAMES: tuple[str, ...] = (
    "waves_per_eu",
    "matrix_instr_nonkdim",
    "kpack",
    "schedule_hint",
)


def amd_option_note(name: str) -> str:
    """Where an option of Triton's AMD backend goes: the kernel's launch, on AMD only."""
    note = (
        f"`{name}=` is an option of Triton's AMD (hip) backend, not a launch hint: pass it "
        f"with the kernel's arguments (`kernel(..., {name}=2)` inside autotune(...), or in "
        "autotune_launch's kwargs=), which compiles only for AMD"
    )
    if name == "waves_per_eu":
        note += "; occupancy=k is tunedsl's hint for every target (waves_per_eu=k on AMD)"
    return note


def backend_option_note(name: str, owner: str) -> str:
    """Where an option that only Triton's ``owner`` backend (``"hip"``, ``"cuda"``) takes
    goes: a launch compiled for that backend only."""
    if owner == "hip":
        return amd_option_note(name)
    note = (
        f"`{name}=` is an option of Triton's NVIDIA (cuda) backend only: leave it out where "
        "the kernel is compiled for AMD"
    )
    if name == "maxnreg":
        note += "; occupancy=k is tunedsl's hint for every target (a register cap on NVIDIA)"
    return note


def triton_counterpart(name: str) -> str | None:
    """For a keyword of ``triton.autotune`` or an option of Triton's AMD backend, what to
    write instead; else None."""
    if name in AMD_OPTION_NAMES:
        return amd_option_note(name)
    instead = TRITON_COUNTERPARTS.get(name)
    return f"`{name}=` is triton.autotune's; in tunedsl: {instead}" if instead else None


# Values of the measurement options (docs/runtime.md, docs/pytorch.md).
TIMING_MODES: tuple[str, ...] = ("auto", "graph", "events")
CAPTURE_MODES: tuple[str, ...] = ("raise", "default")
MODES: tuple[str, ...] = ("on", "cached", "off")

# Keywords with a structural meaning in the macro.
STRUCTURAL_NAMES: tuple[str, ...] = ("space", "blocks", "key")

MACRO_KEYWORDS: tuple[str, ...] = STRUCTURAL_NAMES + HINT_NAMES + OPTION_NAMES


def did_you_mean(name: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` that ``name`` most likely misspells (``num_warp``:
    ``num_warps``; ``Bn``: ``BN``, the same but for case), or None when none is close."""
    choices = list(choices)
    same = [c for c in choices if c.lower() == name.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(name, choices, n=1)
    return close[0] if close else None


def unknown_field(name: str, fields: Sequence[str]) -> tuple[str, str]:
    """The message and hint for a ``$name`` that no field of the space has: the front end's
    for a literal space, and the first call's for a computed one (the same words)."""
    close = did_you_mean(name, fields)
    if close:
        hint = f"did you mean `${close}`?"
    elif fields:
        hint = "the fields of space= are: " + ", ".join(f"`{f}`" for f in fields)
    else:
        hint = "space= defines no fields"
    return f"`${name}` is not a field of `space=`", hint


def hint_value_problem(name: str, value: object, static: bool) -> str | None:
    """What is wrong with ``value`` for the launch hint ``name`` (``static``: given as the
    macro's keyword, one value for every configuration), or None. The runtime raises it, and
    the front end names a literal static hint with it when the module is compiled."""
    if static and isinstance(value, (list, tuple, range)):
        return (
            f"launch hint {name}={value!r} is a static hint, one value for every "
            f"configuration: to tune it, make it a field of space= "
            f"(space=dict(..., {name}={value!r}))"
        )
    # Triton compiles num_stages=0 (pipelining nothing, as 1 does): HIP configurations
    # are written with it.
    least = 0 if name == "num_stages" else 1
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        need = "an integer >= 0" if least == 0 else "a positive integer"
        return f"launch hint {name}={value!r} must be {need}"
    if name == "num_warps" and value & (value - 1):
        return (
            f"launch hint num_warps={value} must be a power of 2 (1, 2, 4, 8, 16, 32): "
            "Triton compiles no other"
        )
    return None


def option_choice_problem(option: str, value: object) -> str | None:
    """What is wrong with ``value`` for an option that names one of a few choices (``mode``,
    ``effort``, ``timing``, ``capture``, ``search``), or None. The runtime raises it, and the
    front end names a literal one with it when the module is compiled."""
    from tunedsl import knobs

    choices = {
        "mode": MODES,
        "effort": knobs.EFFORT_NAMES,
        "timing": TIMING_MODES,
        "capture": CAPTURE_MODES,
        "search": knobs.SEARCH_STRATEGIES,
    }.get(option)
    if choices is None or value in choices:
        return None
    return f"{option}={value!r}; expected one of {', '.join(choices)}"
