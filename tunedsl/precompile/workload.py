"""Precompile workloads: ``@workload`` functions, precompile mode, and the precompile site.

The analogue of Julia PrecompileTools' ``@compile_workload``: a kernel script declares

    from tunedsl import workload

    @workload
    def warm():                     # never called on import
        add(torch.randn(4096, device="cuda"), ...)

``tunedsl precompile`` imports the script (with ``__name__ != "__main__"``) and calls every
registered workload inside :func:`precompile_mode`, which is the entering thread's (its
``contextvars`` context's): there a site's miss goes to :class:`PrecompileSite`
(``runtime/site_wrap.py``), which compiles every configuration of its space for the
signature it sees, in parallel (``tunedsl.backends.compile_pool``), instead of launching,
and returns ``None``; with ``tune=True`` the real site tunes (compiling in parallel too) and
writes the record. Other threads' calls, of the same sites too, tune and launch as usual.

Pure Python: torch and triton are imported only when a site compiles.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, overload

from tunedsl.model.config import Config
from tunedsl.model.variant import Kernel, Variant
from tunedsl.precompile.script_import import import_script
from tunedsl.runtime import site_wrap
from tunedsl.runtime.miss import Bind, Call, Lazy

__all__ = [
    "PrecompileSession",
    "PrecompileSite",
    "Workload",
    "active_session",
    "import_script",
    "precompile_active",
    "precompile_device",
    "precompile_mode",
    "registered_workloads",
    "workload",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Workload:
    """A registered workload function and where it was defined."""

    fn: Callable[[], Any]
    module: str
    qualname: str
    filename: str
    line: int

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qualname}"


_workloads: list[Workload] = []
_registry_lock = threading.Lock()


@overload
def workload(fn: F) -> F: ...
@overload
def workload(fn: None = None) -> Callable[[F], F]: ...


def workload(fn: Any = None) -> Any:
    """Register ``fn`` as a precompile workload; return it unchanged (it is never called here).

    Use as ``@workload`` or ``@workload()``.
    """
    if fn is None:
        return workload
    if not callable(fn):
        raise TypeError(
            f"@tunedsl.workload decorates a function, got {fn!r}; write `@workload` above a def"
        )
    code = getattr(fn, "__code__", None)
    entry = Workload(
        fn=fn,
        module=getattr(fn, "__module__", "?") or "?",
        qualname=getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn))),
        filename=code.co_filename if code is not None else "<unknown>",
        line=code.co_firstlineno if code is not None else 0,
    )
    with _registry_lock:
        # Re-importing a module re-registers: keep one entry per (module, qualname).
        before = [w for w in _workloads if (w.module, w.qualname) == (entry.module, entry.qualname)]
        _workloads[:] = [w for w in _workloads if w not in before]
        _workloads.append(entry)
    if before and _defined_twice(before[0], entry):
        _said_twice(before[0], entry)
    return fn


def _defined_twice(old: Workload, new: Workload) -> bool:
    """Whether ``new`` is a second definition of ``old``'s name in one run of one file (not
    the file imported again, whose module is new, nor a notebook cell run again, whose
    code has another file name)."""
    scope = getattr(old.fn, "__globals__", None)
    return (
        scope is not None
        and scope is getattr(new.fn, "__globals__", None)
        and old.filename == new.filename
        and old.line != new.line
    )


def _said_twice(old: Workload, new: Workload) -> None:
    from tunedsl.warn import warn_once

    warn_once(
        f"workload-twice:{new.filename}:{old.line}:{new.line}",
        f"@tunedsl.workload {new.qualname} is defined twice in {new.filename}, at lines "
        f"{old.line} and {new.line}: workloads are found by name, so only the one at line "
        f"{new.line} is swept and precompiled, never the one at line {old.line}; rename one "
        "of them",
        UserWarning,
        stacklevel="user",
    )


def registered_workloads(module: str | None = None) -> list[Workload]:
    """Workloads registered so far (of one module, if given), in registration order."""
    with _registry_lock:
        return [w for w in _workloads if module is None or w.module == module]


@dataclass
class SiteReport:
    """What precompiling one (site, signature) did."""

    site: str
    key: object  # the call key (a record's readable key on replay), for the report
    compiled: int = 0
    cached: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    interpreted: int = 0  # configurations under TRITON_INTERPRET=1: nothing to compile
    tuned: bool = False
    hint: str | None = None  # the likely cause of its failures, and the fix


@dataclass
class PrecompileSession:
    """State of one precompile run: options and counters (thread-safe updates)."""

    target: str | None = None
    tune: bool = False
    workers: int | None = None
    timeout_s: float | None = None
    # Called after each configuration: (site, config, outcome) with outcome one of
    # "compiled", "cached", "failed", "interpreted"; with tune, after each key: "tuned", or
    # "cached" when a stored record decided it.
    on_result: Callable[[str, Config, str], None] | None = None
    # With tune on several GPUs (one process each): True for the keys this process tunes
    # (``gpu_shards.ClaimDir``); the other keys are skipped, another process tunes them.
    shard: Callable[[str, Hashable], bool] | None = None
    skipped: int = 0  # the calls of keys another process tunes: not launched here
    calls: int = 0  # site calls seen: a workload that makes none compiled nothing
    reports: list[SiteReport] = field(default_factory=list)
    _seen: set[tuple[int, Hashable]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def totals(self) -> dict[str, int]:
        out = {"compiled": 0, "cached": 0, "failed": 0, "interpreted": 0, "tuned": 0}
        for r in self.reports:
            out["compiled"] += r.compiled
            out["cached"] += r.cached
            out["failed"] += len(r.failed)
            out["interpreted"] += r.interpreted
            out["tuned"] += int(r.tuned)
        return out

    def claim(self, site: object, key: Hashable) -> bool:
        """True the first time this (site, key) is seen in the session."""
        with self._lock:
            marker = (id(site), key)
            if marker in self._seen:
                return False
            self._seen.add(marker)
            return True

    def add(self, report: SiteReport) -> None:
        """Count one (site, signature)'s report in the session."""
        with self._lock:
            self.reports.append(report)

    def emit(self, site: str, config: Config, outcome: str) -> None:
        """Tell ``on_result`` what became of one configuration."""
        if self.on_result is not None:
            self.on_result(site, config, outcome)


