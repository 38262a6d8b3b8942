"""What a Python function's code reads (model layer, pure): the names its code and the code
nested in it name, the values its closure holds, a module's attribute looked up without
side effects, a function's code (told by its type alone), the source span of an
instruction, the chains of attributes and constant items it loads from its variables, and
whether a value is data a key could hold. Kernel identity (``backends/kernel_source.py``)
and the digest of a Triton function given as a value (``model/jit_digest.py``) both walk
what a function reads."""

from __future__ import annotations

import dis
import types
import warnings
from typing import Any


def names_read(fn: Any) -> list[str]:
    """The names ``fn``'s code and its nested code (comprehensions, lambdas) read, sorted;
    [] for an object without code."""
    code = function_code(fn)
    names: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return sorted(names)


def function_code(fn: Any) -> types.CodeType | None:
    """The code of a function, or of a bound method's function; None for any other object,
    looked at by its type alone: an attribute lookup (``fn.__code__``) could run the user's
    ``__getattr__`` or a property."""
    if type(fn) is types.MethodType:
        fn = fn.__func__
    return fn.__code__ if type(fn) is types.FunctionType else None


def globals_loaded(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the code nested in it (a comprehension) load."""
    names = {
        str(op.argval)
        for op in dis.get_instructions(code)
        if op.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= globals_loaded(const)
    return names


def closure_values(fn: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of each filled cell of ``fn``'s closure."""
    code = function_code(fn)
    if code is None:
        return []
    if type(fn) is types.MethodType:
        fn = fn.__func__
    read = []
    for n, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            read.append((n, cell.cell_contents))
        except ValueError:  # a cell not yet filled
            continue
    return read


def module_attribute(module: types.ModuleType, name: str) -> Any:
    """``module.name`` if it has one; a module whose lookup raises or warns (a deprecated
    or lazily imported name) gives None, quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return getattr(module, name, None)
        except Exception:
            return None


def source_span(code: types.CodeType, lasti: int | None) -> tuple[int, int, int, int] | None:
    """The user's (first line, last line, first column, last column) of the instruction at
    ``lasti`` (a call being made), or of all of ``code`` (a thunk) where ``lasti`` is None."""
    positions = getattr(code, "co_positions", None)  # Python 3.11+
    if positions is None:
        return None
    every = list(positions())
    if lasti is not None:
        every = every[lasti // 2 : lasti // 2 + 1]
    spans = [p for p in every if None not in p]
    if not spans:
        return None
    first, last = min(p[0] for p in spans), max(p[1] for p in spans)
    col = min(p[2] for p in spans if p[0] == first)
    end_col = max(p[3] for p in spans if p[1] == last)
    return first, last, col, end_col  # type: ignore[return-value]


#: One step of a chain: ``(".", name)`` an attribute, ``("[]", key)`` a constant item.
Step = tuple[str, Any]


def attribute_chains(
    code: types.CodeType, names: set[str], roots: tuple[str, ...] = ()
) -> set[tuple[Any, ...]]:
    """The chains ``(name, step, ...)`` of attributes and constant items (``hp["n"]``,
    ``hp.get("n")``) ``code`` and its nested code load from the variables ``names``, loaded
    by the instructions ``roots`` (a function's variables by default)."""
    roots = roots or _NAME_OPS
    chains: set[tuple[Any, ...]] = set()
    chain: list[Any] = []
    ops = list(dis.get_instructions(code))
    skip = 0
    for i, op in enumerate(ops):
        if skip:
            skip -= 1
            continue
        if chain and op.opname in _ATTRIBUTE_OPS:
            chain.append((".", str(op.argval)))
            continue
        if chain and op.opname in _CONST_OPS and i + 1 < len(ops):
            after = ops[i + 1]
            if _is_subscript(after) or (chain[-1] == (".", "get") and len(chain) > 1):
                if chain[-1] == (".", "get"):
                    chain.pop()
                chain.append(("[]", op.argval))
                skip = 1 if _is_subscript(after) else 0
                if not skip:  # `hp.get("n")`: the call ends the chain
                    chains.add(tuple(chain))
                    chain = []
                continue
        if len(chain) > 1:
            chains.add(tuple(chain))
        chain = [str(op.argval)] if op.opname in roots and op.argval in names else []
    if len(chain) > 1:
        chains.add(tuple(chain))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            chains |= attribute_chains(const, names, roots)
    return chains


def _is_subscript(op: dis.Instruction) -> bool:
    """``BINARY_SUBSCR`` (``BINARY_OP []`` from Python 3.14)."""
    return op.opname == "BINARY_SUBSCR" or (op.opname == "BINARY_OP" and op.argrepr == "[]")


#: The instructions that load a variable: a closure's (a method's ``self`` in a comprehension
#: too) or a function's own (a method's ``self``).
_NAME_OPS = ("LOAD_DEREF", "LOAD_FAST", "LOAD_FAST_CHECK")

#: The instructions that load a module's global.
GLOBAL_OPS = ("LOAD_GLOBAL", "LOAD_NAME")

#: The instructions that load an attribute of the object on the stack (LOAD_METHOD before
#: Python 3.12).
_ATTRIBUTE_OPS = ("LOAD_ATTR", "LOAD_METHOD")

#: The instructions that load a constant (LOAD_SMALL_INT from Python 3.14).
_CONST_OPS = ("LOAD_CONST", "LOAD_SMALL_INT")


def is_data(value: Any) -> bool:
    """A value a key could hold: a number, a string, a tensor or a tuple of them; not code or
    state (a function, an object, a list a prune appends to, a tuple of prunes to pick)."""
    if isinstance(value, bool | int | float | str | bytes):
        return True
    if isinstance(value, tuple):
        return all(is_data(item) for item in value)
    cls = type(value)  # a tensor, or a numpy number or array (`n = np.prod(x.shape)`)
    return cls.__module__.split(".")[0] in ("torch", "numpy") and hasattr(value, "shape")


def first_data(chain: tuple[Any, ...], value: Any) -> tuple[str, Any, list[Any]] | None:
    """Along ``chain`` (``(name, step, ...)``, ``value`` the name's), the first step that
    gives data: its label (``obj.attr``, ``hp['n']``), the data and the objects read on the
    way (``value`` first); None where no step does, or one raises now (a property: the
    prune's own call will say so)."""
    label, path = str(chain[0]), [value]
    for kind, part in chain[1:]:
        try:
            value = getattr(value, part) if kind == "." else value[part]
        except Exception:
            return None
        label += f".{part}" if kind == "." else f"[{part!r}]"
        if is_data(value):
            return label, value, path
        path.append(value)
    return None
