"""What the functions a ``@triton.heuristics`` wrapper computes parameters with read, as part
of a kernel's identity (backends layer): each one's source, the plain values it reads, its
parameters' defaults, the state of the objects it reads or is (a callable object, a bound
method, a ``functools.partial``'s bound values), and the Python helpers it calls, directly or
through a table. Another value of any computes another parameter, so another kernel.

The text is alike in every process for the same code and values (no address, sets sorted),
and making it runs none of the user's code: an object's state is read from its instance
dict and slots, never through a property, a ``__getattr__`` or another descriptor of its.
The standard library's and installed packages' functions and objects are named, never
walked into (``function_reads.library_module``): their state is the process's (the running
threads, the loggers made). A value of more than ``VALUE_PARTS`` parts is its size alone,
and each container is read at once: another thread changing one meanwhile is no error.
"""

from __future__ import annotations

import collections.abc
import functools
import hashlib
import inspect
import threading
import types
from typing import Any

from tunedsl.backends.function_reads import (
    OWN_PACKAGES,
    VALUE_PARTS,
    Uncovered,
    code_text,
    globals_read,
    held,
    library_function,
    plain,
    read,
    read_at_once,
    user_object,
    value_text,
)
from tunedsl.model.code_reads import closure_values
from tunedsl.model.keys import is_tensor


def heuristic_sources(kernel: Any) -> list[str]:
    """``name=source`` of each function a ``@triton.heuristics`` wrapper computes a parameter
    with (its ``values``): one defined apart from the decorator (``{"EVEN": even_n}``) is
    not in the kernel's source, and an edited one launches another kernel for the same
    configuration; with what each reads (``plain_values_read``) and the helpers it calls."""
    out: list[str] = []
    wrapper = kernel
    for _ in range(8):  # the wrappers python_fn unwraps
        if type(wrapper).__name__ == "Heuristics":
            values = inspect.getattr_static(wrapper, "values", None)
            if isinstance(values, dict):
                for n in sorted(values, key=str):
                    f = values[n]
                    out += [f"{n}={stable_source(f)}", *plain_values_read(f), *helpers(f, set())]
        wrapper = inspect.getattr_static(wrapper, "fn", None)
        if wrapper is None:
            break
    return out


def plain_values_read(f: Any) -> list[str]:
    """``name=value`` of the plain values (numbers, strings, ``tl.constexpr``, ``tl.dtype``
    and tuples, lists, sets and dicts of them) a heuristic function reads from its module's
    globals or its closure (``lambda args: WIDTH``) or through a module (``lib.WIDTH``), or a
    ``functools.partial`` binds; then the state of what else it reads, binds or is: its
    parameters' defaults, an object (``CFG.meth(args)``), a numpy number, a table of
    functions (``TABLE["pick"](args)``), a callable object's or a bound method's own
    object (``state_text``), a library's value (``Fraction(1, 3)``, its repr). Another value
    computes another parameter, so another kernel. A library's other objects and functions
    (a logger, ``threading.current_thread``) are named, not walked into."""
    if issubclass(type(f), functools.partial):
        bound = [*enumerate(f.args), *sorted((f.keywords or {}).items())]
        texts = [f"{k}={value_text(v) if plain(v) else state_text(v)}" for k, v in bound]
        return texts + plain_values_read(f.func)
    if type(f) is types.MethodType:
        return [f"self={state_text(f.__self__)}", *plain_values_read(f.__func__)]
    if type(f) is not types.FunctionType:  # an object with ``__call__``: its state, its code
        call = inspect.getattr_static(type(f), "__call__", None)
        own = plain_values_read(call) if type(call) is types.FunctionType else []
        return [f"self={state_text(f)}", *own] if user_object(f) else own
    if library_function(f):  # named by ``stable_source``: its library's state is no part
        return []
    reads = globals_read(f)  # and through a module (``lambda args: lib.W``)
    found = read(f)
    own = [f"{n}={value_text(v)}" for n, v in found if plain(v)]
    held = [f"{n}={state_text(v)}" for n, v in found if _stateful(v)]
    defaults = [*(f.__defaults__ or ()), *sorted((f.__kwdefaults__ or {}).items())]
    if defaults:
        held.append(f"defaults={state_text(defaults)}")
    return [*own, *reads.via_modules, *reads.plain_via_modules, *held]