#: The session of :func:`precompile_mode` in the context that entered it (else None).
_active: ContextVar[PrecompileSession | None] = ContextVar("tunedsl_precompile", default=None)


def precompile_active() -> bool:
    """True inside :func:`precompile_mode`, in the context (thread) that entered it."""
    return _active.get() is not None


def active_session() -> PrecompileSession | None:
    """This context's precompile session (None outside :func:`precompile_mode`)."""
    return _active.get()


def _miss(site: InnerSite, *call: Any) -> Any:
    """A runtime site's miss in precompile mode (``site_wrap.miss_hook``)."""
    return PrecompileSite(site)(*call)


@contextmanager
def precompile_mode(
    target: str | None = None,
    tune: bool = False,
    *,
    workers: int | None = None,
    timeout_s: float | None = None,
    on_result: Callable[[str, Config, str], None] | None = None,
    shard: Callable[[str, Hashable], bool] | None = None,
) -> Iterator[PrecompileSession]:
    """Within the block, site calls compile every configuration instead of launching.

    ``target`` (``"cuda:90"``) cross-compiles without a GPU; ``tune=True`` also tunes and
    writes records (needs a GPU); ``shard(site, key)`` False skips a key (another GPU's
    process tunes it). Not nestable; this thread's (context's) only."""
    if target is not None:
        from tunedsl.backends.triton_compile import parse_target

        parse_target(target)  # a bad target fails here, before any import runs
    session = PrecompileSession(
        target=target,
        tune=tune,
        workers=workers,
        timeout_s=timeout_s,
        on_result=on_result,
        shard=shard,
    )
    if _active.get() is not None:
        raise RuntimeError("precompile_mode() is already active; it does not nest")
    from tunedsl.store.rules import measuring

    token = _active.set(session)
    try:
        # with tune, every key is tuned: no rule decides one
        with site_wrap.handled_by(_miss), measuring() if tune else nullcontext():
            yield session
    finally:
        _active.reset(token)


