"""The compile pool's async split, Triton's hash of itself and the warm-up of its
caches, shared-memory limits, the launcher built ahead (see ``compat/__init__.py``)."""

from __future__ import annotations

import functools
import inspect
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tunedsl.backends.compat.cache import check_triton_cache
from tunedsl.backends.compat.driver_gate import active_driver
from tunedsl.backends.compat.launch import _driver_unstarted_on_cuda, current_target
from tunedsl.errors import UsageError

# -- the compile pool's async split -----------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _keyed_mode_class() -> Any:
    from triton.runtime import _async_compile

    class KeyedMode(_async_compile.AsyncCompileMode):  # type: ignore[misc]
        """Triton's AsyncCompileMode that remembers the cache key of the compile it gets."""

        cache_key: str | None = None

        def submit(self, key: Any, *rest: Any) -> Any:
            self.cache_key = str(key)
            return super().submit(key, *rest)

    return KeyedMode


def keyed_async_mode(executor: Any) -> Any:
    """An ``AsyncCompileMode`` over ``executor`` that records the submitted cache key
    (``mode.cache_key``). ``triton.runtime._async_compile``: 3.6.0 and 3.9.0 submit
    ``(key, compile_fn)`` once per compiling ``warmup``."""
    return _keyed_mode_class()(executor)


@contextmanager
def async_compile_mode(mode: Any) -> Iterator[None]:
    """Make ``mode`` Triton's active async-compile mode in this context (3.6.0, 3.9.0)."""
    from triton.runtime import _async_compile

    token = _async_compile.active_mode.set(mode)
    try:
        yield
    finally:
        _async_compile.active_mode.reset(token)


def triton_key() -> str:
    """Triton's hash of its own sources and shared library, computed once per process
    (``triton.runtime.cache.triton_key``, an ``lru_cache``; 3.6.0, 3.9.0)."""
    from triton.runtime import cache

    return str(cache.triton_key())


def use_triton_key(key: str) -> None:
    """In a compile worker: answer ``triton_key()`` with ``key``, the tuning process's,
    instead of hashing Triton again. A forked worker runs the same Triton files, and the
    parent checks each load against the worker's hash. Triton's own warm-up pool does the
    same (``triton._compile_warmup_pool._initialize_preload_worker``, 3.9.0); 3.6.0 and
    3.9.0 look the function up in ``triton.runtime.cache`` at each ``get_cache_key``."""
    from triton.runtime import cache

    if getattr(cache.triton_key, "tunedsl_key", None) == key:
        return

    def known() -> str:
        return key

    known.tunedsl_key = key  # type: ignore[attr-defined]
    cache.triton_key = known


_warming_lock = threading.Lock()
_warming: dict[str, threading.Thread] = {}  # "key", "utils": started by start_warming


def start_warming() -> None:
    """Start, on background threads and once per process, what a first compile waits for:
    :func:`triton_key` (a hash of Triton's sources and shared library, 0.43 s on the H100
    machine) and, where Triton's CUDA driver has not started, its C utilities (built by
    the host compiler into Triton's cache on an empty cache, 0.37-0.42 s:
    ``triton.backends.nvidia.driver.CudaUtils``, a singleton whose construction touches no
    driver state; 3.6.0, 3.9.0). :func:`warm_compile_caches` starts them and waits for
    both, so they overlap each other and the backend's hash. Errors are left for the
    caller that needs the result: it runs the same step again and meets them there."""
    with _warming_lock:
        if _warming:
            return
        _warming["key"] = _in_background(triton_key, "tunedsl-triton-key")
        if _driver_unstarted_on_cuda() and _triton_cache_trusted():
            _warming["utils"] = _in_background(_build_cuda_utils, "tunedsl-cuda-utils")


