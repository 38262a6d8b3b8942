"""The plain-Python API: ``autotune_launch`` (runtime layer; ``LaunchResult`` is result.py).

``autotune_launch`` runs on the same ``Site`` machinery as the DSL macro; its site is
identified by the caller's code location (file, line) and cached, so calling it in a loop
tunes once per key and then takes the site's hot path (plus this function's own argument
handling). The text of the call's ``grid=``, ``args=``, ``kwargs=`` and ``key=``, read from
the caller's file when the site is made, is its launch text, in its records' digest as the
DSL's is.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.backends.torch_ops import break_graph_for_launch, keep_eager
from tunedsl.errors import UsageError
from tunedsl.model import identity
from tunedsl.model.config import Config
from tunedsl.model.keys import is_tensor
from tunedsl.runtime import launch_checks, verified
from tunedsl.runtime.result import LaunchResult

#: A space larger than ``LIST_LIMIT`` (``model/settings.py``) is sampled, this many points
#: spread over it, to learn which values a ``kwargs=`` function gives alike for every
#: configuration (``_fixed_names``); a smaller one is listed.
FIXED_PROBE = 256

# ((filename, line, name), whether key= is given) -> Site for autotune_launch call locations;
# a line with several calls (no name=) has one site per call: (filename, line, name, column).
# A line called with key= and without is two sites (one site id): a site keys every call as
# its first did, and a record's key must not depend on which call came first.
_sites: dict[tuple[tuple[Any, ...], bool], Any] = {}
# Lines holding several calls: (filename, line, name) -> {(code, instruction): column}.
_shared_lines: dict[tuple[str, int, Any], dict[tuple[Any, int], int]] = {}
# Per site, per list of names a kwargs= function returned: the space probed, and the names
# alike for every configuration of it. A call that returns other names (an optional tensor
# passed only sometimes), or passes another space, is probed again, so its tensors are
# keyed like the first call's.
_fixed_by_names: dict[
    tuple[tuple[Any, ...], bool], dict[tuple[str, ...], tuple[Any, tuple[str, ...]]]
] = {}
# Per site: the space and the configuration of it whose arguments key its calls (args= or
# kwargs= functions).
_key_configs: dict[Any, tuple[Any, Config]] = {}
# Per site: its static hints, and whether a call of it has succeeded (``_SiteHints``).
_site_hints: dict[tuple[tuple[Any, ...], bool], _SiteHints] = {}
# Per site: its first call's reset_to_zero= and check (``verified.check_of``: no check object
# kept); a call passing another makes the site read it on every call (runtime/verified.py).
_site_resets: dict[tuple[tuple[Any, ...], bool], tuple[Any, Any]] = {}
# Calls from code with no file: (id of the code, instruction) -> (the code, its place:
# (filename, line, None, col, digest)).
_statements: dict[tuple[int, int], tuple[Any, tuple[Any, ...]]] = {}
_sites_lock = threading.Lock()

CALLEE = "autotune_launch"
#: The arguments whose text is a call's launch (in its records' digest), in this order.
LAUNCH_ARGUMENTS = ("grid", "args", "kwargs", "key")


def _parse_dsl(source: str, filename: str) -> Any:
    """A module that uses the macro as well, parsed by the front end (Python cannot): a
    call's enclosing function names its site there as in any other file."""
    from tunedsl.frontend.compile import expand_to_ast

    return expand_to_ast(source, filename)


identity.use_dsl_parser(_parse_dsl)