class InnerSite(Protocol):
    """What a precompile site wraps (``runtime.site.Site``, or a stand-in in tests): called
    as the expansion calls a site, and listing a call's variants without launching."""

    def __call__(
        self,
        kernel: Kernel,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        bind: Bind,
        key: Any,
        lazy: Lazy | None,
        /,
    ) -> Any: ...

    def variants(
        self,
        kernel: Kernel,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        bind: Bind,
        key: Any,
        lazy: Lazy | None,
        /,
    ) -> tuple[Hashable, list[Variant]]: ...


class PrecompileSite:
    """Wraps a runtime site; in this thread's precompile mode its calls (a runtime site's
    misses, ``_miss``) compile instead of launching.

    ``inner`` is the runtime's site (``InnerSite``): callable as ``inner(kernel, args,
    kwargs, bind, key, lazy)`` and offering ``inner.variants(kernel, args, kwargs, bind,
    key, lazy) -> (key_tuple, [Variant])``; with a ``settings(lazy)`` method (the runtime's
    site has one) a cross-compile translates launch hints for the target.
    """

    def __init__(self, inner: InnerSite) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # everything else is the real site's
        return getattr(self.inner, name)

    @property
    def label(self) -> str:
        for attr in ("label", "name"):
            value = getattr(self.inner, attr, None)
            if isinstance(value, str):
                return value
        filename = getattr(self.inner, "filename", None)
        line = getattr(self.inner, "line", None)
        return f"{filename}:{line}" if filename else repr(self.inner)

    def __call__(
        self,
        kernel: Kernel,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        bind: Bind,
        key: Any,
        lazy: Lazy | None,
    ) -> Any:
        session = _active.get()
        if session is None:  # another thread's call, or one after the mode
            return self.inner(kernel, args, kwargs, bind, key, lazy)
        call = Call(kernel, args, kwargs, bind, key, lazy)
        with session._lock:
            session.calls += 1
        if session.tune:
            return self._tune(call, session)
        self._compile(call, session)
        return None

    # What the expansion calls, ``site.launch(...)``: this wrapper's call, not the inner
    # site's fast launch (which __getattr__ would hand out).
    launch = __call__

    def _tune(self, call: Call, session: PrecompileSession) -> Any:
        """The real site tunes (compiling in parallel) and writes the record; a key that
        fails to tune is reported by site and key before the workload stops."""
        if session.shard is not None and not session.shard(self.label, self._key(call)):
            session.skipped += 1
            return None  # another GPU's process tunes this key
        from tunedsl.backends.compile_limit import compile_limit

        try:  # the site's own call decides the miss (no precompile handler: it tunes)
            with compile_limit(session.timeout_s), site_wrap.handled_by(None):
                result = self.inner(*call.positional())
        except Exception as err:
            lines = str(err).strip().splitlines()
            why = f"{type(err).__name__}: {lines[-1] if lines else ''}"
            key = call.key if call.key is not None else self._key(call)  # name the key
            session.add(SiteReport(self.label, key, failed={"tune": why}))
            raise
        source = getattr(result, "source", "tuned")
        if session.claim(self.inner, (call.key, getattr(result, "digest", None))):
            tuned = source == "tuned"  # else a stored record decided: warm already
            session.add(SiteReport(self.label, call.key, cached=int(not tuned), tuned=tuned))
            config = getattr(result, "config", None)
            if isinstance(config, Config):
                session.emit(self.label, config, "tuned" if tuned else "cached")
        return result

    def _key(self, call: Call) -> Hashable:
        """The site's call key of ``call`` (shapes, dtypes, ``key=``), as it looks records up."""
        call_key = getattr(self.inner, "call_key", None)
        if call_key is None:
            return call.key  # type: ignore[no-any-return]
        return call_key(call.kernel, call.args, call.static_kwargs, call.key)  # type: ignore[no-any-return]

    def _compile(self, call: Call, session: PrecompileSession) -> None:
        """Compile every variant of the call's signature (once per signature and run)."""
        key_tuple, variants = self.inner.variants(*call.positional())
        if not session.claim(self.inner, key_tuple):
            return  # this signature was already compiled in this run
        reads: frozenset[str] = getattr(self.inner, "prune_reads", frozenset())  # now known
        report = SiteReport(self.label, _readable_key(call, key_tuple, reads))
        if session.target is not None:
            variants = self._for_target(variants, call.lazy, session.target, report)
        precompile_variants(self.label, call.kernel, key_tuple, variants, session, report)
        session.add(report)

    def _for_target(
        self, variants: list[Variant], lazy: Lazy | None, target: str, report: SiteReport
    ) -> list[Variant]:
        """Launch options translated for the named target, not for this machine.

        The site derives options from the local device (none at all under the
        interpreter); a cross-compile needs the target's (num_warps, occupancy → maxnreg).
        """
        settings_of = getattr(self.inner, "settings", None)
        if settings_of is None:  # a site without hint settings: options are already final
            return variants
        import dataclasses

        from tunedsl.backends.triton_compile import cross_target_facts
        from tunedsl.model.hints import InfeasibleConfig, launch_options

        hints = settings_of(lazy).hints
        facts = cross_target_facts(target)
        out = []
        for v in variants:
            try:
                options = launch_options(v.config, hints, facts)
            except InfeasibleConfig as err:
                report.failed[str(v.config)] = f"infeasible on {target}: {err}"
                continue
            out.append(dataclasses.replace(v, options=options))
        return out


