"""What a Python function reads, as text alike in every process (backends layer: the
Triton functions a kernel calls are told by their ``.fn``): its source (or, made by ``exec``,
its code), the globals, closure values and module attributes it names, what it reaches
through a class or an object, and the plain values among them as JSON text. Kernel identity
(``backends/kernel_source.py``, ``backends/heuristic_reads.py``) is made of them.

Nothing here runs the user's code: an attribute is looked up statically (no property,
``__getattr__`` or other descriptor of the user's runs), a function's code and globals only
on a real function. Only the user's own code is walked into: the standard library's and
installed packages' (``library_module``) are named. A plain value's text is made from a copy
of its containers, each read at once, and is at most ``VALUE_PARTS`` parts (a larger one:
its kind and size alone).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import os
import sys
import sysconfig
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

from tunedsl.model.code_reads import (
    GLOBAL_OPS,
    attribute_chains,
    closure_values,
    function_code,
    module_attribute,
    names_read,
)
from tunedsl.model.jit_digest import called_parts
from tunedsl.model.keys import (
    canonical_json,
    is_triton_constexpr,
    is_triton_dtype,
    readable_constexpr,
)


def source_text(fn: Any) -> str:
    """``fn``'s source; for a function without a source file (made by ``exec``), its name
    and code (``code_text``): the same in every process, so its records are found again."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = function_code(fn)
        if code is not None:
            return f"{getattr(fn, '__qualname__', '?')}\0{code_text(code)}"
        return repr(fn)  # unique to this process: never taken for another kernel


def code_text(code: types.CodeType) -> str:
    """A code object as text that every process gives alike: its bytecode, its constants
    (nested code objects in turn, sets sorted; no address), and the names it uses. The
    bytecode alone would not tell ``lambda a: 64`` from ``lambda a: 128``."""

    def const(value: Any) -> str:
        if isinstance(value, types.CodeType):
            return f"<code {code_text(value)}>"
        if isinstance(value, frozenset):
            return "frozenset(" + ",".join(sorted(const(v) for v in value)) + ")"
        if isinstance(value, tuple):
            return "(" + ",".join(const(v) for v in value) + ")"
        return repr(value)

    return "\0".join(
        [
            code.co_code.hex(),
            ",".join(const(c) for c in code.co_consts),
            ",".join(code.co_names),
            ",".join(code.co_varnames),
            ",".join(code.co_freevars),
            f"{code.co_argcount},{code.co_kwonlyargcount},{code.co_flags}",
        ]
    )


class Reads(NamedTuple):
    """What a function reads: ``names`` (sorted), ``found`` (the globals they name, then
    their attributes on each module read), and ``values``, the ``tl.constexpr`` and
    ``tl.dtype`` values among them as ``name=value`` (``module.name=value`` for one read
    through a module); ``via_modules``, those read through a module other than Triton's own
    (which Triton's hash leaves out: it records only the globals a function names); and
    ``plain_via_modules``, the plain Python values read through such a module (``lib.W``)."""

    names: list[str]
    found: list[Any]
    values: list[str]
    via_modules: list[str]
    plain_via_modules: list[str]


def value_label(name: str, value: Any) -> str | None:
    if is_triton_constexpr(value) or is_triton_dtype(value):
        return f"{name}={_stable_repr(inspect.getattr_static(value, 'value', value))}"
    return None


def _stable_repr(value: Any) -> str:
    """``repr(value)``, but for a function whose repr is an address (``tl.constexpr(act)``
    holds a Triton function, an address under the interpreter): its name and code (a Triton
    function's source, with the Triton functions it calls), the same in every process.
    Another object keeps its repr: one with an address is another kernel in every process,
    never taken for an edited one."""
    text = repr(value)
    inner = inspect.getattr_static(value, "fn", value)
    if " at 0x" not in text or plain(value) or not inspect.isfunction(inner):
        return text  # as every label was written before
    source = source_text(inner).encode("utf-8")
    calls = called_parts(inner, lambda v: is_triton_constexpr(v) or is_triton_dtype(v))
    if calls:  # the Triton functions it calls are part of it (one edited: another kernel)
        source = b"\0".join([source, *calls])
    return f"<function {inner.__qualname__} {hashlib.sha256(source).hexdigest()[:16]}>"