def autotune_launch(
    kernel: Any,
    *,
    space: Any,
    grid: Any,
    args: Any = (),
    kwargs: Any = None,
    key: Any = None,
    restore_value: Sequence[str] | None = None,
    reset_to_zero: Sequence[str] | None = None,
    verify: Any = None,
    prune: Callable[..., Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    pre_hook: Callable[..., Any] | None = None,
    post_hook: Callable[..., Any] | None = None,
    default: Any = None,
    mode: str | None = None,
    effort: str | None = None,
    name: str | None = None,
    isolate: bool | None = None,
    timing: str | None = None,
    capture: str | None = None,
    search: str | None = None,
    seed: int | None = None,
    budget: float | None = None,
    **hints: Any,
) -> LaunchResult:
    """Launch ``kernel`` with the best configuration of ``space`` for these arguments.

    ``grid``, ``args`` and ``kwargs`` are values or functions of the configuration
    (``grid=lambda cfg: (cdiv(n, cfg.tile),)``). Extra keywords are static launch hints
    (``num_stages=3``). Space fields named like hints become launch options.
    """
    if "torch" in sys.modules:  # a torch.compile trace: an error under fullgraph=True
        break_graph_for_launch()
    frame = sys._getframe(1)
    where: tuple[Any, ...] = (frame.f_code.co_filename, frame.f_lineno, name)
    if name is None and where[0][:1] == "<" and not identity.is_ipython_cell(where[0]):
        where = _statement_place(frame, where)
    keyed = key is not None
    site = _sites.get((where, keyed))
    if site is None:
        where = _call_place(frame, where)
        site = _sites.get((where, keyed))
        if site is None:
            launch_checks.check_config_functions(where, grid=grid, args=args, kwargs=kwargs)
            launch_checks.check_static_hints(where, hints)
            site = _make_site(where, space, hints, name, keyed, frame)
    state = _site_hints.get((where, keyed))
    if state is None:  # unmade meanwhile by another thread's failed first call
        site = _make_site(where, space, hints, name, keyed, frame)
        state = _site_hints[where, keyed]
    if hints != state.hints:
        launch_checks.hints_changed(where, hints, state.hints)
    proven = state.proven
    if not proven:
        with _sites_lock:
            state.pending += 1
    try:
        if mode or effort or timing or capture or search:  # on hits too: a typo is named
            launch_checks.check_choices(
                where, mode=mode, effort=effort, timing=timing, capture=capture, search=search
            )
        if not site.space_computed and not _same_space(state.space, space):
            site.read_per_call("space", state.space)  # another space: each keyed by its own
        first = _site_resets.setdefault((where, keyed), (reset_to_zero, verified.check_of(verify)))
        if reset_to_zero != first[0]:
            site.read_per_call("reset")  # zero what each call names (runtime/call_reset.py)
        if not site.verify_computed and verified.check_of(verify) != first[1]:
            site.read_per_call("verify")  # check what each call asks for (runtime/verified.py)
        args_fn = args if callable(args) else None
        kwargs_fn = kwargs if callable(kwargs) else None
        grid_fn = grid if callable(grid) else None
        static_kwargs: dict[str, Any] = {}
        if kwargs_fn is None and kwargs:
            try:
                static_kwargs = dict(kwargs)
            except (TypeError, ValueError):
                raise launch_checks.option_error(
                    where, "kwargs", kwargs, "a dict of keyword arguments"
                ) from None
        if kwargs_fn is not None:
            # What a kwargs= function returns alike for every configuration (the same tensor
            # on every call, a number) enters the key and prune=, as positional arguments do;
            # the rest stays per configuration.
            once = dict(kwargs_fn(_key_config(site, space, default)))
            by_names = _fixed_by_names.setdefault((where, keyed), {})
            known = by_names.get(tuple(once))
            if known is None or not _same_space(known[0], space):
                # first call with these names or this space: which do not depend on the config
                names = _fixed_names(kwargs_fn, space, default, site, once)
                by_names[tuple(once)] = (space, names)
            else:
                names = known[1]
            static_kwargs = {k: once[k] for k in names}
        if args_fn is not None:
            # The key is computed from the arguments of the default configuration.
            positional = tuple(args_fn(_key_config(site, space, default)))
        elif isinstance(args, tuple):
            positional = args
        else:
            try:
                positional = tuple(args)
            except TypeError:
                raise launch_checks.option_error(
                    where, "args", args, "a tuple of the kernel's arguments"
                ) from None

        def bind(cfg: Config) -> tuple[Any, dict[str, Any], tuple[int, ...]]:
            holes: Any = ()
            if args_fn is not None:
                values = tuple(args_fn(cfg))
                # Arguments that do not depend on the configuration are no holes (and keep
                # the direct launch path open).
                if len(values) != len(positional) or any(
                    x is not y for x, y in zip(values, positional, strict=True)
                ):
                    holes = _replace_args(values)
            dyn = dict(kwargs_fn(cfg)) if kwargs_fn is not None else {}
            for k in static_kwargs:
                value = dyn.pop(k, static_kwargs[k])
                if not is_tensor(value) and not _same(value, static_kwargs[k]):
                    raise UsageError(
                        f"autotune_launch: kwargs= returned {k}={value!r} under {cfg} but "
                        f"{static_kwargs[k]!r} under every configuration sampled on the site's "
                        "first call (so the key and prune= took it for a value of the call); pass "
                        f"{k!r} through args= (a function of the configuration) instead"
                    )
                if not is_tensor(value):
                    continue
                if value is not static_kwargs[k]:
                    raise UsageError(
                        f"autotune_launch: kwargs= returned another tensor for {k!r} under {cfg}; "
                        "a tensor argument must not depend on the configuration"
                    )
            g = grid_fn(cfg) if grid_fn is not None else grid
            # Anything but an int or a sequence is left for the site to reject with a clear error.
            return holes, dyn, (g,) if isinstance(g, int) else tuple(g) if _is_seq(g) else g

        def lazy() -> tuple[Any, dict[str, Any], dict[str, Any]]:
            # Read only when the site resolves a new key, never per launch.
            options = {
                "restore_value": restore_value,
                "reset_to_zero": reset_to_zero,
                "verify": verify,
                "prune": prune,
                "rtol": rtol,
                "atol": atol,
                "pre_hook": pre_hook,
                "post_hook": post_hook,
                "default": default,
                "mode": mode,
                "effort": effort,
                "isolate": isolate,
                "timing": timing,
                "capture": capture,
                "search": search,
                "seed": seed,
                "budget": budget,
            }
            return space, {}, {k: v for k, v in options.items() if v is not None}

        result = site(kernel, positional, static_kwargs, bind, key, lazy)
    except BaseException as err:
        if not proven:
            _end_unproven_call(where, keyed, site, state)
        launch_checks.raise_field_of_others(err, where, space)  # a list space's field
        raise
    if not proven:
        with _sites_lock:
            state.proven, state.pending = True, state.pending - 1
    return result  # type: ignore[no-any-return]


class _SiteHints:
    """A site's static hints (those of the call that made it: a later call must pass the
    same), whether a call of it has succeeded, and until one has, its calls in flight."""

    __slots__ = ("hints", "pending", "proven", "space")

    def __init__(self, hints: Mapping[str, Any], space: Any) -> None:
        self.hints, self.proven, self.pending = dict(hints), False, 0
        self.space = space  # the first call's: a call giving another keys calls by space


def _end_unproven_call(where: tuple[Any, ...], keyed: bool, site: Any, state: _SiteHints) -> None:
    """A call of a site none of whose calls has succeeded failed (a ``triton.autotune``
    keyword, a hint Triton refuses, a mistake in an option): the last such call in flight
    unmakes the site, so the next call makes it again with its own hints (nor is the
    ``reset_to_zero=`` of a call that never ran kept)."""
    with _sites_lock:
        state.pending -= 1
        if state.proven or state.pending > 0 or _sites.get((where, keyed)) is not site:
            return
        del _sites[where, keyed]
        _site_hints.pop((where, keyed), None)
        _site_resets.pop((where, keyed), None)
        _fixed_by_names.pop((where, keyed), None)


# Under torch.compile, the call after its graph break runs as written (torch_ops.keep_eager).
keep_eager(autotune_launch.__code__)


def _fixed_names(
    kwargs_fn: Callable[[Config], Any], space: Any, default: Any, site: Any, once: dict[str, Any]
) -> tuple[str, ...]:
    """The names a kwargs= function gives the same value under every configuration: a
    tensor that is the same object on two calls, or a number (string, None) equal under
    every configuration of the space (of ``FIXED_PROBE`` spread over a larger one)."""
    import random

    from tunedsl.model.settings import LIST_LIMIT
    from tunedsl.model.space import search_space

    twice = dict(kwargs_fn(_key_config(site, space, default)))
    spec = search_space(space)
    if spec.size_hint() <= LIST_LIMIT:
        probe = list(spec.iter_valid())
    else:
        probe = spec.sample(random.Random(0), FIXED_PROBE)
    others = [dict(kwargs_fn(c)) for c in probe]
    return tuple(
        k
        for k, v in once.items()
        if (is_tensor(v) and twice.get(k) is v)
        or (_keyable(v) and all(k in d and _same(d[k], v) for d in others))
    )


def _keyable(value: Any) -> bool:
    """A value the key can hold as it is: hashable and not a tensor (a number, a string, a
    tuple of them, a Triton dtype, a @triton.jit function given as a constexpr)."""
    if is_tensor(value):
        return False
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if a.__class__ is not b.__class__ or not _keyable(a):
        return False
    try:
        return bool(a == b)
    except Exception:  # an == that does not give a truth value: not the same
        return False


def _replace_args(values: tuple[Any, ...]) -> Any:
    from tunedsl.model.hole import ReplaceArgs

    return ReplaceArgs(values)


def _is_seq(value: Any) -> bool:
    return isinstance(value, (tuple, list))


def _call_place(frame: Any, where: tuple[str, int, Any]) -> tuple[Any, ...]:
    """Where the site of this call is kept: ``where`` for a call alone on its line (or
    named by name=), else ``where`` and the call's column, each call its own site."""
    if len(where) > 3:
        return where  # a statement with no file: its column and code are in it already
    filename, line, name = where
    if name is not None:
        return where  # name= is the identity: calls of one name= are one site
    with _sites_lock:
        columns = _shared_lines.get(where)
        if columns is None:
            if identity.calls_on_line(filename, line, CALLEE) < 2:
                return where
            columns = _shared_lines[where] = {}
        at = (frame.f_code, frame.f_lasti)
        col = columns.get(at)
        if col is None:
            col = columns[at] = _column(frame, filename, line)
    return where if col < 0 else (*where, col)


def _statement_place(frame: Any, where: tuple[Any, ...]) -> tuple[Any, ...]:
    """Where the site of a call from code with no file (``<stdin>`` of ``python -i``, whose
    every statement is its line 1; ``exec`` of a string) is kept: its line, its column and a
    digest of the calling code, so each statement typed or cell run is its own site (and
    names its records), and the same statement in another session finds them."""
    code = frame.f_code
    at = (id(code), frame.f_lasti)  # a code object's hash walks its constants: ids are cheap
    known = _statements.get(at)
    if known is not None and known[0] is code:
        return known[1]
    filename, line, name = where
    col, digest = 0, identity.code_digest(code)
    positions = getattr(code, "co_positions", None)
    if positions is None:  # Python 3.10: the call's instruction tells calls on a line apart
        digest += f"@{frame.f_lasti}"
    else:
        for i, (_, _, start_col, _) in enumerate(positions()):
            if i == frame.f_lasti // 2:
                col = start_col or 0
                break
    place = (filename, line, name, col, digest)
    with _sites_lock:  # the code is kept with its place: its id is not reused meanwhile
        if len(_statements) >= 4096:  # code compiled afresh on every call: found again
            _statements.clear()
        _statements[at] = (code, place)
    return place


def _column(frame: Any, filename: str, line: int) -> int:
    """The column of the ``autotune_launch`` call ``frame`` is making (its identity
    declared), -1 where Python does not tell instruction positions (3.10)."""
    from tunedsl.warn import warn_once

    col = identity.declare_call(filename, line, _call_end(frame) or (-1, -1), CALLEE)
    if col < 0:
        warn_once(
            f"shared-line:{filename}:{line}",
            f"{filename}:{line}: this line holds several autotune_launch calls and Python "
            "does not tell them apart here, so they share one site (and its decisions); put "
            "each on its own line or give each its own name=",
            UserWarning,
            stacklevel="user",
        )
    return col


def _call_end(frame: Any) -> tuple[int, int] | None:
    """Where the call ``frame`` is making ends in its file (line, col), as Python's positions
    of the calling instruction say; None where Python does not tell them (3.10)."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is not None:
        for i, (_, end_line, _, end_col) in enumerate(positions()):
            if i == frame.f_lasti // 2:
                return None if end_line is None or end_col is None else (end_line, end_col)
    return None


def _launch_text(frame: Any, where: tuple[Any, ...]) -> str | None:
    """The text of the call's ``grid=``, ``args=``, ``kwargs=`` and ``key=`` (and a ``**``
    mapping), in that order, read from the caller's file as the DSL's launch text is
    (``frontend/launch_text.py``): in the record digest, so a call never takes a record
    measured on another call's launch. None where the file cannot be read (a statement with
    no file, whose code's digest names the site instead): the digest then holds no launch."""
    if len(where) > 4:
        return None
    found = identity.call_arguments(where[0], CALLEE, where[1], _call_end(frame))
    if found is None:
        return None
    from tunedsl.frontend.launch_text import text_of_spans

    source, arguments = found
    order = {name: i for i, name in enumerate(LAUNCH_ARGUMENTS)}
    parts = [
        (name, (line, col, end_line, end_col))
        for name, line, col, end_line, end_col in arguments
        if name in order or name == "**" or name.isdigit()
    ]
    parts.sort(key=lambda part: order.get(part[0], len(order)))  # as written after those
    return text_of_spans(source, where[0], parts)


