"""Launching a chosen variant: the generic path's last step, one ``Launcher`` per call key.

Each call of a site entry's ``Launcher`` goes one of these ways:

- **JIT**: ``kernel.run(*args, grid=grid, warmup=False, **kwargs, **options)``, exactly
  what ``kernel[grid](...)`` does (``__getitem__`` only wraps this call in a lambda). Used
  under the interpreter, for the first launch of every key, and whenever the direct path
  cannot be sure it is exact.
- **direct** (GPU; ``TUNEDSL_SAFE=direct`` turns it off): the first JIT launch of a
  key returns Triton's ``CompiledKernel``; later calls of that key call its launcher with
  the grid, the current stream and every parameter in order. This skips the JIT's per-call
  option parsing, specialization, cache-key string and launch-hook metadata. It is exact
  because the site's call key refines Triton's specialization of the keyed arguments
  (see ``Launcher``). Launch hooks (profilers) send calls back through the JIT.
  Triton's check that a kernel's global variables did not change since compilation runs
  on JIT launches only. A kernel with pre-run hooks (``add_pre_run_hook``, added before its
  first launch) always uses the JIT.
- **stored binary** (direct path, a key decided by tuning or a stored record): the first
  launch of a key loads the chosen variant's binary from tunedsl's store
  (``triton_binaries.py``) instead of compiling it, or, when there is none yet, stores the
  binary the JIT produced, so the next process skips ``triton.compile`` (and its
  ``triton_key()``, about 0.5 s per process). Within a process a binary is read and loaded
  onto a device once: later keys with the same binary share its ``CompiledKernel``.

The site's fast path for a repeated layout (``runtime/fused.py``) inlines the direct launch
from :meth:`Launcher.plan` and hands every other call back to the launcher.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.backends import compat
from tunedsl.backends.compat import interpreting, jit_run, launch_hooked
from tunedsl.backends.compile_temporaries import keep_temporaries_private
from tunedsl.backends.triton import KernelInfo, heuristic_launch_options, kernel_info
from tunedsl.model.grid_limits import check_grid, dims_of
from tunedsl.model.keys import is_tensor


def direct_launch_enabled() -> bool:
    """The direct launch (``TUNEDSL_SAFE=direct`` turns it off), and a Triton version whose
    launcher internals were tested (:func:`compat.internals_usable`; otherwise the JIT path, one warning)."""
    from tunedsl import knobs

    return knobs.direct_launch() and compat.internals_usable()


# Triton's interpreter keeps the grid of the running launch in module globals, so two
# threads interpreting at once corrupt each other; interpreted launches take turns.
INTERPRETER_LOCK = threading.RLock()
if hasattr(os, "register_at_fork"):
    # A child forked while another thread was inside a launch (a ``multiprocessing`` pool or
    # a DataLoader forked beside an inference thread) has no such thread: the lock would stay
    # held there and its every launch would wait forever. Made free in place, as ``threading``
    # does its own locks, since launchers keep a reference to this very lock.
    os.register_at_fork(after_in_child=INTERPRETER_LOCK._at_fork_reinit)  # type: ignore[attr-defined]


def launch_jit(
    kernel: Any, grid: tuple[int, ...], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Any:
    """``kernel[grid](*args, **kwargs)`` without building the ``__getitem__`` lambda."""
    if interpreting():
        with INTERPRETER_LOCK:
            return jit_run(kernel, grid, args, kwargs)
    return jit_run(kernel, grid, args, kwargs)


def stored_binaries_enabled() -> bool:
    from tunedsl import knobs

    return knobs.stored_binaries() and not interpreting() and compat.internals_usable()


def keyed_exactly(info: KernelInfo, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether the call key refines Triton's specialization of every argument: constexprs
    (keyed by value), tensors, ints, floats, bools and None. Anything else (tuples, tensor
    descriptors, ...) keeps Triton's dispatcher, which is exact whatever its key holds."""
    from tunedsl.model.hole import HOLE

    named = [(info.arg_names[i] if i < len(info.arg_names) else "", a) for i, a in enumerate(args)]
    named += list(kwargs.items())
    for name, value in named:
        if name in info.value_keyed or value is None:
            continue
        if value.__class__ in (int, float, bool) or value is HOLE or is_tensor(value):
            continue  # (a HOLE's value comes from bind: the direct path checks it per call)
        return False
    return True


