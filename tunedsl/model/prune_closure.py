"""What a ``prune=`` function reads from the code that calls the site, past its ``args``.

A prune written in the call (``prune=lambda configs, args: [c for c in configs if c.BLOCK >=
N]``, with ``N`` a local of the calling function) reads a value of this call that no key
holds: the site keys the arguments prune reads from ``args`` (docs/runtime.md, "The prune
rule"), never a captured local, so a decision made while ``N`` was 100 would be reused
for a call whose ``N`` is 200, launching a configuration that call's prune drops. This
module finds such reads: the closure variables of a prune defined inside a function that
is running now (the caller, whose locals change from call to call), holding data.
A prune made by a factory that has returned (``prune=make_prune(64)``) is fixed for the
process and is not one of them, unless the ``prune=`` expression passes the factory a
local of the caller (``prune=make_prune(limit)``, ``functools.partial(keep, limit=limit)``):
the prune made on each call then holds that call's value behind the factory's closure, so
the expression itself is read from the call's source (Python 3.11 and later), and where it
names a local (``keep = make_prune(limit)`` a line before ``prune=keep``), what the calling
function assigns to that local. A default bound from the caller's local of its name
(``lambda configs, args, N=N:``, Python's idiom against late binding) holds this call's
value as a closure does, and is looked at the same way. The attributes of an object the caller holds are such reads
too (``self.live`` in an ``nn.Module``'s ``forward``, read by a lambda written there or by a
method, ``prune=self.keep``), where a method of an object no running function holds (a
pruner made once at a module's top level) is fixed like a factory's prune.

At a script's or a notebook cell's top level the caller's variables are the module's
globals: a prune there that reads a name the module rebinds while it runs (a loop's
variable, a name assigned twice in one block, ``+=``) has the same fault. Those names are
found in the module's source; a module constant, or one name assigned in each branch of an
``if``, is not one of them.
"""

from __future__ import annotations

import ast
import dis
import itertools
import os
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.errors import UsageError, callable_name
from tunedsl.model import identity

#: How far up the stack a prune's defining function is looked for.
_MAX_FRAMES = 200


#: A module's file name -> the names its top-level code rebinds as it runs, each with a line
#: that rebinds it (the front end reads the module's source).
Rebound = Callable[[str], Mapping[str, int]]


def check(
    prune: Any, label: str, key: Any, arg_names: Sequence[str], args: Any, rebound: Rebound
) -> None:
    """A ``UsageError`` at the site when ``prune`` reads a local of the calling function, or
    a name the running script rebinds, that the ``key=`` value does not hold: the key would
    not tell two of its values apart."""
    caller = [*caller_locals_read(prune), *bound_attributes_read(prune)]
    reads = [(n, v, "the function that calls the site") for n, v in caller]
    for name, value, line in rebound_globals_read(prune, rebound):
        reads.append((name, value, f"the module, which rebinds it as it runs (line {line})"))
    reads.extend(factory_arguments_read(prune, rebound))
    for name, value, source in reads:
        if held_by_key(value, key):
            continue
        param = argument_named_alike(name, value, arg_names, args)
        read = f'args["{param}"]' if param else 'args["..."] (pass it to the kernel)'
        raise UsageError(
            f"{label}: prune={callable_name(prune)} reads `{name}` ({value!r:.60}) from "
            f"{source}, not from its args: no key holds it, so the "
            f"decision made for one value of `{name}` would be reused for a call with another, "
            f"launching a configuration its prune drops. Read it as {read}, whose value then "
            f"joins the key, or put `{name}` in key="
        )