def _in_background(step: Callable[[], Any], name: str) -> threading.Thread:
    def run() -> None:
        try:
            step()
        except BaseException:  # the caller that needs it meets it again
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def _triton_cache_trusted() -> bool:
    """Whether Triton's cache directory may hold its C utilities (else the driver's first
    use, through ``active_driver``, raises ``check_triton_cache``'s error)."""
    try:
        check_triton_cache()
    except UsageError:
        return False
    return True


def _build_cuda_utils() -> None:
    from triton.backends.nvidia.driver import CudaUtils

    CudaUtils()


def warm_compile_caches(target: Any | None) -> None:
    """Compute what every compile in a process computes once (:func:`triton_key`, Triton's
    driver and the backend's hash with the ptxas version, for ``target`` or the current
    device's), before this process's compiles start; compile workers get the key with each
    job (:func:`use_triton_key`). The hash and the C utilities run on threads
    (:func:`start_warming`); the driver starts once its C utilities are built."""
    from triton.compiler.compiler import make_backend

    start_warming()
    utils = _warming.get("utils")
    if target is None and utils is not None:  # the driver starts here: its utilities first
        utils.join()
    make_backend(current_target() if target is None else target).hash()
    _warming["key"].join()
    triton_key()  # the thread's result, or the error it met, raised here


