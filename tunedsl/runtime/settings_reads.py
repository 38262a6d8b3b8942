"""The globals a site's computed settings read (runtime layer), for a notebook cell that
rebinds one.

A site reads its computed settings (``space=SPACE``, a ``prune=`` comparing with ``size``,
``verify=check`` of a module constant) when it decides a key, never per launch, and keeps
its decisions in memory. All the cells of a notebook share one namespace: a cell that
rebinds such a global (``size = 64``, ``SPACE = dict(...)``, ``def check`` run again)
changes what the next call would decide without changing its key: without a check, the
site would launch what it decided under the old value (a configuration the prune now
drops, one no longer in the space).

``note`` keeps, at each key a site decides, the globals its settings thunk and the
functions among its options read (and those the functions among them read in turn), with
their values; ``changed`` tells whether one is bound to another value now, or is bound by
the cell about to run (``size = 16`` on the line before its call). The IPython extension
asks before each cell (``redefined.forget_redefined``), and a site whose settings read
such a global forgets its decisions: its next call decides the key again, from its
record where the record still decides it (a record is checked against the space and the
candidates prune= keeps as it is read), as a new session would. Nothing is kept until
``%load_ext tunedsl`` has loaded the extension.
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Container, Mapping
from typing import Any

from tunedsl.model.code_reads import globals_loaded
from tunedsl.warn import is_own_file

__all__ = ["changed", "forget", "note"]

#: How many functions one site's settings are followed into.
_MAX_FUNCTIONS = 64

#: Values compared by equality (a cell setting ``size = 1000`` again makes a new int);
#: anything else by identity.
_SCALARS = (bool, int, float, complex, str, bytes, type(None))

# site -> {(id of the namespace, name): (namespace, name, value read)}
_reads: weakref.WeakKeyDictionary[Any, dict[tuple[int, str], tuple[dict[str, Any], str, Any]]]
_reads = weakref.WeakKeyDictionary()
# code -> the global names it (and the code nested in it) loads
_loaded: weakref.WeakKeyDictionary[types.CodeType, frozenset[str]] = weakref.WeakKeyDictionary()


def note(site: Any, lazy: Any, options: Mapping[str, Any]) -> None:
    """``site`` decides a key with the settings ``lazy`` (the call's thunk) computed,
    ``options`` among them: keep what they read from the globals, with its values now."""
    if "tunedsl.ipython" not in sys.modules:  # no notebook asks
        return
    roots = [v for v in options.values() if callable(v)]
    if lazy is not None:
        roots.append(lazy)
    found = _reads.get(site)
    if found is None:
        found = _reads.setdefault(site, {})
    seen: set[types.CodeType] = set()
    while roots and len(seen) < _MAX_FUNCTIONS:
        fn = roots.pop()
        fn = getattr(fn, "__func__", fn)  # a bound method: its function
        code = getattr(fn, "__code__", None)
        namespace = getattr(fn, "__globals__", None)
        if not isinstance(code, types.CodeType) or not isinstance(namespace, dict):
            continue
        if code in seen or is_own_file(code.co_filename):
            continue
        seen.add(code)
        for name in _names_loaded(code):
            if name in namespace:
                value = namespace[name]
                found[(id(namespace), name)] = (namespace, name, value)
                if isinstance(value, types.FunctionType):
                    roots.append(value)
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # empty: assigned later
                continue
            if isinstance(value, types.FunctionType):
                roots.append(value)


def changed(site: Any, bound: Container[str] = ()) -> bool:
    """Whether a global ``site``'s settings read is bound to another value now, or is one
    of ``bound`` (the names the cell about to run binds)."""
    try:
        reads = list(_reads.get(site, {}).values())
    except RuntimeError:  # another thread's miss added to it meanwhile: decide again
        return True
    for namespace, name, value in reads:
        if name in bound:
            return True
        now = namespace.get(name, _GONE)
        if now is value:
            continue
        if type(now) is type(value) and isinstance(value, _SCALARS):
            try:
                if now == value:
                    continue
            except Exception:  # a value that cannot be compared: another value
                pass
        return True
    return False


def forget(site: Any) -> None:
    """``site`` forgot its decisions: what their settings read is no longer kept."""
    _reads.pop(site, None)


_GONE = object()


def _names_loaded(code: types.CodeType) -> frozenset[str]:
    names = _loaded.get(code)
    if names is None:
        names = _loaded[code] = frozenset(globals_loaded(code))
    return names
