"""The host compile stage of multi-GPU tuning (backends layer): each configuration compiled
once, on all the host's cores, while the GPUs measure.

A binary compiled for one GPU model serves every GPU of that model, so ``HostCompiler``
compiles each candidate once in the tuning process, on the compile pool's threads
(``engine/compile_pool.py``; ``TUNEDSL_COMPILE_WORKERS``, default all CPUs), into Triton's
cache, where the measurement workers' own compiles of it are cache hits. ``submit`` starts a
batch in the background (``MultiDeviceMeasurer.prefetch`` submits the search's next batch
while the GPUs measure the current one); ``feed`` hands a batch's configurations to the GPUs
as they finish. A configuration that fails to compile fails here, without a worker.

``target``: compile for a named target (``"cuda:90"``, a cross-compile) instead of the GPU
of the variants' arguments; that is what a host without the GPU does (the tests use it).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedsl.engine.seams import Prepared
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant

__all__ = ["HostCompiler", "Split"]

_PENDING = object()  # a configuration being compiled


@dataclass
class Split:
    """Where a multi-device tuning's time went (``benchmarks/bench_multi_gpu.py`` prints it).

    ``compile_wall_s``: seconds while at least one host compile ran; ``compile_cpu_s``: the
    sum of every compile's seconds (over the pool's threads); ``measure_s``: per worker,
    seconds its GPU was busy loading and opening configurations (later race samples not
    included)."""

    compile_wall_s: float = 0.0
    compile_cpu_s: float = 0.0
    measure_s: list[float] = field(default_factory=list)


class HostCompiler:
    """Compiles each configuration of ``variants`` once (see the module docstring)."""

    def __init__(
        self, kernel: Any, variants: Mapping[Config, Variant], stats: Split, target: str | None
    ) -> None:
        self.kernel = kernel
        self.variants = variants
        self.stats = stats
        self.target = target
        self.compiles: dict[Config, int] = {}  # compiles per configuration
        self.events: list[tuple[str, Config, float]] = []  # (what, config, perf_counter)
        self.closed = False
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
            threading.Thread(target=self._compile_all, args=(new,), daemon=True).start()

    def _compile_all(self, configs: list[Config]) -> None:
        from tunedsl.backends.inprocess import reason
        from tunedsl.backends.triton_compile import compile_variant
        from tunedsl.engine.compile_pool import CompileJob, compile_stream

        def job(config: Config) -> CompileJob:
            v = self.variants[config]
            return CompileJob(
                config,
                lambda: compile_variant(
                    self.kernel, v.args, v.kwargs, v.options, target=self.target
                ),
            )

        with self._cond:
            if self._active == 0:
                self._since = time.perf_counter()
            self._active += 1
        stream = compile_stream([job(c) for c in configs])
        left = set(configs)
        try:
            for done, result in stream:
                left.discard(done.config)
                with self._cond:
                    self.compiles[done.config] = self.compiles.get(done.config, 0) + 1
                    self.stats.compile_cpu_s += done.seconds or 0.0
                    self.events.append(("compiled", done.config, time.perf_counter()))
                    why = reason(result) if isinstance(result, BaseException) else None
                    self._state[done.config] = None if why is None else "compile: " + why
                    self._cond.notify_all()
                if self.closed:  # start no further compile
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

    def feed(
        self,
        configs: list[Config],
        compiled: queue.Queue[Config],
        out: queue.Queue[Prepared | None],
        stop: threading.Event,
        ended: threading.Event,
    ) -> None:
        """Put each of ``configs`` on ``compiled`` as it compiles (a failed compile goes to
        ``out`` as its result) until all are done or ``stop``; then set ``ended``."""
        waiting = set(configs)
        for config in waiting - set(self.variants):
            waiting.discard(config)
            out.put(Prepared(config, "failed", "not a candidate of this tuning request"))
        try:
            while waiting and not stop.is_set() and not self.closed:
                with self._cond:
                    done = [c for c in waiting if self._state.get(c, _PENDING) is not _PENDING]
                    missing = [c for c in waiting if c not in self._state]
                    if not done and not missing:
                        self._cond.wait(0.05)
                        continue
                if missing:  # dropped by a closed stream: compile them again
                    self.submit(missing)
                for config in done:
                    waiting.discard(config)
                    why = self._state[config]
                    if why is None:
                        compiled.put(config)
                    else:
                        out.put(Prepared(config, "failed", str(why)))
        finally:
            ended.set()