@functools.lru_cache(maxsize=8)
def ptxas_gpu_names(arch: int) -> frozenset[str] | None:
    """The ``--gpu-name`` values (``sm_90``, ``sm_90a``...) that the ``ptxas`` Triton runs for
    CUDA ``arch`` accepts, read from its ``--help``; None where that cannot be read (no such
    tool, another help text). ``triton.backends.nvidia.compiler.get_ptxas``: 3.6.0 takes no
    argument, 3.9.0 the arch."""
    import re
    import subprocess

    try:
        from triton.backends.nvidia import compiler

        try:
            tool = compiler.get_ptxas(arch)
        except TypeError:
            tool = compiler.get_ptxas()
        shown = subprocess.run(
            [tool.path, "--help"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except Exception:
        return None
    names = frozenset(re.findall(r"'(sm_\d+[a-z]?)'", shown))
    return names or None


def max_shared_memory(device: int | None) -> int:
    """The shared memory a kernel may use on CUDA device ``device`` (None: the current one),
    as Triton's loader checks it (``max_shared_mem``:
    ``driver.active.utils.get_device_properties``; 3.6, 3.9)."""
    active = active_driver()
    if device is None:
        device = active.get_current_device()
    return int(active.utils.get_device_properties(device)["max_shared_mem"])


def shared_memory_overrun(err: BaseException) -> tuple[int, int] | None:
    """(required, limit) where ``err`` is Triton's ``OutOfResources`` for shared memory."""
    from triton.runtime.errors import OutOfResources

    if isinstance(err, OutOfResources) and getattr(err, "name", None) == "shared memory":
        return int(err.required), int(err.limit)
    return None


def is_build_failure(err: BaseException) -> bool:
    """Whether ``err``, raised by a launch, says the configuration cannot be built or run
    there: a compile error (``CompilationError``, a ``tl.static_assert`` among them),
    ``OutOfResources``, ``PTXASError`` (3.6, 3.9); under the interpreter, an ``InterpreterError``
    around one of those or an ``AssertionError`` (a ``tl.static_assert`` as it runs). Anything
    else (an exception a signal handler raised, the user's own) is the call's, not the
    configuration's."""
    from triton.compiler.errors import CompilationError
    from triton.runtime import errors

    built = (CompilationError, errors.OutOfResources, getattr(errors, "PTXASError", ()))
    if isinstance(err, built):
        return True
    inner = err.__cause__ if isinstance(err, errors.InterpreterError) else None
    return isinstance(inner, (AssertionError, *built))


_shared_limit: list[int] = []  # the compiling process's limit: stop_over_shared_memory
_shared_check_installed: list[bool] = []


def stop_over_shared_memory(limit: int | None) -> None:
    """From now on in this process, an NVIDIA compile whose kernel needs more than ``limit``
    bytes of shared memory raises ``OutOfResources`` after its LLVM-IR stage (None: no
    check), instead of running LLVM's code generation and ptxas for a kernel that no load
    would accept: the loader raises the same error on the same condition, ``metadata.shared
    > max_shared_mem`` (``CompiledKernel._init_handles``).

    For forked compile workers alone: it wraps the ``ptx`` stage that
    ``CUDABackend.add_stages`` adds (3.6, 3.9), process-wide. The cache key does not change
    (Triton's stage-inspection hook would add to it); a kernel stopped here writes no
    metadata, so Triton's cache has no entry for it."""
    _shared_limit[:] = [] if limit is None else [int(limit)]
    if limit is None or _shared_check_installed:
        return
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime.errors import OutOfResources

    add_stages = CUDABackend.add_stages

    def add_stages_checked(self: Any, stages: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        result = add_stages(self, stages, *args, **kwargs)
        make_ptx = stages.get("ptx")
        if make_ptx is None:
            return result

        def checked(src: Any, metadata: dict[str, Any]) -> Any:
            shared = metadata.get("shared")
            if _shared_limit and isinstance(shared, int) and shared > _shared_limit[0]:
                raise OutOfResources(shared, _shared_limit[0], "shared memory")
            return make_ptx(src, metadata)

        stages["ptx"] = checked
        return result

    CUDABackend.add_stages = add_stages_checked
    _shared_check_installed.append(True)


def out_of_resources(required: int, limit: int) -> Exception:
    """Triton's own error for a kernel over the shared-memory limit (as its loader raises)."""
    from triton.runtime.errors import OutOfResources

    return OutOfResources(required, limit, "shared memory")


def prebuild_launcher(
    jit_fn: Any, signature: Mapping[str, Any], constexprs: Mapping[Any, Any]
) -> bool:
    """Build a kernel's per-signature C launcher now, into Triton's cache, where the first
    module load of any of its configurations finds it; False where there is none to build.

    Triton 3.6 generates C for each kernel signature and compiles it with the host compiler
    on the kernel's first load (``CudaLauncher.__init__``: ``make_launcher(constants,
    signature, tensordesc_meta)`` then ``compile_module_from_src(name="__triton_launcher")``,
    about 0.7 s on the H100 machine), after the first configuration's compile; built here
    beside the compiles, it is off that path. 3.9.0's launcher is generic: nothing to build.
    The source does not depend on the constexprs' values, only on which arguments are
    constant; a kernel with tensor descriptors gets its own at load (``tensordesc_meta``)."""
    from triton.backends.nvidia import driver as nv

    check_triton_cache()  # it is built there, then loaded from there
    make = getattr(nv, "make_launcher", None)
    build = getattr(nv, "compile_module_from_src", None)
    if make is None or build is None:
        return False
    if list(inspect.signature(make).parameters) != ["constants", "signature", "tensordesc_meta"]:
        return False
    names = list(jit_fn.arg_names)
    constants = {(names.index(k),) if isinstance(k, str) else k: v for k, v in constexprs.items()}
    source = make(constants, dict(signature), None)
    build(
        src=source,
        name="__triton_launcher",
        library_dirs=nv.library_dirs(),
        include_dirs=nv.include_dirs,
        libraries=nv.libraries,
    )
    return True


def free_jit_locks(kernels: Iterable[Any]) -> None:
    """In a process just forked (one thread): give each ``JITFunction`` among ``kernels``
    (or under their wrappers), and every one they reach through their globals, a new
    ``_hash_lock`` (through the modules they read too: ``tl.sum``). That re-entrant lock guards ``cache_key`` (3.6.0, 3.9.0); a parent
    thread reading a kernel's key as the fork happened leaves it held by a thread the
    child does not have, and the child's first compile of that kernel would wait for it
    forever."""
    from triton.runtime.jit import JITFunction

    seen: set[int] = set()
    stack = list(kernels)
    while stack:
        obj = stack.pop()
        for _ in range(8):  # down Autotuner/Heuristics-style wrappers to the JITFunction
            if isinstance(obj, JITFunction) or getattr(obj, "fn", None) is None:
                break
            obj = obj.fn
        if not isinstance(obj, JITFunction) or id(obj) in seen:
            continue
        seen.add(id(obj))
        obj._hash_lock = threading.RLock()
        scope = getattr(obj.fn, "__globals__", None) or {}
        for value in list(scope.values()):
            if isinstance(value, JITFunction):
                stack.append(value)
            elif isinstance(value, types.ModuleType) and id(value) not in seen:
                seen.add(id(value))  # each module read once: tl.sum, lib.helper
                stack.extend(v for v in list(vars(value).values()) if isinstance(v, JITFunction))


def with_heuristics(
    kernel: Any,
    args: Iterable[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    grid: Any = None,
) -> dict[str, Any]:
    """``kwargs`` with the values the ``@triton.heuristics`` around ``kernel`` compute for
    this call, as ``Heuristics.run`` sets them before the JIT runs: outermost first, each
    function given the arguments by name, the keyword arguments, the launch options and
    the launch's ``grid`` (``kernel[grid](...)`` passes it to ``run``; ``Heuristics.values``,
    ``.arg_names``, ``.fn``; 3.6.0, 3.9.0). A compile of the bare ``JITFunction`` needs
    them: they are its parameters. The values a ``@triton.autotune`` around it sets
    (``Autotuner.configs``, each ``Config.kwargs``) are its own choice at a launch, so no
    compile ahead can give them: a ``UsageError`` names them and the fix."""
    inner = getattr(kernel, "fn", None)
    if inner is None or getattr(inner, "fn", None) is None:
        return dict(kwargs)  # a bare JIT function (its ``fn`` is Python's): nothing wraps it
    from triton.runtime.autotuner import Autotuner, Heuristics

    out = dict(kwargs)
    args = tuple(args)
    launch = dict(options) if grid is None else {**options, "grid": grid}
    for _ in range(8):  # down Autotuner/Heuristics-style wrappers to the JITFunction
        if isinstance(kernel, Heuristics):
            named = dict(zip(kernel.arg_names, args, strict=False))
            for name, heuristic in kernel.values.items():
                out[name] = heuristic({**named, **out, **launch})
        elif isinstance(kernel, Autotuner):
            named = dict(zip(kernel.arg_names, args, strict=False))
            chosen = {k for c in kernel.configs for k in c.kwargs} - set(named) - set(out)
            if chosen:
                from tunedsl.errors import UsageError

                raise UsageError(
                    "the kernel is wrapped in @triton.autotune, whose configurations set "
                    f"{', '.join(f'`{k}`' for k in sorted(chosen))}: Triton chooses them at "
                    "its launch, so no compile ahead of it can give them; remove "
                    "@triton.autotune and put its configurations in space= (autotune(...) "
                    "tunes them)"
                )
        kernel = getattr(kernel, "fn", None)
        if kernel is None:
            break
    return out


# -- where a compile's temporary files go ------------------------------------------------------

# The modules whose ``make_cubin`` / ``make_hsaco`` name their temporary files through their
# module-level ``tempfile`` (``NamedTemporaryFile``; 3.6.0 to 3.9.0).
_BACKEND_COMPILERS = ("triton.backends.nvidia.compiler", "triton.backends.amd.compiler")


def route_compile_temporaries(standin: Any) -> None:
    """Make ``standin`` the ``tempfile`` of Triton's backend compilers, where it is still
    Python's: every compile in this process, tunedsl's or not, then names its temporary
    files through it."""
    import importlib
    import tempfile

    for name in _BACKEND_COMPILERS:
        try:
            module = importlib.import_module(name)
        except Exception:  # a backend this Triton lacks, or one that cannot load here
            continue
        if getattr(module, "tempfile", None) is tempfile:
            module.tempfile = standin  # type: ignore[attr-defined]