def caller_locals_read(prune: Any) -> list[tuple[str, Any]]:
    """The (name, value) pairs of data that ``prune`` captured from a running function."""
    code = getattr(prune, "__code__", None)
    closure = getattr(prune, "__closure__", None) or ()
    if not isinstance(code, types.CodeType):
        return []
    defaults = _defaults(prune, code)
    if not closure and not defaults:
        return []
    frame = _running_frame(code)
    if frame is None:
        return []
    # A default bound from the caller's local of its name (`lambda configs, args, N=N:`,
    # Python's idiom against late binding): the value of this call, as a closure's is.
    local = frame.f_locals if defaults else {}
    out = [(n, v) for n, v in defaults.items() if n in local and local[n] is v]
    objects = {}
    for name, cell in zip(code.co_freevars, closure, strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: assigned later in the caller
            continue
        if _is_data(value):
            out.append((name, value))
        else:
            objects[name] = value
    if objects:  # `self.live` of a method's `self`: the object's data, read per call
        out.extend(_attributes_read(code, objects))
    return out


def factory_arguments_read(prune: Any, rebound: Rebound) -> list[tuple[str, Any, str]]:
    """The (name, value, where) of data that the ``prune=`` expression itself reads from a
    local of the function that calls the site, or from a name the running script rebinds:
    ``prune=at_most(limit)`` makes, on every call, a prune holding that call's ``limit``,
    which a factory's closure hides from ``caller_locals_read``. Found in the call's source
    (Python 3.11 and later: the position of the running call); a prune written in the call
    is left to the closure checks."""
    code = getattr(prune, "__code__", None)
    if isinstance(code, types.CodeType) and _running_frame(code) is not None:
        return []
    frame = _calling_frame()
    expression = _prune_expression(frame) if frame is not None else None
    if frame is None or expression is None or isinstance(expression, ast.Lambda):
        return []
    in_function = bool(frame.f_code.co_flags & _FUNCTION_FLAGS)
    names = frame.f_locals
    lines = {} if in_function else rebound(frame.f_code.co_filename)
    chains = _chains_read(expression)
    if isinstance(expression, ast.Name) and in_function and expression.id in names:
        # `keep = at_most(limit)` a line before `prune=keep`: what the local was made from
        code = frame.f_code
        for value in identity.assigned_in(code.co_filename, code.co_firstlineno, expression.id):
            chains |= _chains_read(value)
    out = []
    for chain in sorted(chains):
        root = chain[0]
        if root not in names or not (in_function or root in lines):
            continue
        where = (
            "the function that calls the site"
            if in_function
            else f"the module, which rebinds it as it runs (line {lines[root]})"
        ) + ", through the call that makes the prune"
        if _is_data(names[root]):
            out.append((root, names[root], where))
        else:  # `make(self.limit)`: the first step of the chain that gives data
            out.extend((name, value, where) for name, value in _values_read({chain}, names))
    return out


def _calling_frame() -> types.FrameType | None:
    """The innermost running frame outside tunedsl: the code that calls the site."""
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None or not frame.f_code.co_filename.startswith(_OWN_DIR):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _prune_expression(frame: types.FrameType) -> ast.expr | None:
    """The ``prune=`` expression of the call ``frame`` is running (a macro call's, as the
    front end expands it), or None where its source or position is not known."""
    code = frame.f_code
    positions = getattr(code, "co_positions", None)  # Python 3.11 and later
    if positions is None:
        return None
    position = next(itertools.islice(positions(), frame.f_lasti // 2, None), None)
    if position is None or None in position:
        return None
    line, end_line, col, end_col = position
    for call in identity.calls_at(code.co_filename, (line, col, end_line, end_col)):
        for keyword in call.keywords:
            if keyword.arg == "prune":
                return keyword.value
        for node in ast.walk(call):  # a macro's options, in the thunk it expands to
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "prune":
                        return value
    return None


def _chains_read(expression: ast.expr) -> set[tuple[str, ...]]:
    """The names and attribute chains (``limit``, ``self.cfg.limit``) ``expression`` loads,
    less those a lambda or comprehension in it binds."""
    bound: set[str] = set()
    for node in ast.walk(expression):
        if isinstance(node, ast.Lambda):
            bound.update(a.arg for a in [*node.args.posonlyargs, *node.args.args])
            bound.update(a.arg for a in node.args.kwonlyargs)
        elif isinstance(node, ast.comprehension):
            bound.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
    chains: set[tuple[str, ...]] = set()
    for node in ast.walk(expression):
        parts: list[str] = []
        inner: ast.expr = node  # type: ignore[assignment]
        while isinstance(inner, ast.Attribute):
            parts.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
            if inner.id not in bound:
                chains.add((inner.id, *reversed(parts)))
    return chains


def bound_attributes_read(prune: Any) -> list[tuple[str, Any]]:
    """The (``self.attr``, value) pairs of data that ``prune``, a method bound to an object a
    running function holds (``prune=self.keep`` in a module's ``forward``), reads from that
    object. A method of an object no running function holds (a pruner made once, at a
    module's top level) reads state fixed for the process and is not looked at."""
    obj = getattr(prune, "__self__", None)
    code = getattr(getattr(prune, "__func__", None), "__code__", None)
    if not isinstance(code, types.CodeType) or not code.co_argcount:
        return []
    if obj is None or isinstance(obj, (type, types.ModuleType)):
        return []
    me = code.co_varnames[0]
    chains = _attribute_chains(code, {me})
    if not chains or not _held_by_running_function(obj):
        return []
    return _values_read(chains, {me: obj})


def _held_by_running_function(obj: Any) -> bool:
    """Whether a local variable of a function running now, outside tunedsl, holds ``obj``."""
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_flags & _FUNCTION_FLAGS and not code.co_filename.startswith(_OWN_DIR):
            if any(value is obj for value in frame.f_locals.values()):
                return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _attributes_read(code: types.CodeType, objects: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The (``obj.attr``, value) pairs of data that ``code`` (and the code nested in it, a
    comprehension) reads as an attribute of one of ``objects``, its free variables that hold
    no data themselves (a method's ``self``), at the first step of a chain that gives data
    (``self.cfg.live`` reads ``cfg``'s ``live``)."""
    return _values_read(_attribute_chains(code, set(objects)), objects)


def _values_read(chains: set[tuple[str, ...]], objects: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The (``obj.attr``, value) pairs of the first step of each chain that gives data."""
    found: dict[str, Any] = {}
    for chain in sorted(chains):
        value = objects[chain[0]]
        for depth, attr in enumerate(chain[1:], start=2):
            try:
                value = getattr(value, attr)
            except Exception:  # a property that raises now: prune's own call will say so
                break
            if _is_data(value):
                found.setdefault(".".join(chain[:depth]), value)
                break
    return list(found.items())


def _attribute_chains(code: types.CodeType, names: set[str]) -> set[tuple[str, ...]]:
    """The chains ``(name, attr, ...)`` of attributes ``code`` and its nested code load from
    the free variables ``names``."""
    chains: set[tuple[str, ...]] = set()
    chain: list[str] = []
    for op in dis.get_instructions(code):
        if chain and op.opname in _ATTRIBUTE_OPS:
            chain.append(str(op.argval))
            continue
        if len(chain) > 1:
            chains.add(tuple(chain))
        chain = [str(op.argval)] if op.opname in _NAME_OPS and op.argval in names else []
    if len(chain) > 1:
        chains.add(tuple(chain))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            chains |= _attribute_chains(const, names)
    return chains


#: The instructions that load a variable: a closure's (a method's ``self`` in a comprehension
#: too) or a function's own (a method's ``self``).
_NAME_OPS = ("LOAD_DEREF", "LOAD_FAST", "LOAD_FAST_CHECK")

#: The instructions that load an attribute of the object on the stack (LOAD_METHOD before
#: Python 3.12).
_ATTRIBUTE_OPS = ("LOAD_ATTR", "LOAD_METHOD")


def rebound_globals_read(prune: Any, rebound: Rebound) -> list[tuple[str, Any, int]]:
    """The (name, value, line) of data that ``prune``, defined in a module's top-level code
    that is running now, reads from the module's globals where the module's source rebinds
    the name (``line``: where it is rebound)."""
    code = getattr(prune, "__code__", None)
    namespace = getattr(prune, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(namespace, dict):
        return []
    if not _defined_in_running_module(code):
        return []
    lines = rebound(code.co_filename)
    out = []
    for name in sorted(_globals_loaded(code)):
        if name in lines and name in namespace and _is_data(namespace[name]):
            out.append((name, namespace[name], lines[name]))
    for name, value in _defaults(prune, code).items():  # `lambda configs, args, N=N:`
        if name in lines and namespace.get(name, _MISSING) is value:
            out.append((name, value, lines[name]))
    return out


_MISSING = object()


def _defaults(prune: Any, code: types.CodeType) -> dict[str, Any]:
    """The data ``prune``'s parameters default to, by parameter name."""
    given = getattr(prune, "__defaults__", None) or ()
    names = code.co_varnames[code.co_argcount - len(given) : code.co_argcount]
    found = dict(zip(names, given, strict=True))
    found.update(getattr(prune, "__kwdefaults__", None) or {})
    return {name: value for name, value in found.items() if _is_data(value)}


def held_by_key(value: Any, key: Any) -> bool:
    """Whether the ``key=`` value holds ``value`` (itself or as an item): calls of one key=
    value then agree on it."""
    if key is None or not isinstance(value, (int, float, str, tuple)):
        return False
    parts = list(key) if isinstance(key, (tuple, list)) else [key]
    return any(type(p) is type(value) and p == value for p in [key, *parts])


def argument_named_alike(name: str, value: Any, arg_names: Sequence[str], args: Any) -> str:
    """The kernel parameter prune should read instead: the one of that name, else one the
    launch gives the same value (empty when none)."""
    if name in arg_names:
        return name
    for param, arg in zip(arg_names, args, strict=False):
        if type(arg) is type(value) and isinstance(value, (int, float, str)) and arg == value:
            return str(param)
    return ""


def _running_frame(code: types.CodeType) -> types.FrameType | None:
    """The frame of a function (not a module or class body) whose lines hold ``code``'s
    first line, in its file, running now: ``code`` was made by a call still in progress."""
    return _enclosing(code, lambda outer: bool(outer.co_flags & _FUNCTION_FLAGS))


def _defined_in_running_module(code: types.CodeType) -> bool:
    """Whether the top-level code of ``code``'s file, whose lines hold ``code``'s first
    line, is running now (a script or a notebook cell, not a module already imported)."""
    return _enclosing(code, lambda outer: outer.co_name == "<module>") is not None


def _enclosing(
    code: types.CodeType, kind: Callable[[types.CodeType], bool]
) -> types.FrameType | None:
    """The innermost running frame (up to ``_MAX_FRAMES`` out) of ``kind``, in ``code``'s
    file, whose lines hold ``code``'s first line."""
    frame = sys._getframe(2)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        outer = frame.f_code
        if (
            outer is not code
            and outer.co_filename == code.co_filename
            and kind(outer)
            and _spans(outer, code.co_firstlineno)
        ):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _globals_loaded(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the code nested in it (a comprehension) load."""
    names = {
        str(op.argval)
        for op in dis.get_instructions(code)
        if op.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _globals_loaded(const)
    return names


# A function's code has CO_NEWLOCALS; a module's and a class body's do not.
_FUNCTION_FLAGS = 0x0002


def _spans(outer: types.CodeType, line: int) -> bool:
    lines = [n for _, _, n in outer.co_lines() if n is not None]
    return bool(lines) and min(outer.co_firstlineno, *lines) <= line <= max(lines)


def _is_data(value: Any) -> bool:
    """A value a key could hold: a number, a string, a tuple or a tensor. Functions,
    modules, classes and other objects are code or state, and so are mutable containers (a
    list a prune appends what it saw to), not this call's data."""
    if isinstance(value, bool | int | float | str | bytes | tuple):
        return True
    cls = type(value)
    return cls.__module__.startswith("torch") and hasattr(value, "shape")
