"""What a kernel's identity covers beyond its name: its source, the Triton functions it calls
and their parameters' defaults, the ``tl.constexpr`` and ``tl.dtype`` values they read, the
functions its ``@triton.heuristics`` compute parameters with (and the plain values they read),
and its parameters' defaults.

``kernel_source_hash`` is the ``source_hash`` of ``backends/triton.KernelInfo``: one edited
part is another kernel, so a stored decision for the old one is never reused for it.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import types
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from tunedsl.backends import compat
from tunedsl.model.code_reads import (
    GLOBAL_OPS,
    attribute_chains,
    closure_values,
    module_attribute,
    names_read,
)
from tunedsl.model.jit_digest import called_parts
from tunedsl.model.keys import (
    canonical_json,
    is_triton_constexpr,
    is_triton_dtype,
    readable_constexpr,
    readable_value,
)


def kernel_source_hash(
    kernel: Any, fn: Any, constexprs: frozenset[str], defaults: Mapping[str, Any]
) -> str:
    """``kernel``'s source hash: on a GPU, Triton's hash less the lines its functions start
    on (a line added above a kernel moves only the debug information of its code, so its
    records hold), with what its ``@triton.jit(...)`` declares; else the interpreter's;
    with the ``tl.dtype`` globals and the parameters' defaults added."""
    return _source_hash(kernel, fn, constexprs, defaults, with_lines=False)


def line_bound_source_hash(
    kernel: Any, constexprs: frozenset[str], defaults: Mapping[str, Any]
) -> str | None:
    """The source hash a compiled kernel's records were keyed by before they left the lines
    out: Triton's own hash, which covers the line each function starts on (records stored
    so are found again: ``runtime/legacy_records.py``). None where it is no other hash
    (the interpreter, an untested Triton), or could be another kernel's: one whose
    ``@triton.jit(...)`` declares options, which that hash left out."""
    if compat.jit_line_free_hash(kernel) is None or compat.jit_declared_options(kernel):
        return None
    return _source_hash(kernel, python_fn(kernel), constexprs, defaults, with_lines=True)


def _source_hash(
    kernel: Any,
    fn: Any,
    constexprs: frozenset[str],
    defaults: Mapping[str, Any],
    with_lines: bool,
) -> str:
    cache_key = compat.jit_source_hash(kernel)
    if cache_key is not None:
        # Triton's hash covers the source, every called @jit function and the tl.constexpr
        # globals; the tl.dtype globals they read and the called functions' parameter
        # defaults are added (a changed one is another kernel).
        unhashed = _not_in_tritons_hash(fn, {id(fn)})
        if unhashed:
            # Triton compiles them in as constants: its cache key must tell them apart too.
            salt = hashlib.sha256("\0".join([cache_key, *unhashed]).encode()).hexdigest()
            compat.salt_jit_hash(kernel, salt)
        base = cache_key if with_lines else (compat.jit_line_free_hash(kernel) or cache_key)
        source_hash = base
        if unhashed:
            source_hash = hashlib.sha256("\0".join([base, *unhashed]).encode()).hexdigest()
        declared = compat.jit_declared_options(kernel)  # @triton.jit(debug=True): not in it
        if declared:
            text = f"{source_hash}\0declared\0{canonical_json(declared)}"
            source_hash = hashlib.sha256(text.encode()).hexdigest()
    else:
        source_hash = interpreted_source_hash(kernel)
        _salt_wrapped_jit(kernel, fn)
    return with_defaults(source_hash, constexprs, defaults)


def with_defaults(source_hash: str, constexprs: frozenset[str], defaults: Mapping[str, Any]) -> str:
    """``source_hash`` with the parameters' defaults: fixed when the kernel is declared, not
    in its source, a changed one is another kernel."""
    if not defaults:
        return source_hash
    fixed = {n: readable_value(v, n in constexprs, True) for n, v in sorted(defaults.items())}
    return hashlib.sha256(f"{source_hash}\0{canonical_json(fixed)}".encode()).hexdigest()


