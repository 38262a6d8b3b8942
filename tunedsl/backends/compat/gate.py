"""The version gate, the interpreter and JITFunction facts (see ``compat/__init__.py``)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import re
import sys
from typing import Any

from tunedsl.errors import UntestedTritonWarning
from tunedsl.warn import warn_once

# Triton versions (major, minor) whose internals every function below was checked on: 3.6.0
# on the H100 of the benchmarks, 3.9.0 on the CPU development machine (interpreter and
# cross-compiling to a cubin). Widen only after running the launch and binary tests.
TESTED_TRITON: tuple[tuple[int, int], tuple[int, int]] = ((3, 6), (3, 9))


# -- the version gate -------------------------------------------------------------------------


def version_tested(version: str) -> bool:
    """Whether a Triton version string (``"3.6.0"``, ``"3.9.0+git1a2b"``, ``"3.10.0rc1"``)
    is inside :data:`TESTED_TRITON`. Unparseable text is untested."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    if match is None:
        return False
    found = (int(match.group(1)), int(match.group(2)))
    low, high = TESTED_TRITON
    return low <= found <= high


def untested_message(version: str) -> str:
    low, high = (".".join(map(str, v)) for v in TESTED_TRITON)
    return (
        f"tunedsl: Triton {version} is outside the versions tunedsl was tested with "
        f"({low} to {high}); the direct launcher, stored kernel binaries and the parallel "
        "compile split are off, and kernels launch through Triton's public JIT path "
        "(correct, with more per-call overhead). Install a tested Triton for full speed."
    )


def gate(version: str) -> bool:
    """:func:`version_tested`, warning once per process when it is False."""
    if version_tested(version):
        return True
    topic = f"triton-version:{version}"
    warn_once(topic, untested_message(version), UntestedTritonWarning, stacklevel=3)
    return False


@functools.lru_cache(maxsize=1)
def internals_usable() -> bool:
    """True when the installed Triton is a tested version (a process constant)."""
    import triton

    return gate(str(triton.__version__))