def _stateful(value: Any) -> bool:
    """A value read whose state ``state_text`` describes and nothing else covers: an object
    of the user's classes, a bound method or ``functools.partial``, a numpy value, a
    library's value (``_value_like``: ``Fraction(1, 3)``), or a container holding one or a
    function. (A plain value, a module, a class or a function is covered by the reads
    themselves, the Triton and PyTorch values by their versions; a library's other objects,
    a logger or a thread, are no state of the user's.)"""
    kind = type(value)
    if plain(value) or isinstance(value, type | types.ModuleType | types.FunctionType):
        return False
    if kind is types.MethodType or issubclass(kind, functools.partial) or _numpy(value):
        return True
    if isinstance(value, tuple | list | set | frozenset | dict) or user_object(value):
        return True
    own = str(kind.__module__).split(".")[0] in OWN_PACKAGES  # (Triton's, PyTorch's: versions)
    return not own and not inspect.isroutine(value) and _value_like(value)  # ``Fraction(1, 3)``


def state_text(value: Any) -> str:
    """``value`` as text alike in every process for the same code and values, read without
    running the user's code: a plain value its JSON (``value_text``); a function its name
    and a digest of what it is and reads (``stable_source``, ``plain_values_read``,
    ``helpers``); an object of the user's its class and the state in its instance dict and
    slots; a numpy number its type and value; a container its items; another object its
    repr, or its type alone where that holds an address."""
    return _state(value, (), [VALUE_PARTS])


_STATE_DEPTH = 32


def _state(value: Any, path: tuple[int, ...], left: list[int]) -> str:
    left[0] -= 1
    probe = [left[0]]
    value = held(value, probe)  # its containers read at once (another thread may change one)
    if plain(value):
        left[0] = probe[0]  # (its parts drawn from what is left)
        return value_text(value)
    kind = type(value)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if id(value) in path or len(path) > _STATE_DEPTH or left[0] < 0:
        return f"<{name} ...>"  # one holding itself, or too much: cut short
    path = (*path, id(value))
    if kind is types.FunctionType and library_function(value):
        return f"<function {value.__module__}.{value.__qualname__}>"
    if kind is types.FunctionType:
        return f"<function {value.__qualname__} {_function_digest(value)}>"
    if kind is types.MethodType:
        return (
            f"<method {_state(value.__func__, path, left)} of {_state(value.__self__, path, left)}>"
        )
    if issubclass(kind, functools.partial):
        parts = [value.func, value.args, value.keywords or {}]
        return f"<partial {','.join(_state(v, path, left) for v in parts)}>"
    if _numpy(value):
        return _numpy_text(value, name)
    if isinstance(value, dict):
        items = sorted(f"{_state(k, path, left)}:{_state(v, path, left)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, set | frozenset):
        return "{" + ",".join(sorted(_state(v, path, left) for v in value)) + "}"
    if isinstance(value, tuple | list):
        return f"{kind.__name__}(" + ",".join(_state(v, path, left) for v in value) + ")"
    if isinstance(value, type):
        return f"<class {value.__module__}.{value.__qualname__}>"
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__}>"
    if not user_object(value):  # a library's: named, its repr where that is its value
        text = repr(value) if _value_like(value) else ""
        return text if text and " at 0x" not in text else f"<{name}>"
    fields = sorted(_fields(value).items())
    if kind.__module__ == _SPACES:  # tunedsl's spaces: the caches their use fills are no part
        fields = [(k, v) for k, v in fields if not k.startswith("_")]
    return f"<{name} " + ",".join(f"{k}={_state(v, path, left)}" for k, v in fields) + ">"


#: The module of tunedsl's spaces, whose objects are their public fields (axes, constraint,
#: configurations): the private ones are caches filled as the space is searched, so an
#: object holding a space (the one a lazy space's constraint is bound to) reads alike before
#: and after.
_SPACES = "tunedsl.model.space"


def _value_like(value: Any) -> bool:
    """An object of a library whose repr is its value: Python's, Triton's, PyTorch's or
    numpy's own (a ``torch.dtype``, not a tensor: its data is no identity), or one of a
    class that compares by value and is no collection (``Decimal``, ``Path``, ``re.Pattern``;
    not ``os.environ``). Another (a thread, a logger) is its type alone: its repr tells its
    process's state (a thread's id)."""
    if is_tensor(value):
        return False
    kind = type(value)
    if str(kind.__module__).split(".")[0] in OWN_PACKAGES:
        return True
    if isinstance(value, collections.abc.Collection):
        return False
    return inspect.getattr_static(kind, "__eq__", None) is not object.__dict__["__eq__"]


