"""Which decisions passed which ``verify=`` check in this process (runtime layer).

A site with ``verify=`` never launches a decision that was not verified in this process
(docs/runtime.md, "The verify rule"): a record, a default or a rule's pick is checked once
before its first use, and a tuning under ``verify=`` checks every configuration it times. So
this process remembers, per record digest, the configurations that passed and the check
they passed (``is_passed``, ``note``).

A site reads its options when a key is decided (docs/runtime.md, "Modes"). A site whose
``verify=`` may give another check on another call (the front end's judgement, as for
``space=``; an ``autotune_launch`` call place given a second check) reads it on every call
(``Site.read_per_call("verify")``): a hit whose decision did not pass this call's check goes
the miss path, which checks the decision as it checks a record from disk and tunes again
with verification where it fails. A site with no ``verify=``, or a constant one, reads
nothing more on a hit.

What identifies a check is its code, never the values it captured (``check_of``): a
function, lambda or nested def by its code object; a bound method by its function's code; a
``functools.partial`` by its function's; a callable object by its type's ``__call__``;
``True`` and output names by value; anything else by its type. A check made afresh on each
call from the same code (a reference computed from this call's inputs, closed over) is one
check; two different functions are two. Only these fingerprints are kept (code objects and
tuples), never a check or what it closes over.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Hashable, Sequence
from typing import Any

from tunedsl.model.config import Config

#: Checks remembered per digest and configuration (the oldest goes first).
MAX_CHECKS = 8

# digest -> [(configuration, check_of(verify))]: what passed in this process.
PASSED: dict[str, list[tuple[Config | None, Hashable]]] = {}


def clear() -> None:
    """Forget every check passed (what a new process starts with)."""
    PASSED.clear()


def is_on(verify: Any) -> bool:
    """Whether ``verify`` checks anything."""
    return verify is not None and verify is not False


def check_of(verify: Any) -> Hashable:
    """What identifies the check ``verify`` (see the module docstring); None where it is off."""
    if not is_on(verify):
        return None
    if verify is True:
        return True
    if isinstance(verify, str):
        return ("names", (verify,))
    if isinstance(verify, types.FunctionType):
        return _code(verify.__code__)
    if isinstance(verify, types.MethodType):
        return ("method", check_of(verify.__func__))
    if isinstance(verify, functools.partial):
        return ("partial", check_of(verify.func))
    if not callable(verify) and isinstance(verify, Sequence):
        return ("names", tuple(verify))
    call = getattr(type(verify), "__call__", None)  # noqa: B004 (its code, not callable())
    if isinstance(call, types.FunctionType):
        return ("object", _code(call.__code__))
    return ("type", type(verify))


def _code(code: types.CodeType) -> Hashable:
    """A code object compared by identity (equal code of two places is two checks)."""
    return ("code", id(code), code)


def same_check(a: Any, b: Any) -> bool:
    """Whether two ``verify=`` values are one check (see the module docstring)."""
    return a is b or check_of(a) == check_of(b)


def is_passed(digest: str, check: Hashable, config: Config | None = None) -> bool:
    """Whether ``config`` of ``digest`` passed ``check`` (a ``check_of``) in this process
    (None: whether a tuning of ``digest`` checked every configuration it timed with it)."""
    return any(c == config and v == check for c, v in PASSED.get(digest, ()))


def needs_check(digest: str, verify: Any, config: Config | None = None) -> bool:
    """Whether ``verify`` checks and ``config`` of ``digest`` has not passed it yet (None:
    no tuning of ``digest`` in this process checked with it)."""
    return is_on(verify) and not is_passed(digest, check_of(verify), config)


def note(digest: str, config: Config | None, verify: Any, source: str = "") -> None:
    """``config`` of ``digest`` passed the check ``verify`` (None: a tuning checked all it
    timed; a decision's ``source``: every way of deciding checks under ``verify=``, but
    ``"empty"`` launches nothing)."""
    check = check_of(verify)
    if check is None or source == "empty" or is_passed(digest, check, config):
        return
    kept = PASSED.setdefault(digest, [])
    if len(kept) >= MAX_CHECKS:
        del kept[0]
    kept.append((config, check))


def hit_for_call(site: Any, entry: Any, verify: Any) -> Any:
    """``entry`` (a hit of ``site``, a ``Site`` whose ``verify=`` is read per call), or None
    where its decision has not passed ``verify`` (this call's): the site forgets it
    (``Site.forget_decision``) and its miss path decides the key again."""
    if entry is None or not result_needs_check(entry.result, verify):
        return entry
    site.forget_decision(entry.result.digest)
    return None


def tuned(digest: str, chosen: Config, verify: Any) -> None:
    """A tuning of ``digest`` chose ``chosen`` and wrote its record: its timings are the
    record's now, checked by ``verify`` (none where it is off) and by no earlier check."""
    PASSED[digest] = [(c, v) for c, v in PASSED.get(digest, ()) if c is not None]
    note(digest, chosen, verify)
    note(digest, None, verify)


def result_needs_check(result: Any, verify: Any) -> bool:
    """Whether the decision of ``result`` (a ``LaunchResult``) has not passed ``verify``."""
    return needs_check(result.digest, verify, result.config)


def verify_of(lazy: Any) -> Any:
    """The ``verify=`` of a call's evaluated options thunk (None without one)."""
    return (lazy()[2] or {}).get("verify") if lazy is not None else None