def _key_config(site: Any, space: Any, default: Any) -> Config:
    """The configuration whose arguments key a call of ``site`` with ``args=fn``."""
    known = _key_configs.get(site)
    if known is not None and _same_space(known[0], space):
        return known[1]
    from tunedsl.model.settings import key_config

    cfg = key_config(space, default, site.label)
    _key_configs[site] = (space, cfg)
    return cfg


def _same_space(known: Any, space: Any) -> bool:
    """Whether ``space`` is the space ``known`` (the same object, or an equal one: a literal
    space is a new dict on every call)."""
    if known is space:
        return True
    try:
        return bool(known == space)
    except Exception:  # an == that gives no truth value: probed again
        return False


def _make_site(
    where: tuple[Any, ...],
    space: Any,
    hints: Mapping[str, Any],
    name: Any,
    has_key: bool,
    frame: Any,
) -> Any:
    from tunedsl.runtime import redefined
    from tunedsl.runtime.site import Site

    with _sites_lock:
        site = _sites.get((where, has_key))
        if site is None:
            filename, line = where[0], where[1]
            if len(where) > 4:  # no file to find the scope in: the code's digest names it
                scope = f"line {line} col {where[3]} code {where[4]}"
                identity.declare(filename, line, where[3], scope, 0)
            site = Site(
                filename=filename,
                line=line,
                col=where[3] if len(where) > 3 else 0,
                kernel_text=CALLEE,
                space=None,  # given per call (it may be rebuilt on each call)
                static_hints=dict(hints),
                options={"name": name} if name is not None else {},
                has_key=has_key,
                launch=_launch_text(frame, where),  # read once per site, never per call
            )
            # One site for every thread: in precompile mode (``site_wrap.py``) the misses of
            # the context that entered it compile there instead of tuning and launching.
            redefined.track(site)
            _sites[where, has_key] = site
            _site_hints[where, has_key] = _SiteHints(hints, space)
    return site
