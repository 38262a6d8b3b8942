"""What the parts of a ``Space`` must be, checked where the space is made: an axis's values
(a list; a scalar is one value) and the constraint (called as ``constraint(cfg)``)."""

from __future__ import annotations

import inspect
import itertools
import math
import sys
from collections.abc import Iterable, Iterator, Sized
from typing import Any

from tunedsl.errors import UsageError, callable_name
from tunedsl.model.config import check_value


def refuses_one_argument(fn: Any) -> inspect.Signature | None:
    """``fn``'s signature where it cannot be called with one argument (``fn(cfg)``); None
    where it can, or where it has no signature to check (a builtin or C callable)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError:
        return signature
    return None


def check_constraint(constraint: Any) -> None:
    """A constraint is called as ``constraint(cfg)``: one taking each field by name (Kernel
    Tuner's ``def restrict(block_x, block_y)``) is named where the space is made, with the
    form to write, rather than failing inside the space on the site's first call (None:
    no constraint)."""
    if constraint is None:
        return
    if not callable(constraint):
        raise UsageError(f"Space(constraint=...) must be callable, not {constraint!r}")
    signature = refuses_one_argument(constraint)
    if signature is None:
        return
    name = callable_name(constraint)
    params = [  # the ones a call must give: each a field, in Kernel Tuner's form
        p.name
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    fields = ", ".join(f"cfg.{p}" for p in params)
    if not params:
        fix = "..."
    elif name.startswith("<"):  # a lambda: its expression, over the fields
        fix = f"... (of {fields})"
    else:
        fix = f"{name}({fields})"
    raise UsageError(
        f"Space(constraint={name}({', '.join(params)})) cannot be called as "
        "constraint(cfg): tunedsl calls it with one configuration, whose fields read as "
        f"cfg.tile or cfg['tile']; write constraint=lambda cfg: {fix}"
    )


def check_verdict(verdict: Any, constraint: Any, cfg: Any) -> None:
    """A constraint's answer is one truth value: a container of conditions (Kernel Tuner's
    list of restrictions, all of which must hold) is true whenever it is not empty, so it
    would keep every configuration; it is named with the fix instead."""
    if isinstance(verdict, (tuple, list, set, frozenset, dict, str, bytes, Iterator)):
        kind = type(verdict).__name__
        raise UsageError(
            f"the space's constraint {callable_name(constraint)} returned a {kind} for {cfg} "
            f"({verdict!r:.120}), which counts as true whatever it holds, so every "
            "configuration would be kept: return one condition, e.g. all([...]) for "
            "conditions that must all hold"
        )
    shape = getattr(verdict, "shape", ())
    if getattr(verdict, "ndim", 0) and math.prod(shape) != 1:  # numpy or torch: no one truth
        raise UsageError(
            f"the space's constraint {callable_name(constraint)} returned an array of shape "
            f"{tuple(shape)} for {cfg} ({verdict!r:.120}), which has no one truth value: "
            "return one condition, e.g. bool(x.all()) for conditions that must all hold"
        )


#: The most values one axis may have: its values are listed (a space of many axes is not).
MAX_AXIS_VALUES = 1_000_000


def axis_values(name: str, values: Any) -> list[Any]:
    """An axis's values in order (a scalar is one: ``{"num_stages": 3}`` means ``[3]``). A
    set has no order (it changes from run to run, and with it the search's ties and the
    record's order); a numpy array holds numpy numbers, not the JSON scalars of a Config."""
    where = name if name == "Axis" else f"space axis {name!r}"
    if isinstance(values, (set, frozenset)):
        fix = f"give a list, e.g. sorted({set(values)!r})"[:200]
        raise UsageError(f"{where} is a set, whose order changes from run to run: {fix}")
    if type(values).__module__ == "numpy" and getattr(values, "ndim", 0) > 0:
        raise UsageError(f"{where} is a numpy array of numpy numbers: write arr.tolist()")
    if isinstance(values, Iterator) and name != "Axis":
        # Read once, where a space is read again (sized, listed, on every new key): the next
        # reading would find it empty.
        raise UsageError(
            f"{where} is an iterator ({type(values).__name__}), which can be read only once, "
            "and a space is read again on every new key: give a list (a list comprehension, "
            "or list(...) around it)"
        )
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        values = [values]
    try:
        count = len(values) if isinstance(values, Sized) else 0
    except OverflowError:  # a range past sys.maxsize
        count = sys.maxsize
    many = f"{count:,} values, more"
    if count <= MAX_AXIS_VALUES:  # (an iterable of unknown length: read one past the most)
        values = list(itertools.islice(values, MAX_AXIS_VALUES + 1))
        count, many = len(values), "more values"
    if count > MAX_AXIS_VALUES:
        raise UsageError(
            f"{where} has {many} than an axis lists ({MAX_AXIS_VALUES:,}): "
            "each axis's values are listed (the space's points are not); give a coarser "
            "axis, e.g. Axis.pow2(lo, hi) or range(lo, hi, step)"
        )
    for value in values:  # before an Axis hashes them: a list or dict value is named with the fix
        if name == "Axis":
            check_value(value, "Axis(...)")
        else:
            check_value(value, f"{where}: field {name!r}", name)
    return values
