"""The host compile stage of multi-GPU tuning (backends layer): each configuration compiled
once, on all the host's cores, while the GPUs measure.

A binary compiled for one GPU model serves every GPU of that model, so ``HostCompiler``
compiles each candidate once in the tuning process, on the compile pool's threads
(``backends/compile_pool.py``; ``TUNEDSL_COMPILE_WORKERS``, default all CPUs), into Triton's
cache, where the measurement workers' own compiles of it are cache hits. ``submit`` starts a
batch in the background (``MultiDeviceMeasurer.prefetch`` submits the search's next batch
while the GPUs measure the current one); ``on_done(config, why)`` is called as each one
finishes (``why``: None, or why it failed), and the measurer hands it to the first free GPU.
A configuration that fails to compile fails here, without a worker.

``target``: compile for a named target (``"cuda:90"``, a cross-compile) instead of the GPU
of the variants' arguments; that is what a host without the GPU does (the tests use it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedsl.backends.compile_ahead import announced_order
from tunedsl.backends.compile_limit import compile_limit_s
from tunedsl.backends.compile_pool import start_drained_thread
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant

__all__ = ["HostCompiler", "Split", "WorkerSplit"]

_PENDING = object()  # a configuration being compiled


@dataclass
class WorkerSplit:
    """Where one measurement worker's time went (seconds since the measurer was made).

    ``start_s``: starting the process and setting it up (importing torch and Triton, the
    inputs copied), overlapping the host's first compiles; ``idle_s``: waiting for a
    compiled configuration; ``load_s``/``time_s``: the worker's own seconds loading (a
    Triton cache hit, the module load, verification) and timing the opening repetitions;
    ``ipc_s``: the rest of its requests' round trips (pipe, pickling, this process's GIL);
    ``race_s``: the race's later samples on this GPU (taken by the search's thread, waiting
    included); ``opened``: configurations it opened."""

    device: int | None = None
    start_s: float = 0.0
    idle_s: float = 0.0
    load_s: float = 0.0
    time_s: float = 0.0
    ipc_s: float = 0.0
    race_s: float = 0.0
    opened: int = 0


@dataclass
class Split:
    """Where a multi-device tuning's time went (``benchmarks/bench_multi_gpu.py`` prints it).

    The host: ``compile_wall_s``: seconds while at least one host compile ran;
    ``compile_cpu_s``: the sum of every compile's seconds (over the pool's threads). Each
    GPU: ``measure_s``, seconds its worker was busy opening configurations (load, time and
    round trips; later race samples not included), and ``workers``, the detail. The caller
    (the search's thread): ``setup_s`` making the measurer (inputs copied and pickled once
    per worker), ``first_s`` from the first ``prepare`` to the first configuration opened,
    ``wait_s`` waiting in ``prepare`` for openings, ``rounds_s`` the race's later samples
    before the final race, ``final_s`` the leaders' final race on the caller's GPU."""

    compile_wall_s: float = 0.0
    compile_cpu_s: float = 0.0
    measure_s: list[float] = field(default_factory=list)
    workers: list[WorkerSplit] = field(default_factory=list)
    setup_s: float = 0.0
    first_s: float | None = None
    wait_s: float = 0.0
    rounds_s: float = 0.0
    final_s: float = 0.0


class HostCompiler:
    """Compiles each configuration of ``variants`` once (see the module docstring)."""

    def __init__(
        self,
        kernel: Any,
        variants: Mapping[Config, Variant],
        stats: Split,
        target: str | None,
        on_done: Callable[[Config, str | None], None] = lambda config, why: None,
    ) -> None:
        self.kernel = kernel
        self.on_done = on_done
        self.variants = variants
        self.stats = stats
        self.target = target
        # the limit in force where the tuning runs (``tunedsl precompile --timeout``), read
        # here: the compiles run on threads of their own
        self.timeout_s = compile_limit_s()
        self.compiles: dict[Config, int] = {}  # compiles per configuration
        self.events: list[tuple[str, Config, float]] = []  # (what, config, perf_counter)
        self._closed = threading.Event()  # set by close: waiting compiles start none
        # Per configuration: _PENDING, None (compiled) or why it failed.
        self._state: dict[Config, object] = {}
        self._cond = threading.Condition()
        self._active = 0  # compile streams running
        self._since = 0.0

    def started(self) -> bool:
        return bool(self._state)

    def submit(self, configs: Sequence[Config]) -> None:
        """Compile ``configs`` in the background, once each however often named."""
        with self._cond:
            new = [c for c in configs if c not in self._state and c in self.variants]
            for config in new:
                self._state[config] = _PENDING
        if new:
            self.events.extend(("submitted", c, time.perf_counter()) for c in new)
            # the processes serve submits in their order (the search's, as it announced)
            priority = announced_order()
            start_drained_thread(self._compile_all, new, priority, name="tunedsl-host-compile")

    def close(self) -> None:
        """Start no further compile (what was announced ahead is not needed)."""
        self._closed.set()

    def _compile_all(self, configs: list[Config], priority: float) -> None:
        from tunedsl.backends.compile_pool import CompileCancelled, CompileJob, compile_stream
        from tunedsl.backends.inprocess import reason
        from tunedsl.backends.process_compile import prebuild_launcher, variant_compiler

        # The streams of later submits share the pool: size it for the whole request.
        compile_variant = variant_compiler(
            self.kernel,
            len(configs),
            target=self.target,
            shared_by=len(self.variants),
            priority=priority,
            cancelled=self._closed,
        )
        if self.target is None:  # the workers' first loads find the launcher built
            first = self.variants[configs[0]]
            prebuild_launcher(self.kernel, first.args, first.kwargs, first.options, first.grid)

        def job(config: Config) -> CompileJob:
            v = self.variants[config]
            return CompileJob(config, lambda: compile_variant(v.args, v.kwargs, v.options, v.grid))

        with self._cond:
            if self._active == 0:
                self._since = time.perf_counter()
            self._active += 1
        stream = compile_stream([job(c) for c in configs], timeout_s=self.timeout_s)
        left = set(configs)
        try:
            for done, result in stream:
                if isinstance(result, CompileCancelled):  # not compiled: stays in ``left``
                    continue
                left.discard(done.config)
                with self._cond:
                    self.compiles[done.config] = self.compiles.get(done.config, 0) + 1
                    self.stats.compile_cpu_s += done.seconds or 0.0
                    self.events.append(("compiled", done.config, time.perf_counter()))
                    why = reason(result) if isinstance(result, BaseException) else None
                    self._state[done.config] = None if why is None else "compile: " + why
                    self._cond.notify_all()
                self.on_done(done.config, None if why is None else "compile: " + why)
                if self._closed.is_set():  # start no further compile
                    break
        finally:
            getattr(stream, "close", lambda: None)()
            with self._cond:
                for config in left:  # never compiled (closed): a later submit tries again
                    self._state.pop(config, None)
                self._active -= 1
                if self._active == 0:
                    self.stats.compile_wall_s += time.perf_counter() - self._since
                self._cond.notify_all()