def globals_read(fn: Any) -> Reads:
    """The names ``fn``'s code reads, the globals they name, then the attributes of those
    names on the modules it reads, also on modules reached through one (``lib.helper``,
    ``pkg.lib.helper``): Triton checks the constexpr and dtype values among them before
    reusing a kernel, and one edited changes the code (a tl.static_assert, a cast)."""
    names = names_read(fn)
    scope = function_globals(fn)
    found = [scope.get(n) for n in names]
    values = [x for n, v in zip(names, found, strict=True) if (x := value_label(n, v))]
    modules: list[types.ModuleType] = []
    via_modules: list[str] = []
    plain_via_modules: list[str] = []
    for m in found:
        if isinstance(m, types.ModuleType) and all(m is not k for k in modules):
            modules.append(m)
    for module in modules:  # grows: a module reached through a module is searched too
        tritons = module.__name__.split(".")[0] == "triton"
        for n in names:
            value = module_attribute(module, n)
            found.append(value)
            label = value_label(f"{module.__name__}.{n}", value)  # lib.WIDTH
            if label is not None:
                values.append(label)
                if not tritons:  # tl.float16: Triton's own
                    via_modules.append(label)
            elif value is not None and plain(value) and not tritons:
                plain_via_modules.append(f"{module.__name__}.{n}={value_text(value)}")
            if isinstance(value, types.ModuleType) and all(value is not m for m in modules):
                modules.append(value)
    held = [*found, *(v for _, v in closure_values(fn))]
    reached = through_objects(fn, scope) if any(map(user_object, held)) else []
    for label, value in reached:  # ``Limits.LIM``, ``cfg.add``
        found.append(value)
        if (text := value_label(label, value)) is not None:
            values.append(text)
        elif plain(value):
            plain_via_modules.append(f"{label}={value_text(value)}")
    return Reads(names, found, values, via_modules, plain_via_modules)


#: Packages whose classes and objects a function may read through without their attributes
#: being part of a kernel's identity: their versions are part of every record already.
OWN_PACKAGES = frozenset({"builtins", "triton", "torch", "numpy", "typing", "functools"})


def user_object(value: Any) -> bool:
    """A class, or an instance of one, of the user's own code (``library_module``: not the
    standard library's or an installed package's), or a namespace (``SimpleNamespace``): its
    attributes are state a function may read (``Limits.LIM``, ``cfg.add``)."""
    if isinstance(value, types.ModuleType) or inspect.isroutine(value) or plain(value):
        return False
    cls = value if inspect.isclass(value) else type(value)
    module = str(getattr(cls, "__module__", "") or "")
    if (module, getattr(cls, "__qualname__", "")) in _NAMESPACES:
        return True  # a library's class, but what it holds is the user's
    return module.split(".")[0] not in OWN_PACKAGES and not library_module(module)


#: The standard library's classes whose objects only hold what the user puts in them.
_NAMESPACES = frozenset({("types", "SimpleNamespace"), ("argparse", "Namespace")})


def library_function(fn: Any) -> bool:
    """A function of the standard library or an installed package (``library_module``):
    named, never walked into (what it reads is that library's state: a logger's registry,
    the running threads, alike in no two processes)."""
    if type(fn) is not types.FunctionType:
        return False
    file = fn.__code__.co_filename  # its own file: a runner (cProfile) may be __main__'s
    if file and not file.startswith("<"):
        return _library_file(file)
    return isinstance(fn.__module__, str) and library_module(fn.__module__)


def library_module(name: str) -> bool:
    """Whether the module ``name`` is the standard library's or an installed package's: its
    file under Python's own library or a ``site-packages``/``dist-packages`` directory (one
    without a file: a module of ``sys.stdlib_module_names``). Any other (a script, the
    user's own package, also installed in editable mode) is the user's code."""
    top = name.partition(".")[0]
    if top == "__main__":  # the script run, whatever module runs it (``python -m cProfile``)
        return False
    module = sys.modules.get(name) or sys.modules.get(top)
    if top in OWN_PACKAGES:
        return True
    file = vars(module).get("__file__") if isinstance(module, types.ModuleType) else None
    if not isinstance(file, str):
        return top in sys.stdlib_module_names
    return _library_file(file)


@functools.lru_cache(maxsize=4096)
def _library_file(file: str) -> bool:
    path = os.path.realpath(file)
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(path.startswith(root + os.sep) for root in _library_roots())


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple({os.path.realpath(paths[n]) for n in names if paths.get(n)})


