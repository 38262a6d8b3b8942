"""Which decisions passed which ``verify=`` check in this process (runtime layer).

A site with ``verify=`` never launches a decision that was not verified in this process
(docs/runtime.md, "The verify rule"): a record, a default or a rule's pick is checked once
before its first use, and a tuning under ``verify=`` checks every configuration it times. So
this process remembers, per record digest, the configurations that passed and the check
they passed (``passed``, ``note``).

A site reads its options when a key is decided (docs/runtime.md, "Modes"), so a key decided
without ``verify=`` (a first call with ``verify=None``, ``verify=check`` of a parameter or of
a global rebound between calls) kept launching its unverified decision for later calls that
give a check: wrong results, silently. A site whose ``verify=`` is computed per call (the
front end's judgement, as for ``space=``; an ``autotune_launch`` call place given a second
check) reads it on every call (``Site.read_per_call("verify")``), and a hit whose decision
did not pass this call's check goes the miss path, which checks the decision (its record,
default or rule pick) as it checks a record from disk, and tunes again with verification
where it fails. A site with no ``verify=``, or a constant one, reads nothing more on a hit.

Two checks are the same when they compare alike: ``True``; the same output names; the same
reference, which for a Python function is the same code with the same values in its closure
and defaults (a lambda written at the site is a new object on every call, the same check),
for a bound method the same function of the same object, else the same object. An edited
reference function is the same check, as it is for a record (``verdicts.py``).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.model.config import Config

#: Checks remembered per digest and configuration (the oldest goes first).
MAX_CHECKS = 8
#: Values compared by equality in a reference's closure; anything else by identity.
_SCALARS = (bool, int, float, complex, str, bytes, type(None))

# digest -> [(configuration, check)]: what passed in this process (``decide._VERIFIED``).
PASSED: dict[str, list[tuple[Config | None, Any]]] = {}


def on(verify: Any) -> bool:
    """Whether ``verify`` checks anything."""
    return verify is not None and verify is not False


def passed(digest: str, verify: Any, config: Config | None = None) -> bool:
    """Whether ``config`` of ``digest`` passed the check ``verify`` in this process (None:
    whether a tuning of ``digest`` checked every configuration it timed with it)."""
    return any(c == config and same_check(v, verify) for c, v in PASSED.get(digest, ()))


def pending(digest: str, verify: Any, config: Config | None = None) -> bool:
    """Whether ``verify`` checks and ``config`` of ``digest`` has not passed it yet (None:
    no tuning of ``digest`` in this process checked with it)."""
    return on(verify) and not passed(digest, verify, config)


def note(digest: str, config: Config | None, verify: Any, source: str = "") -> None:
    """``config`` of ``digest`` passed the check ``verify`` (None: a tuning checked all it
    timed; a decision's ``source``: every way of deciding checks under ``verify=``, but
    ``"empty"`` launches nothing)."""
    if not on(verify) or source == "empty" or passed(digest, verify, config):
        return
    kept = PASSED.setdefault(digest, [])
    if len(kept) >= MAX_CHECKS:
        del kept[0]
    kept.append((config, verify))


def for_call(site: Any, entry: Any, lazy: Callable[[], Any] | None) -> Any:
    """``entry`` (a hit of ``site``, a ``Site`` whose ``verify=`` is read per call), or None
    where its decision has not passed the check this call's ``verify=`` asks for: the site
    forgets it (``Site.forget_decision``) and its miss path decides the key again."""
    if entry is None or not unverified(entry.result, lazy):
        return entry
    site.forget_decision(entry.result.digest)
    return None


def tuned(digest: str, chosen: Config, verify: Any) -> None:
    """A tuning of ``digest`` chose ``chosen`` and wrote its record: its timings are the
    record's now, checked by ``verify`` (none where it is off) and by no earlier check."""
    PASSED[digest] = [(c, v) for c, v in PASSED.get(digest, ()) if c is not None]
    note(digest, chosen, verify)
    note(digest, None, verify)


def unchecked(result: Any, verify: Any) -> bool:
    """Whether the decision of ``result`` (a ``LaunchResult``) has not passed ``verify``."""
    return pending(result.digest, verify, result.config)


def unverified(result: Any, lazy: Callable[[], Any] | None) -> bool:
    """Whether the decision of ``result`` has not passed the check this call's ``verify=``
    (read from ``lazy``, its thunk) asks for."""
    return unchecked(result, (lazy()[2] or {}).get("verify") if lazy is not None else None)


def same_check(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether two ``verify=`` values check alike (see the module docstring)."""
    if a is b:
        return True
    if not on(a) or not on(b):
        return not on(a) and not on(b)
    if a is True or b is True:
        return False
    if not callable(a) and not callable(b):
        return _names(a) == _names(b)
    if isinstance(a, types.MethodType) and isinstance(b, types.MethodType):
        return a.__self__ is b.__self__ and same_check(a.__func__, b.__func__, depth)
    if isinstance(a, types.FunctionType) and isinstance(b, types.FunctionType) and depth < 4:
        kw_a, kw_b = (tuple((f.__kwdefaults__ or {}).items()) for f in (a, b))
        return (
            a.__code__ is b.__code__
            and a.__globals__ is b.__globals__
            and _same_values(_closure(a), _closure(b), depth)
            and _same_values(a.__defaults__ or (), b.__defaults__ or (), depth)
            and _same_values(kw_a, kw_b, depth)
        )
    return False


def _names(value: Any) -> Any:
    """Output names as one tuple (``"c"``, ``["c"]`` and ``("c",)`` alike)."""
    if isinstance(value, str):
        return (value,)
    return tuple(value) if isinstance(value, Sequence) else value


def _closure(fn: types.FunctionType) -> tuple[Any, ...]:
    out = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:  # empty: assigned later
            out.append(_EMPTY)
    return tuple(out)


def _same_values(a: Sequence[Any], b: Sequence[Any], depth: int) -> bool:
    """Closure or default values alike: scalars equal, functions the same check, tuples
    item by item, anything else the same object."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is y or (type(x) is type(y) and isinstance(x, _SCALARS) and x == y):
            continue
        if isinstance(x, tuple) and isinstance(y, tuple) and _same_values(x, y, depth):
            continue
        if not (callable(x) and callable(y) and same_check(x, y, depth + 1)):
            return False
    return True


_EMPTY = object()
