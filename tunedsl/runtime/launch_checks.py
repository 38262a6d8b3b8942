"""The checks of an ``autotune_launch`` call's options (runtime layer): what is wrong with an
``args=``/``kwargs=`` value, a ``grid=``/``args=``/``kwargs=`` function, an option naming one
of a few choices, a static launch hint, or a later call's hints, each a ``UsageError`` naming
the site's place and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunedsl.errors import UsageError, callable_name


def place(where: tuple[Any, ...]) -> str:
    """``file:line:column`` of a site's place (column 1 where the place keeps none)."""
    return f"{where[0]}:{where[1]}:{where[3] + 1 if len(where) > 3 else 1}"


def option_error(where: tuple[Any, ...], option: str, value: Any, wanted: str) -> UsageError:
    """A ``UsageError`` naming the site and an ``args=``/``kwargs=`` value of the wrong kind."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return UsageError(
        f"{place(where)} (autotune_launch): {option}={shown}: give {wanted}, "
        f"or a function of the configuration returning one ({option}=lambda cfg: ...)"
    )


def check_config_functions(where: tuple[Any, ...], **functions: Any) -> None:
    """``grid=``, ``args=`` and ``kwargs=`` functions are called with the configuration
    being tried (Triton's ``META``): one that cannot take it is named on the site's first
    call, not left to fail as a bare ``TypeError`` naming no option."""
    from tunedsl.model.space_input import refuses_one_argument

    for option, fn in functions.items():
        signature = refuses_one_argument(fn) if callable(fn) else None
        if signature is not None:
            raise UsageError(
                f"{place(where)} (autotune_launch): {option}="
                f"{callable_name(fn)}{signature} cannot be called as {option}(cfg): tunedsl "
                "calls it with the configuration being tried, whose fields read as cfg.BLOCK "
                f"or cfg['BLOCK'] (Triton's META), e.g. {option}=lambda cfg: ..."
            )


def check_choices(where: tuple[Any, ...], **given: Any) -> None:
    """An option naming one of a few choices (``mode="cache"``) is an error on every call,
    not only on a call that decides a new key (where the site reads its settings)."""
    from tunedsl.model.options import option_choice_problem

    for option, value in given.items():
        problem = option_choice_problem(option, value) if value is not None else None
        if problem is not None:
            raise UsageError(f"{place(where)} (autotune_launch): {problem}")


def check_static_hints(where: tuple[Any, ...], hints: Mapping[str, Any]) -> None:
    """A static hint is one valid value for every configuration (``num_stages=[2, 3]`` is a
    field of the space): named on the site's first call, also where nothing compiles it."""
    from tunedsl.model.options import HINT_NAMES, hint_value_problem

    for hint, value in hints.items():
        problem = (
            None
            if value is None or hint not in HINT_NAMES
            else hint_value_problem(hint, value, True)
        )
        if problem is not None:
            raise UsageError(f"{place(where)} (autotune_launch): {problem}")


def hints_changed(
    where: tuple[Any, ...], hints: Mapping[str, Any], first: Mapping[str, Any]
) -> None:
    """A later call of a site passes other static hints (or a ``triton.autotune`` keyword)
    than its first call did: the site launches with its first call's, so this is an error."""
    from tunedsl.model.options import triton_counterpart

    for name in hints:
        instead = triton_counterpart(name)
        if instead is not None:
            raise UsageError(f"{where[0]}:{where[1]} (autotune_launch): {instead}")
    show = lambda h: ", ".join(f"{k}={v!r}" for k, v in h.items()) or "none"  # noqa: E731
    raise UsageError(
        f"{where[0]}:{where[1]} (autotune_launch): this call passes the launch hints "
        f"{show(hints)}, but the site's first call passed {show(first)}, and a site keeps "
        "its first call's: tune a hint as a field of space=, or give each set of hints "
        "its own name="
    )


def raise_field_of_others(err: BaseException, where: tuple[Any, ...], space: Any) -> None:
    """A function of the configuration (``grid=``, ``args=``, ``kwargs=``, ``prune=``) read a
    field that this configuration of a list ``space=`` leaves out but others of it have: said
    so, as the DSL says of ``$NAME`` (``Config``'s own message takes a name no configuration
    has for one of the call's arguments, read from Triton's META). Same error class and
    traceback: the user's line reading it stays in view. Only on an error, so never per call."""
    from tunedsl.model.config import MISSING_FIELD
    from tunedsl.model.space import Space, expand_space

    missing = getattr(err, MISSING_FIELD, None)
    if missing is None or isinstance(space, Mapping | Space):  # a product: every field in each
        return
    config, name = missing
    try:
        configs = expand_space(space)
    except UsageError:  # not a space (the site names that on its own)
        return
    if config not in configs or not any(name in c for c in configs):
        return
    message = (
        f"{place(where)} (autotune_launch): {name!r} is not a field of every configuration of "
        f"space=: {config!r} has none. Fix: give every configuration of the list space a "
        f"{name!r} (or read it as cfg.get({name!r}, default))"
    )
    told = AttributeError(message) if isinstance(err, AttributeError) else KeyError(message)
    raise told.with_traceback(err.__traceback__) from None
