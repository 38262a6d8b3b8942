"""Does each configuration launch what it names? (runtime layer, pure Python.)

Two mistakes let one configuration time a different kernel, or none, while its record says
otherwise, and both pass the launch's binding checks:

- a grid with a zero dimension (``blocks=n // $tile`` with ``n < tile``) launches no
  program: it does no work, so it would be timed fastest and chosen, and every later call
  of the key would leave its outputs unwritten;
- a space field named like a kernel parameter that the launch gives a fixed value
  (``TILE=64`` where ``TILE=$TILE`` was meant): every configuration then runs the same
  kernel while ``blocks=`` follows the field, so the configuration chosen covers another
  tile than the kernel's.

Both are found on the variants of a call once they are bound (the launch as it would run),
so the DSL and ``autotune_launch`` are checked alike. Binding itself may fail under one
configuration (``cdiv(n, $tile)`` with ``tile=0``): ``note_bind_failed`` names it, and
``from_expression`` makes its traceback end at the user's expression, as for other mistakes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.keys import is_tensor
from tunedsl.model.options import HINT_NAMES
from tunedsl.model.variant import Variant
from tunedsl.runtime import mistakes
from tunedsl.warn import warn_once

NO_PROGRAM = (
    "its grid {grid} has a zero dimension: it launches no program, while other "
    "configurations of this call do"
)


def drop_empty_grids(
    variants: Sequence[Variant], label: str
) -> tuple[list[Variant], dict[Config, str]]:
    """The variants that launch at least one program, and why each other one is left out.
    Left out only when some variant of the call does launch: a call whose every grid is
    empty (an empty tensor) launches nothing whatever is chosen."""
    empty = [v for v in variants if 0 in v.grid]
    if not empty or len(empty) == len(variants):
        return list(variants), {}
    kept = [v for v in variants if 0 not in v.grid]
    dropped = {v.config: NO_PROGRAM.format(grid=v.grid) for v in empty}
    first = empty[0]
    warn_once(
        f"empty-grid:{label}",
        f"{label}: {first.config} gives blocks= a grid of {first.grid}, which launches no "
        f"program, while {kept[0].config} launches {kept[0].grid}; a configuration that does "
        "no work would be timed fastest, so it is left out. A grid rounded down "
        "(`n // $tile`) also skips the last partial block: round it up, "
        "blocks=cdiv(n, $tile)",
        UserWarning,
        stacklevel="user",
    )
    return kept, dropped


def launches_nothing(
    variants_for: Callable[[Sequence[Config] | None], tuple[list[Variant], Any]],
    candidates: Sequence[Config],
) -> bool:
    """Whether the call's grid is empty under every candidate (an empty tensor with
    ``blocks=cdiv(n, $tile)``): whatever is chosen launches no program, so a tune would
    time launches that do nothing, and its pick, noise, would decide every size of the
    key's ``key=`` bucket. The first candidate is bound first, the rest only when its grid
    is empty (or it cannot run here)."""
    first, _ = variants_for(candidates[:1])
    if first and 0 not in first[0].grid:
        return False  # (a first candidate infeasible here tells nothing: all are bound)
    every, _ = variants_for(None)
    return bool(every) and all(0 in v.grid for v in every)


def check_fields_read(site: Any, bind: Any, candidates: Sequence[Config], large: bool) -> None:
    """Every field of ``candidates`` is read by the launch or is a launch hint
    (``mistakes.check_fields_read``), asked of ``site`` (``miss.SiteView``) on a new key and
    by precompile. A lazy space (``large``) is not listed: its fields are not probed. The
    same candidates (no prune=, literal settings) are probed once: each call binds them the
    same way."""
    if large or candidates is site.fields_checked:
        return
    placeholders = {name for name, _, _ in site.placeholders}
    mistakes.check_fields_read(bind, candidates, placeholders, site.label)
    site.fields_checked = candidates


def check_fields_passed(variants: Sequence[Variant], arg_names: Sequence[str], label: str) -> None:
    """A space field of several values named like a kernel parameter must reach that
    parameter: a launch that passes the same value under every configuration runs one
    kernel for all of them (``TILE=64`` for ``TILE=$TILE``). A field spelled like the
    parameter but for case (``tile`` for ``TILE``, as the docs write them) counts when it is
    the only such parameter and the field reaches no argument of the kernel at all."""
    if len(variants) < 2:
        return
    index = {name: i for i, name in enumerate(arg_names)}
    folded: dict[str, list[str]] = {}
    for name in arg_names:
        folded.setdefault(name.casefold(), []).append(name)
    fields = {name for v in variants for name in v.config}
    for field in sorted(fields - set(HINT_NAMES)):
        if field in index:
            param = field
        else:
            alike = folded.get(field.casefold(), [])
            if len(alike) != 1 or _reaches_kernel(variants, field):
                continue
            param = alike[0]
        values = {_plain(v.config[field]) for v in variants if field in v.config}
        passed = {_plain(_passed(v, param, index[param])) for v in variants}
        if len(values) < 2 or len(passed) != 1:
            continue
        (value,) = passed
        if value is _MISSING or (isinstance(value, tuple) and value[0] is _TENSOR):
            continue
        raise UsageError(
            f"{label}: space field `{field}` takes {len(values)} values, but the launch passes "
            f"`{param}={value[1]!r}` to the kernel's parameter `{param}` under every "
            "configuration, so each configuration would run the same kernel (while blocks= "
            f"follows the field); pass the field: `{param}=${field}` in the launch "
            f"(autotune_launch: kwargs=lambda cfg: {{{param!r}: cfg.{field}}}), or rename the "
            "field if the kernel should not get it"
        )


def warn_grid_only(
    variants: Sequence[Variant], reads_program_count: Callable[[], bool], label: str
) -> None:
    """A space field that changes the grid and nothing the kernel receives (``bs`` in
    ``blocks=cdiv(n, $bs)`` with ``BLOCK=128`` fixed) runs one kernel on more or fewer
    programs; unless the kernel reads ``tl.num_programs`` (a persistent kernel, whose work
    per program follows the grid), a grid smaller than its work leaves outputs unwritten and
    is timed fastest. A warning, not an error: a kernel may share out its work otherwise
    (an atomic work queue)."""
    if len(variants) < 2:
        return
    fields = sorted({name for v in variants for name in v.config} - set(HINT_NAMES))
    for field in fields:
        values = {_plain(v.config[field]) for v in variants if field in v.config}
        if len(values) < 2 or _reaches_kernel(variants, field):
            continue
        # Configurations alike but for this field, on other grids (another field, BLOCK in
        # blocks=cdiv(n, $BLOCK), moves the grid too: its effect is not this field's).
        alike: dict[Any, dict[Any, Variant]] = {}
        for v in variants:
            if field in v.config:
                rest = tuple((k, _plain(x)) for k, x in sorted(v.config.as_dict().items()))
                rest = tuple(item for item in rest if item[0] != field)
                alike.setdefault(rest, {}).setdefault(v.grid, v)
        pair = next((list(g.values())[:2] for g in alike.values() if len(g) > 1), None)
        if pair is None or reads_program_count():
            continue
        a, b = pair
        warn_once(
            f"grid-only:{label}:{field}",
            f"{label}: space field `{field}` changes only the grid: every configuration "
            f"launches the same kernel with the same arguments ({a.config} on a grid of "
            f"{a.grid}, {b.config} on {b.grid}), and the kernel never reads tl.num_programs, "
            "so a grid smaller than its work leaves part of the output unwritten, and is "
            "timed fastest; pass the field to the kernel parameter whose tiles the grid "
            "counts, or leave it out of space=",
            UserWarning,
            stacklevel="user",
        )
        return


def _reaches_kernel(variants: Sequence[Variant], field: str) -> bool:
    """Whether ``field`` changes what the kernel receives: two configurations that differ in
    it alone bind other arguments. Where no two differ in it alone (a list space), whether
    any two configurations bind other arguments at all."""
    bound: dict[Any, dict[Any, set[Any]]] = {}
    every: set[Any] = set()
    for v in variants:
        if field not in v.config:
            continue
        rest = frozenset((k, _plain(v.config[k])) for k in v.config if k != field)
        arguments = (
            tuple(_plain(a) for a in v.args),
            frozenset((k, _plain(a)) for k, a in v.kwargs.items()),
        )
        bound.setdefault(rest, {}).setdefault(_plain(v.config[field]), set()).add(arguments)
        every.add(arguments)
    pairs = [by_value for by_value in bound.values() if len(by_value) > 1]
    if not pairs:
        return len(every) > 1
    return any(len(set().union(*by_value.values())) > 1 for by_value in pairs)


_MISSING = object()
_TENSOR = object()


def _passed(variant: Variant, name: str, position: int) -> Any:
    if name in variant.kwargs:
        return variant.kwargs[name]
    if position < len(variant.args):
        return variant.args[position]
    return _MISSING


def _plain(value: Any) -> Any:
    """A hashable stand-in that tells ``1``, ``1.0`` and ``True`` apart."""
    if value is _MISSING:
        return value
    if is_tensor(value):
        return (_TENSOR, id(value))
    try:
        hash(value)
    except TypeError:
        return (type(value), repr(value))
    return (type(value), value)


def note_bind_failed(err: Exception, config: Config, label: str) -> None:
    """Name the site and the configuration on an error that ``blocks=`` or a launch argument
    raised under it (``cdiv(n, $tile)`` with ``tile=0``): the traceback shows the user's
    expression, but not which configuration of the space it was evaluated for."""
    if isinstance(err, UsageError) or not hasattr(err, "add_note"):  # add_note: Python 3.11+
        return
    err.add_note(
        f"{label}: raised by blocks= or the launch's arguments under {config}; fix that "
        "expression, or leave such configurations out of space= (a Space constraint= or "
        "prune=)"
    )


#: Set on an exception that the site's own expressions raised (``from_expression``): its
#: traceback holds the user's frames only, and ``tunedsl run`` prints it so.
USER_EXPRESSION = "__tunedsl_user_expression__"


def from_expression(err: BaseException, filename: str) -> BaseException | None:
    """``err`` without tunedsl's frames when the site's own expressions in ``filename``
    raised it (``blocks=``, an argument written with ``$``, a non-literal ``space=`` or
    option: the first frame below tunedsl's is one of the site's file); None otherwise (a
    fault of tunedsl's keeps its frames)."""
    from tunedsl.runtime.mistakes import is_own_file, user_frames_only

    tb, below_own = err.__traceback__, False
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if is_own_file(name):
            below_own = True
        elif below_own:
            if name != filename:
                return None
            break
        tb = tb.tb_next
    if tb is None:
        return None
    try:
        setattr(err, USER_EXPRESSION, True)
    except AttributeError:  # an exception class without a __dict__: frames trimmed all the same
        pass
    return user_frames_only(err)