# -- the interpreter --------------------------------------------------------------------------


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter: Triton's own knob
    ``triton.knobs.runtime.interpret`` (``TRITON_INTERPRET`` with Triton's truthiness:
    ``1``, ``true``, ``on``, ``yes``, ``y``, any case; or set in Python).
    Checked on 3.6.0 and 3.9.0 (``knobs.runtime.interpret``, an ``env_bool``)."""
    global _runtime_knobs
    runtime = _runtime_knobs  # asked several times a miss: found once
    if runtime is None:
        try:
            from triton import knobs as tknobs
        except ImportError:  # no Triton installed (e.g. `tunedsl precompile` probing): its rule
            from tunedsl.knobs import triton_interpret_env

            return triton_interpret_env()
        runtime = _runtime_knobs = getattr(tknobs, "runtime", False)
    value = getattr(runtime, "interpret", None)  # the knob reads the environment each time
    if value is None:  # an untested Triton without the knob: its environment rule
        from tunedsl.knobs import triton_interpret_env

        return triton_interpret_env()
    return bool(value)


# ``triton.knobs.runtime`` once imported (False: a Triton without it).
_runtime_knobs: Any = None


def is_interpreted_function(kernel: Any) -> bool:
    """``@triton.jit`` under the interpreter returns an ``InterpretedFunction`` (3.6, 3.9)."""
    return type(kernel).__name__ == "InterpretedFunction"


# -- JITFunction facts ------------------------------------------------------------------------


def is_jit_function(kernel: Any) -> bool:
    """A real ``JITFunction`` (it has the per-device binder table ``device_caches``; the
    interpreter's functions and wrappers do not). Checked on 3.6.0 and 3.9.0."""
    return hasattr(kernel, "device_caches")


def jit_source_hash(kernel: Any) -> str | None:
    """``JITFunction.cache_key``: Triton's hash of the source and every called ``@jit``
    function (3.6.0, 3.9.0), as Triton worked it out (before ``salt_jit_hash``); None for
    anything else."""
    if not is_jit_function(kernel):
        return None
    unsalted = vars(kernel).get(_UNSALTED)
    if isinstance(unsalted, str):
        return unsalted
    key = getattr(kernel, "cache_key", None)
    return key if isinstance(key, str) else None


def salt_jit_hash(kernel: Any, salt: str) -> None:
    """Make Triton's hash of ``kernel`` (``JITFunction.hash``, which ``cache_key``, and so
    every compile's cache key, is made of; 3.6.0, 3.9.0) cover ``salt``: values the kernel
    compiles in that Triton's hash leaves out (a ``tl.dtype`` global, ``lib.WIDTH``), so an
    edited one is compiled again instead of being served the old binary from Triton's cache.
    The same salt again changes nothing. Call it before the kernel is a key of any dict or
    set: a JIT function hashes as its ``cache_key``."""
    base = jit_source_hash(kernel)
    if base is None or not hasattr(kernel, "hash"):
        return
    salted = hashlib.sha256(f"{base}\0values Triton's hash leaves out\0{salt}".encode()).hexdigest()
    lock = getattr(kernel, "_hash_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        vars(kernel)[_UNSALTED] = base
        kernel.hash = salted


#: Where ``salt_jit_hash`` keeps Triton's own hash on the JIT function.
_UNSALTED = "_tunedsl_unsalted_hash"


def jit_line_free_hash(kernel: Any) -> str | None:
    """Triton's hash of ``kernel`` (``JITCallable.cache_key``) less the line each function
    starts on: the same walk of the source, the Triton functions it calls (each by this
    hash, with its ``noinline``) and the ``tl.constexpr`` globals they read, by Triton's own
    ``DependenciesFinder`` (3.6.0, 3.8.0, 3.9.0). A line moves only the debug information
    of the compiled code, so a decision measured for the kernel holds wherever it starts;
    the compiled code itself still follows Triton's hash. None for anything but a
    ``JITFunction`` of a tested Triton, or where the walk fails (then Triton's hash
    stands)."""
    if not is_jit_function(kernel) or not internals_usable():
        return None
    try:
        return _line_free(kernel, {})
    except Exception:  # a walk Triton's own hash would fail too, or an untested shape
        return None


#: Where ``jit_line_free_hash`` keeps a function's hash, with Triton's it was worked out
#: beside: it is worked out again only when Triton's is. A helper redefined in a notebook
#: leaves a caller's hash, and so the code Triton compiles for it, as it was; so it leaves
#: this one.
_LINE_FREE = "_tunedsl_line_free_hash"


def _line_free(fn: Any, memo: dict[int, str]) -> str:
    import inspect

    from triton.language.core import constexpr
    from triton.runtime.jit import DependenciesFinder

    fn = getattr(fn, "__func__", fn)  # a constexpr_function bound to an object
    known = memo.get(id(fn))
    if known is not None:
        return known
    memo[id(fn)] = f"recursion:{fn._fn_name}"  # as Triton breaks a recursive walk
    # Triton's own walk first (what it refuses is refused here too), unsalted.
    tritons = vars(fn).get(_UNSALTED) or fn.cache_key
    kept = vars(fn).get(_LINE_FREE)
    if isinstance(kept, tuple) and kept[0] == tritons:
        memo[id(fn)] = str(kept[1])
        return str(kept[1])

    class LineFree(DependenciesFinder):  # type: ignore[misc,valid-type]
        def _update_hash(self, func: Any) -> None:
            _ = func.cache_key  # fills func.used_global_vals, as Triton's walk does
            for name_key in self.used_global_vals.keys() & func.used_global_vals.keys():
                if self.used_global_vals[name_key][0] != func.used_global_vals[name_key][0]:
                    raise RuntimeError(f"global {name_key[0]} differs between callers")
            self.used_global_vals.update(func.used_global_vals)
            key = _line_free(func, memo) + str(getattr(func, "noinline", False))
            self.hasher.update(key.encode("utf-8"))

    nonlocals = inspect.getclosurevars(fn.fn).nonlocals
    finder = LineFree(name=fn._fn_name, globals=fn.__globals__, nonlocals=nonlocals, src=fn.src)
    finder.visit(fn.parse())
    constexprs = sorted(
        ((name, value) for (name, _), (value, _) in finder.used_global_vals.items()
         if isinstance(value, constexpr)),
        key=lambda item: (item[0], repr(item[1])),
    )  # fmt: skip
    text = f"{finder.ret}\0without lines\0{constexprs}"
    memo[id(fn)] = digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    vars(fn)[_LINE_FREE] = (tritons, digest)
    return digest


def jit_declared_options(kernel: Any) -> dict[str, Any]:
    """What ``@triton.jit(...)`` declared for ``kernel`` that changes the code Triton
    compiles, only what is set: ``debug``, ``noinline`` and the parameters left
    unspecialized, by name (``JITFunction.debug``, ``.noinline``,
    ``KernelParam.do_not_specialize``, ``.do_not_specialize_on_alignment``; 3.6.0, 3.8.0,
    3.9.0). Triton's source hash starts at ``def``: it leaves the decorator out. Empty for a
    plain ``@triton.jit`` and for anything but a ``JITFunction``."""
    if not is_jit_function(kernel):
        return {}
    out: dict[str, Any] = {}
    for flag in ("debug", "noinline"):
        if getattr(kernel, flag, None):
            out[flag] = True
    params = getattr(kernel, "params", None) or ()
    for flag in ("do_not_specialize", "do_not_specialize_on_alignment"):
        names = [p.name for p in params if getattr(p, flag, False)]
        if names:
            out[flag] = names
    return out


def jit_source(fn: Any) -> tuple[list[str], int] | None:
    """The source lines a Triton function was made from, decorators included, and the line
    they start on (``JITCallable.raw_src``, ``.starting_line_number``, read when it was made;
    an interpreted function's ``jit_function``'s; 3.6.0, 3.9.0). None where it has none."""
    inner = getattr(fn, "jit_function", fn)
    lines = getattr(inner, "raw_src", None)
    start = getattr(inner, "starting_line_number", None)
    if isinstance(lines, list) and isinstance(start, int):
        return list(lines), start
    return None


def constexpr_params(kernel: Any) -> frozenset[str] | None:
    """Names of the constexpr parameters from ``JITFunction.params`` (``KernelParam.name``,
    ``.is_constexpr``; 3.6.0, 3.9.0); None when the kernel has no ``params``."""
    params = getattr(kernel, "params", None)
    if params is None:
        return None
    return frozenset(p.name for p in params if getattr(p, "is_constexpr", False))


def param_specs(jit_fn: Any) -> list[tuple[str, bool]]:
    """``(name, is_constexpr)`` of every ``KernelParam`` in order (3.6.0, 3.9.0)."""
    return [(p.name, bool(p.is_constexpr)) for p in jit_fn.params]


def is_signature_type(kind: str) -> bool:
    """Whether Triton compiles a parameter of signature type ``kind`` (``"*fp16"``, ``"i32"``,
    ``"tensordesc<fp16[64]>"``): ``triton.language.str_to_ty`` parses it (3.6.0, 3.9.0)."""
    import triton.language as tl

    try:
        tl.str_to_ty(kind, None)
    except Exception:
        return False
    return True


def has_pre_run_hooks(kernel: Any) -> bool:
    """Whether ``JITFunction.add_pre_run_hook`` installed hooks (``pre_run_hooks``; 3.6, 3.9)."""
    return bool(getattr(kernel, "pre_run_hooks", None))


@functools.cache
def launch_option_names() -> frozenset[str]:
    """Keywords a launch may pass besides the kernel's parameters: the fields of every
    installed backend's options dataclass (``CUDAOptions``, ``HIPOptions``: ``num_warps``,
    ``enable_fp_fusion``, ...), which ``JITFunction._pack_args`` accepts (3.6.0, 3.9.0).
    Empty when they cannot be found: then no keyword is rejected."""
    return frozenset().union(*backend_option_names().values())


@functools.cache
def backend_option_names() -> dict[str, frozenset[str]]:
    """Per installed backend, by the target name its compiler serves (``"cuda"``, ``"hip"``),
    the fields of its options dataclass: the launch keywords that backend's
    ``JITFunction._pack_args`` accepts besides the kernel's parameters (3.6.0, 3.9.0).
    Empty when they cannot be found."""
    try:
        from triton.backends import backends
    except ImportError:
        return {}
    found: dict[str, frozenset[str]] = {}
    for backend in backends.values():
        module = sys.modules.get(getattr(backend.compiler, "__module__", ""))
        names: set[str] = set()
        for obj in vars(module).values() if module is not None else ():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj):
                if obj.__name__.endswith("Options"):
                    names.update(f.name for f in dataclasses.fields(obj))
        target = _served_target(backend.compiler)
        if names and target:
            found[target] = frozenset(names)
    return found


def _served_target(compiler: Any) -> str | None:
    """``"cuda"`` or ``"hip"``: the target backend ``compiler`` (a ``BaseBackend`` class)
    compiles for, asked through its ``supports_target`` (3.6.0, 3.9.0)."""
    from triton.backends.compiler import GPUTarget

    probes = {"cuda": GPUTarget("cuda", 90, 32), "hip": GPUTarget("hip", "gfx942", 64)}
    for name, target in probes.items():
        try:
            if compiler.supports_target(target):
                return name
        except Exception:  # a backend that cannot answer for another vendor's target
            continue
    return None