def _salt_wrapped_jit(kernel: Any, fn: Any) -> None:
    """The JIT function under Triton's wrappers (``@triton.heuristics``) compiles in the
    values Triton's hash leaves out as the bare kernel does: its hash is made to cover them."""
    inner = kernel
    for _ in range(8):
        inner = getattr(inner, "fn", None)
        if inner is None:
            return
        if compat.is_jit_function(inner):
            key = compat.jit_source_hash(inner)
            unhashed = _not_in_tritons_hash(fn, {id(fn)})
            if key is not None and unhashed:
                compat.salt_jit_hash(inner, "\0".join([key, *unhashed]))
            return


def python_fn(kernel: Any) -> Any:
    """The Python function under a kernel's Triton wrappers (Autotuner, Heuristics, JIT)."""
    fn = kernel
    for _ in range(8):  # unwrap Autotuner/Heuristics-style wrappers down to the function
        inner = getattr(fn, "fn", None)
        if inner is None:
            break
        fn = inner
    return fn


def reads_program_count(kernel: Any) -> bool:
    """Whether the kernel, or a Triton function it calls, reads ``tl.num_programs`` (its
    work per program follows the grid). True when its source cannot be read."""
    fn = python_fn(kernel)
    try:
        texts = [inspect.getsource(fn), *_called_sources(fn, {id(fn)})]
    except Exception:  # no source to read: nothing shows that it does not
        return True
    return any("num_programs" in text for text in texts)