def through_objects(fn: Any, scope: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(label, value)`` of what ``fn``'s code reaches through attributes of a class or an
    object, from a global, a closure or a module (``Limits.LIM``, ``cfg.add``, ``lib.C.W``):
    a plain value or a function (``policy.lim``, ``NS.helper``), looked up without running a
    property, as a module's attributes are. An edited one computes another value, so another
    kernel. (What a module alone reaches, ``lib.W``, ``globals_read`` has already.)"""
    code = function_code(fn)
    if code is None:
        return []
    named = [(n, scope[n]) for n in names_read(fn) if n in scope] + closure_values(fn)
    roots = {n: v for n, v in named if isinstance(v, types.ModuleType) or user_object(v)}
    out: list[tuple[str, Any]] = []
    for chain in sorted(attribute_chains(code, set(roots), (*GLOBAL_OPS, "LOAD_DEREF")), key=repr):
        label, value, through = str(chain[0]), roots[chain[0]], False
        for kind, part in chain[1:]:
            through = through or user_object(value)
            if kind != "." or not (through or isinstance(value, types.ModuleType)):
                break
            try:
                holder, value = value, inspect.getattr_static(value, part)
                if isinstance(value, types.MemberDescriptorType) and not inspect.isclass(holder):
                    value = value.__get__(holder)  # a slot's value (runs no code of the user's)
            except AttributeError:
                break
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            label += f".{part}"
            if not through and not user_object(value):
                continue  # along modules: what they hold is globals_read's
            if plain(value) or inspect.isfunction(inspect.getattr_static(value, "fn", value)):
                out.append((label, value))
                break
            if not user_object(value):
                break
    return out


def read(f: Any) -> list[tuple[str, Any]]:
    """The globals a function's code names (sorted), then its closure's values."""
    scope = function_globals(f)
    return [(n, scope[n]) for n in names_read(f) if n in scope] + closure_values(f)


def plain(value: Any) -> bool:
    """A value whose JSON form is its content, the same in every process (no address); an
    ``enum.Enum`` member holding one is its repr (``<Act.GELU: 'gelu'>``). A container nested
    deeper than ``_PLAIN_DEPTH`` (one holding itself) is not: left out, never a crash. One of
    more than ``VALUE_PARTS`` parts, or changing each time it is read, is (``held``: its
    text names its size alone)."""
    return _plain(held(value), 0)


def _plain(value: Any, depth: int) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if depth > _PLAIN_DEPTH:
        return False
    if isinstance(value, enum.Enum):
        return _plain(value.value, depth + 1)
    if isinstance(value, tuple | list | set | frozenset):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str | int) and _plain(v, depth + 1) for k, v in value.items())
    return is_triton_constexpr(value) or is_triton_dtype(value)


#: At most this many parts (items, and the items of those) of one value are written into a
#: kernel's identity; a larger one is its kind and size alone (``<dict of 200000 items: not
#: covered>``), which keeps the first launch fast: such a table belongs in ``key=``.
VALUE_PARTS = 4096


class Uncovered(Exception):
    """A value too large (or changing each time it is read) to be written part by part."""


def held(value: Any, left: list[int] | None = None) -> Any:
    """``value`` with its containers (dicts, lists, sets, tuples, nested) copied, each read
    at once, so that another thread changing one meanwhile is no error; a value of more than
    ``VALUE_PARTS`` parts (or than ``left[0]``, which it draws on), or one still changing
    after a few reads, the text of a marker naming its kind and size."""
    if not isinstance(value, _CONTAINERS):
        return value
    budget = left if left is not None else [VALUE_PARTS]
    try:
        if _size(value) > budget[0]:
            raise Uncovered("over")
        return _copy(value, budget, 0)
    except Uncovered as why:
        size = _size(value)
        kind = "changing " if str(why) == "changing" else ""
        return f"<{kind}{type(value).__name__} of {size} items: not covered>"


_CONTAINERS = (dict, list, tuple, set, frozenset)


def _size(value: Any) -> int:
    """The number of items of a container, as its base type counts them (no ``__len__`` of
    the user's run)."""
    base = next(k for k in _CONTAINERS if isinstance(value, k))
    return int(base.__len__(value))


def _copy(value: Any, left: list[int], depth: int) -> Any:
    left[0] -= 1
    if left[0] < 0:
        raise Uncovered("over")
    if depth > _PLAIN_DEPTH or not isinstance(value, _CONTAINERS):
        return value
    if isinstance(value, dict):
        return {k: _copy(v, left, depth + 1) for k, v in read_at_once(dict.items, value)}
    base = next(k for k in _CONTAINERS if isinstance(value, k))
    items = [_copy(v, left, depth + 1) for v in read_at_once(base.__iter__, value)]
    if isinstance(value, set | frozenset):
        return frozenset(items) if isinstance(value, frozenset) else set(items)
    return tuple(items) if isinstance(value, tuple) else items


def read_at_once(read: Any, container: Any) -> list[Any]:
    """``list(read(container))`` (``dict.items``, ``set.__iter__``: Python's own, made at once),
    read again where another thread changed the container meanwhile; ``Uncovered`` where
    it changes each of a few times."""
    for _ in range(8):
        try:
            return list(read(container))
        except RuntimeError:  # changed size during iteration
            continue
    raise Uncovered("changing")


_PLAIN_DEPTH = 32


def function_globals(fn: Any) -> Mapping[str, Any]:
    """A function's (or a bound method's function's) globals; ``{}`` for another object."""
    if type(fn) is types.MethodType:
        fn = fn.__func__
    return fn.__globals__ if type(fn) is types.FunctionType else {}


def value_text(value: Any, left: list[int] | None = None) -> str:
    """A plain value's JSON text (``plain``): its record-key form, alike in every process;
    where that form would tell two values apart no longer (a dict holding both ``1`` and
    ``"1"`` as keys, written both as ``"1"``), would differ between processes (an enum
    member holding a set, written as its repr, whose order follows the hash seed) or would
    run the user's code (an enum's own ``__repr__`` or ``__getattr__``), its typed form:
    each dict key as itself, sets sorted, an enum member as its class, name and value. A
    value of more than ``VALUE_PARTS`` parts (``left[0]`` where given) is a marker naming its
    size (``held``)."""
    value = held(value, left)
    if _json_exact(value, 0):
        return canonical_json(readable_constexpr(value))
    return canonical_json(_typed(value, 0))


def _json_exact(value: Any, depth: int) -> bool:
    if depth > _PLAIN_DEPTH:
        return True  # (not plain: no value_text asked for)
    if isinstance(value, enum.Enum):  # its repr: Python's own, holding no set
        return _enum_repr_is_pythons(type(value)) and not _holds_set(_enum_value(value), depth + 1)
    if isinstance(value, dict):
        if len({str(k) for k in value}) != len(value):
            return False
        return all(_json_exact(v, depth + 1) for v in value.values())
    if isinstance(value, tuple | list | set | frozenset):
        return all(_json_exact(v, depth + 1) for v in value)
    return True


def _holds_set(value: Any, depth: int) -> bool:
    if isinstance(value, set | frozenset):
        return True
    if depth > _PLAIN_DEPTH:
        return False
    if isinstance(value, enum.Enum):
        return _holds_set(_enum_value(value), depth + 1)
    if isinstance(value, dict):
        value = [*value, *value.values()]
    return isinstance(value, tuple | list) and any(_holds_set(v, depth + 1) for v in value)


def _typed(value: Any, depth: int) -> Any:
    if depth > _PLAIN_DEPTH:
        return "..."
    if isinstance(value, enum.Enum):
        kind = type(value)
        name = (
            f"{kind.__module__}.{kind.__qualname__}.{inspect.getattr_static(value, '_name_', '')}"
        )
        return {"enum": name, "value": _typed(_enum_value(value), depth + 1)}
    if isinstance(value, dict):
        items = [[_typed(k, depth + 1), _typed(v, depth + 1)] for k, v in value.items()]
        return {"dict": sorted(items, key=canonical_json)}
    if isinstance(value, set | frozenset):
        return {"set": sorted((_typed(v, depth + 1) for v in value), key=canonical_json)}
    if isinstance(value, tuple | list):
        return [_typed(v, depth + 1) for v in value]
    return readable_constexpr(value)


def _enum_value(member: enum.Enum) -> Any:
    """An enum member's value, as Python's ``enum`` stores it (no property of the user's)."""
    return inspect.getattr_static(member, "_value_", None)


def _enum_repr_is_pythons(kind: type) -> bool:
    """Whether an enum class's members are written by Python's own ``repr`` (not one of the
    user's, which would run the user's code) and looked up without a ``__getattr__``."""
    attrs = [vars(klass) for klass in kind.__mro__]
    own = next((a["__repr__"] for a in attrs if "__repr__" in a), None)
    hook = any("__getattr__" in a for a in attrs)  # (the enum class's own: not the members')
    return getattr(own, "__module__", None) == "enum" and not hook
