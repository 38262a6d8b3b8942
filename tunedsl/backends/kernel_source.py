"""What a kernel's identity covers beyond its name: its source, the Triton functions it calls
and their parameters' defaults, the ``tl.constexpr`` and ``tl.dtype`` values they read, the
functions its ``@triton.heuristics`` compute parameters with (and what they read:
``backends/heuristic_reads.py``), and its parameters' defaults. What a function reads, as
text alike in every process, is ``backends/function_reads.py``'s.

``kernel_source_hash`` is the ``source_hash`` of ``backends/triton.KernelInfo``: one edited
part is another kernel, so a stored decision for the old one is never reused for it.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Iterator, Mapping
from typing import Any

from tunedsl.backends import compat
from tunedsl.backends.function_reads import (
    globals_read,
    plain,
    read,
    source_text,
    value_label,
    value_text,
)
from tunedsl.backends.heuristic_reads import helpers, heuristic_sources
from tunedsl.model.code_reads import closure_values
from tunedsl.model.keys import (
    canonical_json,
    is_triton_constexpr,
    is_triton_dtype,
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


def _called(found: list[Any], seen: set[int]) -> Iterator[Any]:
    """The Python functions of the Triton functions among ``found`` not yet in ``seen``,
    each added to ``seen`` as it is reached (after the calls of the ones before it)."""
    for obj in found:
        inner = (
            None if isinstance(obj, types.ModuleType) else inspect.getattr_static(obj, "fn", None)
        )
        if inspect.isfunction(inner) and id(inner) not in seen:
            seen.add(id(inner))
            yield inner


def _called_sources(fn: Any, seen: set[int]) -> list[str]:
    """The sources of the Triton functions ``fn`` calls by name (``helper(x)``,
    ``lib.helper(x)``, ``pkg.lib.helper(x)``: a global, or an attribute of a module reached
    through one, that wraps a Python function as ``.fn``; or one held in its closure, as
    Triton's hash has it), recursively, in a fixed order, with the ``tl.constexpr`` and
    ``tl.dtype`` values each reads (``Reads.values``; ``nonlocal name=value`` from a
    closure: ``make(tl.float16)``) and the Python helpers each calls (``heuristic_reads.helpers``)."""
    reads = globals_read(fn)
    closure = closure_values(fn)
    out = [*reads.values, *(x for n, v in closure if (x := value_label(f"nonlocal {n}", v)))]
    for inner in _called([*reads.found, *(v for _, v in closure)], seen):
        out += [source_text(inner), *_defaults(inner), *helpers(inner, seen)]
        out += _called_sources(inner, seen)
    return out


def _not_in_tritons_hash(fn: Any, seen: set[int]) -> list[str]:
    """What Triton's own hash leaves out, as ``name=value``: the ``tl.dtype`` values ``fn``
    and the Triton functions it calls read from their globals (Triton checks them within a
    process) or closures (``make(tl.float16)``: a kernel per factory call), the
    ``tl.constexpr``, ``tl.dtype`` and plain values they read through a module (``lib.WIDTH``:
    Triton compiles them in as constants) or name (a namedtuple global), and
    the called functions' parameter defaults (a function called through the closure too)."""
    names, found, _, via_modules, plain_via_modules = globals_read(fn)
    out = [f"{n}={v!r}" for n, v in zip(names, found, strict=False) if is_triton_dtype(v)]
    out += [*via_modules, *plain_via_modules]
    # Plain values it names (a namedtuple; any, with TRITON_ALLOW_NON_CONSTEXPR_GLOBALS):
    # Triton compiles them in as constants, its hash without them.
    out += [
        f"{fn.__qualname__}.{n}={value_text(v)}"
        for n, v in read(fn)
        if plain(v) and not (is_triton_constexpr(v) or is_triton_dtype(v))
    ]
    closure = closure_values(fn)
    out += [f"nonlocal {n}={v!r}" for n, v in closure if is_triton_dtype(v)]
    for inner in _called([*found, *(v for _, v in closure)], seen):
        out += [*_defaults(inner), *helpers(inner, seen), *_not_in_tritons_hash(inner, seen)]
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
        f"{fn.__qualname__}.{p.name}={value_text(p.default)}"
        for p in params
        if p.default is not inspect.Parameter.empty
    ]


def interpreted_source_hash(kernel: Any) -> str:
    """The hash a record made under the interpreter holds: the interpreter's functions (and
    wrappers) have no Triton hash, so the source of the kernel and of every Triton function
    it calls, as Triton's hash covers them, and the plain Python values they read."""
    fn = python_fn(kernel)
    sources = [source_text(fn), *_called_sources(fn, {id(fn)}), *heuristic_sources(kernel)]
    python_values = _python_values_read(fn, {id(fn)})
    if python_values:  # (a kernel reading none keeps the hash it had without this part)
        sources.append("\0".join(["python values:", *python_values]))
    return hashlib.sha256("\0".join(sources).encode("utf-8")).hexdigest()


def _python_values_read(fn: Any, seen: set[int]) -> list[str]:
    """``qualname.name=value`` of the plain Python values (``W = 2``, not a ``tl.constexpr``)
    a kernel and the Triton functions it calls (through globals or its closure) read from
    their globals or closures, or through a module (``lib.W``). Triton refuses such a global in a compiled kernel; its
    interpreter reads the value as it runs, so another value is another kernel there."""
    reads = globals_read(fn)
    out = [
        f"{fn.__qualname__}.{n}={value_text(v)}"
        for n, v in read(fn)
        if plain(v) and not (is_triton_constexpr(v) or is_triton_dtype(v))
    ]
    out += [f"{fn.__qualname__}.{label}" for label in reads.plain_via_modules]  # lib.W
    for inner in _called([*reads.found, *(v for _, v in closure_values(fn))], seen):
        out += _python_values_read(inner, seen)
    return out