def _source(fn: Any) -> str:
    """``fn``'s source; for a function without a source file (made by ``exec``), its name
    and code (``code_text``): the same in every process, so its records are found again."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        if isinstance(code, types.CodeType):
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


class _Reads(NamedTuple):
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


def _label(name: str, value: Any) -> str | None:
    if is_triton_constexpr(value) or is_triton_dtype(value):
        return f"{name}={_stable_repr(getattr(value, 'value', value))}"
    return None


def _stable_repr(value: Any) -> str:
    """``repr(value)``, but for a function whose repr is an address (``tl.constexpr(act)``
    holds a Triton function, an address under the interpreter): its name and code (a Triton
    function's source, with the Triton functions it calls), the same in every process.
    Another object keeps its repr: one with an address is another kernel in every process,
    never taken for an edited one."""
    text = repr(value)
    inner = getattr(value, "fn", value)
    if " at 0x" not in text or _plain(value) or not inspect.isfunction(inner):
        return text  # as every label was written before
    source = _source(inner).encode("utf-8")
    calls = called_parts(inner, lambda v: is_triton_constexpr(v) or is_triton_dtype(v))
    if calls:  # the Triton functions it calls are part of it (one edited: another kernel)
        source = b"\0".join([source, *calls])
    return f"<function {inner.__qualname__} {hashlib.sha256(source).hexdigest()[:16]}>"


def _globals_read(fn: Any) -> _Reads:
    """The names ``fn``'s code reads, the globals they name, then the attributes of those
    names on the modules it reads, also on modules reached through one (``lib.helper``,
    ``pkg.lib.helper``): Triton checks the constexpr and dtype values among them before
    reusing a kernel, and one edited changes the code (a tl.static_assert, a cast)."""
    names = names_read(fn)
    scope = getattr(fn, "__globals__", {})
    found = [scope.get(n) for n in names]
    values = [x for n, v in zip(names, found, strict=True) if (x := _label(n, v))]
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
            label = _label(f"{module.__name__}.{n}", value)  # lib.WIDTH
            if label is not None:
                values.append(label)
                if not tritons:  # tl.float16: Triton's own
                    via_modules.append(label)
            elif value is not None and _plain(value) and not tritons:
                plain = canonical_json(readable_constexpr(value))
                plain_via_modules.append(f"{module.__name__}.{n}={plain}")
            if isinstance(value, types.ModuleType) and all(value is not m for m in modules):
                modules.append(value)
    held = [*found, *(v for _, v in closure_values(fn))]
    reached = _through_objects(fn, scope) if any(map(_user_object, held)) else []
    for label, value in reached:  # ``Limits.LIM``, ``cfg.add``
        found.append(value)
        if (text := _label(label, value)) is not None:
            values.append(text)
        elif _plain(value):
            plain_via_modules.append(f"{label}={canonical_json(readable_constexpr(value))}")
    return _Reads(names, found, values, via_modules, plain_via_modules)


#: Packages whose classes and objects a function may read through without their attributes
#: being part of a kernel's identity: their versions are part of every record already.
_OWN_PACKAGES = frozenset({"builtins", "triton", "torch", "numpy", "typing", "functools"})


def _user_object(value: Any) -> bool:
    """A class, or an instance of one, defined outside Python's and Triton's own packages:
    its attributes are state a function may read (``Limits.LIM``, ``cfg.add``)."""
    if isinstance(value, types.ModuleType) or inspect.isroutine(value) or _plain(value):
        return False
    cls = value if inspect.isclass(value) else type(value)
    return str(getattr(cls, "__module__", "") or "").split(".")[0] not in _OWN_PACKAGES


def _through_objects(fn: Any, scope: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(label, value)`` of what ``fn``'s code reaches through attributes of a class or an
    object, from a global, a closure or a module (``Limits.LIM``, ``cfg.add``, ``lib.C.W``):
    a plain value or a function (``policy.lim``, ``NS.helper``), looked up without running a
    property, as a module's attributes are. An edited one computes another value, so another
    kernel. (What a module alone reaches, ``lib.W``, ``_globals_read`` has already.)"""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    named = [(n, scope[n]) for n in names_read(fn) if n in scope] + closure_values(fn)
    roots = {n: v for n, v in named if isinstance(v, types.ModuleType) or _user_object(v)}
    out: list[tuple[str, Any]] = []
    for chain in sorted(attribute_chains(code, set(roots), (*GLOBAL_OPS, "LOAD_DEREF")), key=repr):
        label, value, through = str(chain[0]), roots[chain[0]], False
        for kind, part in chain[1:]:
            through = through or _user_object(value)
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
            if not through and not _user_object(value):
                continue  # along modules: what they hold is _globals_read's
            if _plain(value) or inspect.isfunction(inspect.getattr_static(value, "fn", value)):
                out.append((label, value))
                break
            if not _user_object(value):
                break
    return out


def _called(found: list[Any], seen: set[int]) -> Iterator[Any]:
    """The Python functions of the Triton functions among ``found`` not yet in ``seen``,
    each added to ``seen`` as it is reached (after the calls of the ones before it)."""
    for obj in found:
        inner = getattr(obj, "fn", None) if not isinstance(obj, types.ModuleType) else None
        if inspect.isfunction(inner) and id(inner) not in seen:
            seen.add(id(inner))
            yield inner


def _called_sources(fn: Any, seen: set[int]) -> list[str]:
    """The sources of the Triton functions ``fn`` calls by name (``helper(x)``,
    ``lib.helper(x)``, ``pkg.lib.helper(x)``: a global, or an attribute of a module reached
    through one, that wraps a Python function as ``.fn``; or one held in its closure, as
    Triton's hash has it), recursively, in a fixed order, with the ``tl.constexpr`` and
    ``tl.dtype`` values each reads (``_Reads.values``; ``nonlocal name=value`` from a
    closure: ``make(tl.float16)``) and the Python helpers each calls (``_helpers``)."""
    reads = _globals_read(fn)
    closure = closure_values(fn)
    out = [*reads.values, *(x for n, v in closure if (x := _label(f"nonlocal {n}", v)))]
    for inner in _called([*reads.found, *(v for _, v in closure)], seen):
        out += [_source(inner), *_defaults(inner), *_helpers(inner, seen)]
        out += _called_sources(inner, seen)
    return out


def _not_in_tritons_hash(fn: Any, seen: set[int]) -> list[str]:
    """What Triton's own hash leaves out, as ``name=value``: the ``tl.dtype`` values ``fn``
    and the Triton functions it calls read from their globals (Triton checks them within a
    process) or closures (``make(tl.float16)``: a kernel per factory call), the
    ``tl.constexpr``, ``tl.dtype`` and plain values they read through a module (``lib.WIDTH``:
    Triton compiles them in as constants) or name (a namedtuple global), and
    the called functions' parameter defaults (a function called through the closure too)."""
    names, found, _, via_modules, plain_via_modules = _globals_read(fn)
    out = [f"{n}={v!r}" for n, v in zip(names, found, strict=False) if is_triton_dtype(v)]
    out += [*via_modules, *plain_via_modules]
    # Plain values it names (a namedtuple; any, with TRITON_ALLOW_NON_CONSTEXPR_GLOBALS):
    # Triton compiles them in as constants, its hash without them.
    out += [
        f"{fn.__qualname__}.{n}={canonical_json(readable_constexpr(v))}"
        for n, v in _read(fn)
        if _plain(v) and not (is_triton_constexpr(v) or is_triton_dtype(v))
    ]
    closure = closure_values(fn)
    out += [f"nonlocal {n}={v!r}" for n, v in closure if is_triton_dtype(v)]
    for inner in _called([*found, *(v for _, v in closure)], seen):
        out += [*_defaults(inner), *_helpers(inner, seen), *_not_in_tritons_hash(inner, seen)]
    return out


def _defaults(fn: Any) -> list[str]:
    """``function.parameter=value`` for each parameter default of a called Triton function:
    fixed when the function is declared (``S: tl.constexpr = FACTOR``), so in neither its
    source nor Triton's hash, and compiled into every kernel that calls it without that
    argument."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        f"{fn.__qualname__}.{p.name}={canonical_json(readable_constexpr(p.default))}"
        for p in params
        if p.default is not inspect.Parameter.empty
    ]


def interpreted_source_hash(kernel: Any) -> str:
    """The hash a record made under the interpreter holds: the interpreter's functions (and
    wrappers) have no Triton hash, so the source of the kernel and of every Triton function
    it calls, as Triton's hash covers them, and the plain Python values they read."""
    fn = python_fn(kernel)
    sources = [_source(fn), *_called_sources(fn, {id(fn)}), *_heuristic_sources(kernel)]
    python_values = _python_values_read(fn, {id(fn)})
    if python_values:  # (a kernel reading none keeps the hash it had without this part)
        sources.append("\0".join(["python values:", *python_values]))
    return hashlib.sha256("\0".join(sources).encode("utf-8")).hexdigest()