def _fields(obj: Any) -> dict[str, Any]:
    """The state an object holds itself: its instance dict's and its slots' values, read
    through Python's own descriptors (never the class's properties or ``__getattr__``)."""
    out: dict[str, Any] = {}
    own_dict = None
    for klass in type(obj).__mro__:
        attrs = vars(klass)
        slots = attrs.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            desc = attrs.get(slot)
            if isinstance(desc, types.MemberDescriptorType):
                try:
                    out.setdefault(str(slot), desc.__get__(obj, klass))
                except AttributeError:  # a slot not set
                    continue
        desc = attrs.get("__dict__")
        if own_dict is None and isinstance(desc, types.GetSetDescriptorType):
            own_dict = desc.__get__(obj, klass)
    if isinstance(own_dict, dict):
        try:
            pairs = read_at_once(dict.items, own_dict)
        except Uncovered:  # another thread changes it each time it is read
            return {**out, "...": "<changing __dict__: not covered>"}
        for k, v in pairs:
            out.setdefault(str(k), v)
    return out


def _numpy(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ != "dtype"


def _numpy_text(value: Any, name: str) -> str:
    """A numpy number as its type and value; an array as its dtype, shape and a digest of
    its bytes (one of Python objects: its type alone)."""
    try:
        if type(value).__name__ == "ndarray":
            if value.dtype.hasobject:
                return f"<{name}>"
            digest = hashlib.sha256(value.tobytes()).hexdigest()[:16]
            return f"{name}({value.dtype.str},{list(value.shape)},{digest})"
        return f"{name}({value.item()!r})"
    except Exception:  # numpy's own, not the user's code: a value it cannot write
        return f"<{name}>"


def _function_digest(f: Any) -> str:
    """A digest of what ``f`` is and reads; a function met again while its own digest is
    being made (one reading a table that holds it) is its name alone there."""
    digesting = _DIGESTING.__dict__.setdefault("ids", set())
    if id(f) in digesting:
        return "..."
    digesting.add(id(f))
    try:
        parts = [stable_source(f), *plain_values_read(f), *helpers(f, {id(f)})]
    finally:
        digesting.discard(id(f))
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:16]


#: The functions whose digests this thread is making (``_function_digest``).
_DIGESTING = threading.local()


def stable_source(f: Any) -> str:
    """A heuristic's source; for a callable that is no function (a ``functools.partial``, a
    bound method, an object with ``__call__``), its function's source or its type; for a
    function without a source file, its name and code (``code_text``): never a ``repr``
    holding an address, which would name another kernel in every process."""
    if issubclass(type(f), functools.partial):
        return stable_source(f.func) if type(f.func) is types.FunctionType else _type_name(f)
    if type(f) is types.MethodType:
        f = f.__func__
    if type(f) is not types.FunctionType:
        call = inspect.getattr_static(type(f), "__call__", None)
        if type(call) is not types.FunctionType:
            return _type_name(f)
        f = call
    if library_function(f):  # a library's: its name (its version is the library's)
        return f"{f.__module__}.{f.__qualname__}"
    try:
        return inspect.getsource(f)
    except (OSError, TypeError):
        return f"{f.__qualname__}\0{code_text(f.__code__)}"


def _type_name(f: Any) -> str:
    kind = type(f)
    return f"{kind.__module__}.{kind.__qualname__}"


def helpers(f: Any, seen: set[int]) -> list[str]:
    """The source of each Python function a heuristic function, or a Triton function the
    kernel calls (a ``@triton.constexpr_function`` computing a width), calls from its globals
    or closure, or through a module (``lambda args: pick(args["n"])``, ``lib.pick``),
    recursively, with the plain values each reads: an edited helper computes another value,
    so another kernel (Triton's hash of a function covers only the Triton functions it
    calls). Triton's and PyTorch's own functions (``triton.next_power_of_2``) are left out:
    their versions are part of every record already."""
    if issubclass(type(f), functools.partial):
        f = f.func
    if type(f) is types.MethodType:
        f = f.__func__
    out: list[str] = []
    for v in [*globals_read(f).found, *(v for _, v in closure_values(f))]:  # also ``lib.pick``
        v = cached_function(v)
        if type(v) is not types.FunctionType or id(v) in seen or library_function(v):
            continue
        seen.add(id(v))
        out += [f"{v.__qualname__}={stable_source(v)}", *plain_values_read(v)]
        out += helpers(v, seen)
    return out


def cached_function(value: Any) -> Any:
    """The function a ``functools.lru_cache`` (or ``cache``) wrapper calls, read from the
    wrapper's own dict (no user code runs); anything else as it is."""
    if type(value) is functools._lru_cache_wrapper:  # type: ignore[attr-defined]
        inner = inspect.getattr_static(value, "__wrapped__", None)
        if type(inner) is types.FunctionType:
            return inner
    return value