@dataclass(frozen=True)
class DirectPlan:
    """What a direct launch of one call key does on one device, for code that inlines it
    (``runtime/fused.py``): when ``hooked_code`` (over ``runtime``) is false, the current
    device is ``device`` and ``bind`` gave no holes and keyword arguments equal to
    ``dyn0``, the launch is ``run(g0, g1, g2, get_stream(device), *middle, *args, *tail)``
    (with ``packs_args``: ``..., *middle, (*args, *tail))``)."""

    run: Callable[..., Any]
    middle: tuple[Any, ...]
    packs_args: bool
    tail: tuple[Any, ...]
    device: int
    get_device: Callable[[], int]
    get_stream: Callable[[int], int]
    dyn0: Mapping[str, Any]
    runtime: Any
    hooked_code: str  # compat.LAUNCH_HOOKED_CODE: format with rt=<name of runtime>
    # ``run`` takes a tensor's device address (an int) in place of the tensor: for callers
    # that have checked the tensor is on ``device`` (compat.LAUNCHER_TAKES_INT_POINTERS).
    int_pointers: bool


class Launcher:
    """Launch one call key's chosen variant: straight through its ``CompiledKernel`` where
    that is exact, else through Triton's JIT.

    One per site entry (call key); ``args``/``static_kwargs`` are a call of that key. The
    call key already refines Triton's specialization of the keyed arguments: dtypes,
    16-byte alignment (the key is built ``with_align``), int classes (==1, %16, 32/64-bit),
    constexpr values. What the key does not cover is checked per call: the
    configuration-dependent keyword arguments must be those of the first launch (a
    constexpr such as ``EVEN=n % $tile == 0`` may change; :func:`same_keywords`: the same
    objects, or plain values equal and of one class), there must be no
    configuration-dependent positional argument, no launch hook, and the device must be one
    this launcher has a ``CompiledKernel`` for. Anything else goes through the JIT.

    ``disabled``, every call through the JIT: from the start for a kernel that is not a
    ``JITFunction`` (the interpreter's, whose launches take turns on ``INTERPRETER_LOCK``),
    with the direct launch off (:func:`direct_launch_enabled`), or for a call whose key
    does not refine every argument's specialization (:func:`keyed_exactly`); from the first
    launch where the direct launch is not possible (pre-run hooks, a ``CompiledKernel`` of
    a form ``compat`` does not know). ``stored_binary``: the first launch loads (or else
    stores) the variant's binary.
    """

    __slots__ = (
        "compiled",
        "disabled",
        "dyn0",
        "get_device",
        "get_stream",
        "info",
        "kernel",
        "lock",
        "options",
        "runtime",
        "stored_binary",
        "tail_const",
        "tail_plan",
    )

    def __init__(
        self,
        kernel: Any,
        options: Mapping[str, Any],
        args: Sequence[Any] = (),
        static_kwargs: Mapping[str, Any] | None = None,
        stored_binary: bool = False,
    ) -> None:
        self.kernel = kernel
        self.options = dict(options)
        self.info = info = kernel_info(kernel)
        self.disabled = not (
            info.jit and direct_launch_enabled() and keyed_exactly(info, args, static_kwargs or {})
        )
        self.lock = INTERPRETER_LOCK if interpreting() else None
        self.compiled: dict[int, compat.LaunchParts] = {}
        self.dyn0: Mapping[str, Any] | None = None
        self.tail_plan: tuple[tuple[bool, Any], ...] = ()
        self.tail_const: tuple[Any, ...] | None = None
        self.stored_binary = stored_binary and not self.disabled and stored_binaries_enabled()
        # Bound at the first launch (GPU only): the driver's device/stream getters and
        # Triton's runtime knobs, so a call does no module-level lookups.
        self.get_device: Callable[[], int] | None = None
        self.get_stream: Callable[[int], int] | None = None
        self.runtime: Any = None

    def jit(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> Any:
        options = self.launch_options(static_kwargs, dyn_kwargs)
        if self.lock is not None:  # the interpreter's: it compiles nothing, and takes any grid
            dims = dims_of(grid)
            if dims is not None:  # refused as a GPU refuses it (the site names itself)
                check_grid(dims)
            with self.lock:
                return jit_run(self.kernel, grid, args, static_kwargs, dyn_kwargs, options)
        # Any JIT launch may compile (a first launch, a new specialization or keyword
        # argument of a launcher without the direct path): Triton's temporary files of a
        # compile go into a private directory (compile_temporaries.py).
        keep_temporaries_private()
        return jit_run(self.kernel, grid, args, static_kwargs, dyn_kwargs, options)

    def launch_options(
        self, static_kwargs: Mapping[str, Any], dyn_kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The options a launch passes: the decision's, with ``triton.Config``'s defaults
        for a kernel in ``@triton.heuristics`` (whose functions read them)."""
        passed = {**static_kwargs, **dyn_kwargs} if dyn_kwargs else static_kwargs
        return heuristic_launch_options(self.kernel, self.options, passed)

    def __call__(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
        holes: Any,
    ) -> None:
        if self.disabled or holes or not same_keywords(dyn_kwargs, self.dyn0):
            if self.dyn0 is None and not self.disabled and not holes:
                self._first_launch(grid, args, static_kwargs, dyn_kwargs)
            else:
                self.jit(grid, args, static_kwargs, dyn_kwargs)
            return
        device = self.get_device()  # type: ignore[misc]
        compiled = self.compiled.get(device)
        if compiled is None:
            self._first_launch(grid, args, static_kwargs, dyn_kwargs)
            return
        if launch_hooked(self.runtime):  # a profiler wants Triton's launch metadata
            self.jit(grid, args, static_kwargs, dyn_kwargs)
            return
        tail = self.tail_const
        if tail is None:
            tail = tuple(static_kwargs[v] if is_static else v for is_static, v in self.tail_plan)
        run, middle = compiled.run, compiled.middle
        # The launch's positional convention (compat.direct_launch_parts): the grid, the
        # stream, compat's middle part (function, metadata, no launch metadata or hooks),
        # then the kernel's arguments, as they are or packed in one tuple.
        grid3 = (grid[0], 1, 1) if len(grid) == 1 else _grid3(grid)
        stream = self.get_stream(device)  # type: ignore[misc]
        if compiled.packs_args:
            run(*grid3, stream, *middle, (*args, *tail))
        else:
            run(*grid3, stream, *middle, *args, *tail)

    def plan(self, static_kwargs: Mapping[str, Any] | None = None) -> DirectPlan | None:
        """This launcher's direct launch on the current device, once it has one, for calls
        whose static keyword arguments are ``static_kwargs`` (None: launch through
        ``__call__``)."""
        tail = self.tail_const
        if tail is None and static_kwargs is not None and not self.disabled:
            try:
                tail = tuple(static_kwargs[v] if st else v for st, v in self.tail_plan)
            except KeyError:  # not this launcher's keyword arguments
                return None
        if self.disabled or self.dyn0 is None or tail is None:
            return None
        if self.get_device is None or self.get_stream is None:
            return None
        device = self.get_device()
        compiled = self.compiled.get(device)
        if compiled is None:
            return None
        return DirectPlan(
            compiled.run,
            compiled.middle,
            compiled.packs_args,
            tail,
            device,
            self.get_device,
            self.get_stream,
            dict(self.dyn0),
            self.runtime,
            compat.LAUNCH_HOOKED_CODE,
            compat.LAUNCHER_TAKES_INT_POINTERS,
        )

    def _first_launch(
        self,
        grid: tuple[int, ...],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> None:
        if compat.has_pre_run_hooks(self.kernel):
            # JITFunction.add_pre_run_hook: the hooks run inside JITFunction.run, per launch.
            self.disabled = True
            self.jit(grid, args, static_kwargs, dyn_kwargs)
            return
        launch = None
        if self.stored_binary and not self.compiled:
            self.stored_binary = False  # one attempt per key (the first device)
            options = self.launch_options(static_kwargs, dyn_kwargs)
            launch = _launch_source(self.kernel, args, {**static_kwargs, **dyn_kwargs}, options)
            if launch is not None and self._load_stored(launch, args, static_kwargs, dyn_kwargs):
                self(grid, args, static_kwargs, dyn_kwargs, None)  # now the direct path
                return
        compiled = self.jit(grid, args, static_kwargs, dyn_kwargs)
        try:
            self._capture(compiled, args, static_kwargs, dyn_kwargs)
        except Exception:  # an unexpected Triton version: keep the JIT path
            self.disabled = True
        if launch is not None:
            _store(launch, compiled)
            _remember(launch, compiled)

    def _load_stored(
        self,
        launch: Any,
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> bool:
        """Capture the stored binary of this launch; False (state untouched) on any miss."""
        from tunedsl.backends import triton_binaries

        compiled = _in_process(launch)
        if compiled is None:
            compiled = triton_binaries.load(launch)
            if compiled is None:
                return False
        try:
            self._capture(compiled, args, static_kwargs, dyn_kwargs)
        except Exception as err:  # e.g. the device cannot load it: compile instead
            from tunedsl.warn import warn_once

            warn_once(
                f"binary-load:{launch.key}",
                f"cannot load the stored binary of {self.info.qualname} ({err}); compiling it",
            )
            self.compiled.clear()
            self.dyn0 = None
        if self.dyn0 is None:
            self.disabled = False  # as before the attempt: the JIT's compile is captured
            return False
        _remember(launch, compiled, int(self.get_device()))  # type: ignore[misc]  # bound by _capture
        return True

    def _capture(
        self,
        compiled: Any,
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        dyn_kwargs: Mapping[str, Any],
    ) -> None:
        parts = compat.direct_launch_parts(compiled)
        if parts is None:
            self.disabled = True
            return
        plan: list[tuple[bool, Any]] = []
        for name in self.info.arg_names[len(args) :]:
            if name in static_kwargs:
                plan.append((True, name))
            elif name in dyn_kwargs:
                plan.append((False, dyn_kwargs[name]))
            elif name in self.info.defaults:
                plan.append((False, self.info.defaults[name]))
            else:
                self.disabled = True  # Triton would have raised; never guess
                return
        self.tail_plan = tuple(plan)
        self.tail_const = None if any(s for s, _ in plan) else tuple(v for _, v in plan)
        self.get_device, self.get_stream = compat.device_and_stream()
        self.runtime = compat.runtime_knobs()
        self.compiled[self.get_device()] = parts
        self.dyn0 = dict(dyn_kwargs)  # last: it opens the direct path


# The classes of configuration-dependent keyword values compared by value: for these,
# equal and of one class is one specialization (and the value the launch passes).
_PLAIN = (int, float, bool, str)
_ABSENT = object()


def same_keywords(now: Mapping[str, Any], first: Mapping[str, Any] | None) -> bool:
    """Whether a call's configuration-dependent keyword arguments are the first launch's,
    whose values the direct path passes (:func:`same_value` each)."""
    if first is None or len(now) != len(first):
        return False
    for name, value in now.items():
        was = first.get(name, _ABSENT)
        if value is not was and not same_value(value, was):
            return False
    return True


def same_value(value: Any, was: Any) -> bool:
    """The same object, a plain value equal and of the same class (1, 1.0 and True are
    equal but specialized apart; a float's zero of the same sign), or a tuple of such.
    Anything else (a tensor or descriptor made per call) is never compared by ``==``,
    which a tensor answers elementwise."""
    if value is was:
        return True
    cls = value.__class__
    if cls is not was.__class__:
        return False
    if cls is tuple:
        return len(value) == len(was) and all(map(same_value, value, was))
    if cls is float:  # -0.0 == 0.0, but the launch passes the first launch's zero
        return value == was and math.copysign(1.0, value) == math.copysign(1.0, was)
    return cls in _PLAIN and bool(value == was)


def _grid3(grid: tuple[int, ...]) -> tuple[int, int, int]:
    n = len(grid)
    return (grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1)


def _launch_source(
    kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]
) -> Any:
    """The stored-binary key of this launch, or None (never raises: the JIT is the fallback)."""
    from tunedsl.backends import triton_binaries

    try:
        return triton_binaries.launch_source(kernel, args, kwargs, options)
    except Exception:
        return None


# Stored binaries this process loaded or compiled, by (binary key, device): the next key
# with the same binary (another size of one specialization: every new key a rule decides)
# shares its CompiledKernel, as the JIT's own table would, instead of reading, verifying and
# loading the module onto the device again.
_binaries: dict[tuple[str, int], Any] = {}
_binaries_lock = threading.Lock()


def _device() -> int | None:
    try:
        return int(compat.device_and_stream()[0]())
    except Exception:
        return None


def _in_process(launch: Any) -> Any:
    device = _device()
    with _binaries_lock:
        return None if device is None else _binaries.get((launch.key, device))


def _remember(launch: Any, compiled: Any, device: int | None = None) -> None:
    device = _device() if device is None else device
    if device is not None:
        with _binaries_lock:
            _binaries.setdefault((launch.key, device), compiled)


def _store(launch: Any, compiled: Any) -> None:
    from tunedsl.backends import triton_binaries

    try:
        triton_binaries.store(launch, compat.resolve(compiled))
    except Exception:  # storing is an optimisation for later processes, never an error
        pass