def _heuristic_sources(kernel: Any) -> list[str]:
    """``name=source`` of each function a ``@triton.heuristics`` wrapper computes a parameter
    with (its ``values``): one defined apart from the decorator (``{"EVEN": even_n}``) is
    not in the kernel's source, and an edited one launches another kernel for the same
    configuration; with the plain values each reads from its globals or closure."""
    out: list[str] = []
    wrapper = kernel
    for _ in range(8):  # the wrappers python_fn unwraps
        values = getattr(wrapper, "values", None)
        if type(wrapper).__name__ == "Heuristics" and isinstance(values, dict):
            for n in sorted(values, key=str):
                f = values[n]
                out += [f"{n}={_stable_source(f)}", *_plain_values_read(f), *_helpers(f, set())]
        wrapper = getattr(wrapper, "fn", None)
        if wrapper is None:
            break
    return out


def _plain_values_read(f: Any) -> list[str]:
    """``name=value`` of the plain values (numbers, strings, ``tl.constexpr``, ``tl.dtype``
    and tuples, lists, sets and dicts of them) a heuristic function reads from its module's
    globals or its closure (``lambda args: WIDTH``) or through a module (``lib.WIDTH``), or a
    ``functools.partial`` binds: another value computes another parameter, so another kernel."""
    inner = getattr(f, "func", None)
    if not inspect.isfunction(f) and inspect.isfunction(inner):  # functools.partial
        keywords = getattr(f, "keywords", None) or {}
        bound = [*enumerate(getattr(f, "args", ())), *sorted(keywords.items())]
        plain = [f"{k}={canonical_json(readable_constexpr(v))}" for k, v in bound if _plain(v)]
        return plain + _plain_values_read(inner)
    reads = _globals_read(f)  # and through a module (``lambda args: lib.W``)
    own = [f"{n}={canonical_json(readable_constexpr(v))}" for n, v in _read(f) if _plain(v)]
    return [*own, *reads.via_modules, *reads.plain_via_modules]