def _readable_key(call: Call, fallback: Hashable, prune_reads: frozenset[str]) -> object:
    """The call's key as a record shows it (arguments by name, in parameter order; what
    prune reads), for the report; ``fallback`` for a kernel Triton cannot describe."""
    from tunedsl.backends import triton as bt
    from tunedsl.model import keys, prune_keys
    from tunedsl.model.hole import HOLE

    try:
        info = bt.kernel_info(call.kernel)
        user_key = None if call.key is None else keys.hashable_user_key(call.key)
        args, kwargs = call.args, call.static_kwargs
        out = keys.readable_key(
            info.arg_names, args, kwargs, user_key, info.value_keyed, HOLE, info.defaults
        )
    except Exception:  # only a label: never fail a precompile over it
        return fallback
    named = out["args"]
    order = [n for n in info.arg_names if n in named] + [
        n for n in named if n not in info.arg_names
    ]
    out["args"] = {n: named[n] for n in order}
    if prune_reads:
        out["prune"] = prune_keys.readable_prune(info.arg_names, args, kwargs, prune_reads)
    return out


def precompile_variants(
    label: str,
    kernel: Kernel,
    key: Hashable,
    variants: list[Variant],
    session: PrecompileSession,
    report: SiteReport | None = None,
) -> SiteReport:
    """Compile ``variants`` in parallel for the session's target; count what happened."""
    from tunedsl.backends.compile_pool import CompileJob, compile_stream
    from tunedsl.backends.process_compile import variant_compiler
    from tunedsl.backends.triton_compile import interpreting, is_cache_hit

    report = report if report is not None else SiteReport(label, key)
    if session.target is None and interpreting():
        for v in variants:
            report.interpreted += 1
            session.emit(label, v.config, "interpreted")
        return report

    compile_variant = variant_compiler(
        kernel, len(variants), target=session.target, workers=session.workers
    )

    def job_for(v: Variant) -> CompileJob:
        def run() -> object:
            return compile_variant(v.args, v.kwargs, v.options, v.grid)

        return CompileJob(v.config, run)

    jobs = [job_for(v) for v in variants]
    for job, result in compile_stream(jobs, workers=session.workers, timeout_s=session.timeout_s):
        if isinstance(result, BaseException):
            report.failed[str(job.config)] = f"{type(result).__name__}: {result}".strip()
            session.emit(label, job.config, "failed")
        elif is_cache_hit(result):
            report.cached += 1
            session.emit(label, job.config, "cached")
        else:
            report.compiled += 1
            session.emit(label, job.config, "compiled")
    if report.failed and not report.hint:
        from tunedsl.runtime.mistakes import runtime_field_hint

        report.hint = runtime_field_hint(kernel, variants)
    return report


def precompile_device() -> str:
    """``"cuda"`` when a GPU is present, else ``"cpu"``: where a workload should put tensors.

    In precompile mode tensors only convey dtype, rank and alignment, so a workload that
    allocates on this device also works for ``tunedsl precompile --target cuda:90`` on a
    machine without a GPU.
    """
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