def _read(f: Any) -> list[tuple[str, Any]]:
    """The globals a function's code names (sorted), then its closure's values."""
    scope = getattr(f, "__globals__", {})
    return [(n, scope[n]) for n in names_read(f) if n in scope] + closure_values(f)


def _python_values_read(fn: Any, seen: set[int]) -> list[str]:
    """``qualname.name=value`` of the plain Python values (``W = 2``, not a ``tl.constexpr``)
    a kernel and the Triton functions it calls (through globals or its closure) read from
    their globals or closures, or through a module (``lib.W``). Triton refuses such a global in a compiled kernel; its
    interpreter reads the value as it runs, so another value is another kernel there."""
    reads = _globals_read(fn)
    out = [
        f"{fn.__qualname__}.{n}={canonical_json(readable_constexpr(v))}"
        for n, v in _read(fn)
        if _plain(v) and not (is_triton_constexpr(v) or is_triton_dtype(v))
    ]
    out += [f"{fn.__qualname__}.{label}" for label in reads.plain_via_modules]  # lib.W
    for inner in _called([*reads.found, *(v for _, v in closure_values(fn))], seen):
        out += _python_values_read(inner, seen)
    return out


def _plain(value: Any, depth: int = 0) -> bool:
    """A value whose JSON form is its content, the same in every process (no address); an
    ``enum.Enum`` member holding one is its repr (``<Act.GELU: 'gelu'>``). A container nested
    deeper than ``_PLAIN_DEPTH`` (one holding itself) is not: left out, never a crash."""
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


_PLAIN_DEPTH = 32


def _stable_source(f: Any) -> str:
    """A heuristic's source; for a callable that is no function (a ``functools.partial``, an
    object with ``__call__``), its function's source or its type; for a function without a
    source file, its name and code (``code_text``): never a ``repr`` holding an address, which would
    name another kernel in every process."""
    inner = getattr(f, "func", None)  # functools.partial
    if not inspect.isfunction(f) and inspect.isfunction(inner):
        f = inner
    if not inspect.isfunction(f):
        kind = type(f)
        call = inspect.getattr_static(kind, "__call__", None)
        if not inspect.isfunction(call):
            return f"{kind.__module__}.{kind.__qualname__}"
        f = call
    try:
        return inspect.getsource(f)
    except (OSError, TypeError):
        return f"{f.__qualname__}\0{code_text(f.__code__)}"


def _helpers(f: Any, seen: set[int]) -> list[str]:
    """The source of each Python function a heuristic function, or a Triton function the
    kernel calls (a ``@triton.constexpr_function`` computing a width), calls from its globals
    or closure, or through a module (``lambda args: pick(args["n"])``, ``lib.pick``),
    recursively, with the plain values each reads: an edited helper computes another value,
    so another kernel (Triton's hash of a function covers only the Triton functions it
    calls). Triton's and PyTorch's own functions (``triton.next_power_of_2``) are left out:
    their versions are part of every record already."""
    inner = getattr(f, "func", None)  # functools.partial
    f = inner if not inspect.isfunction(f) and inspect.isfunction(inner) else f
    out: list[str] = []
    for v in [*_globals_read(f).found, *(v for _, v in closure_values(f))]:  # also ``lib.pick``
        package = str(getattr(v, "__module__", "") or "").split(".")[0]
        if not inspect.isfunction(v) or id(v) in seen or package in ("triton", "torch"):
            continue
        seen.add(id(v))
        out += [f"{v.__qualname__}={_stable_source(v)}", *_plain_values_read(v)]
        out += _helpers(v, seen)
    return out
