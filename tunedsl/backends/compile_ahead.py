"""Compiling a search's batches in this process (backends layer): as they finish, ahead.

``compile_jobs`` runs one batch's compiles through the shared compile pool and yields each
result as it finishes, so measuring overlaps compiling. ``CompileAhead`` compiles a batch
the search driver announced ahead (``engine/driver.py``) in the background, while the
current batch is measured; several may run at once, sharing the pool.

Order: the compile processes serve the batch being measured first, then the batches
announced ahead in the order they were announced (``priority``). A race waits for its
batch's slowest compile (a spilling tile takes a minute where most take a second), so the
driver announces many batches ahead to keep every process busy meanwhile; served in this
order they take the processes the current batch's waiting compiles leave idle.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from tunedsl.backends.compile_limit import compile_limit_s
from tunedsl.backends.compile_pool import start_drained_thread
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant

__all__ = ["CURRENT", "CompileAhead", "announced_order", "compile_jobs"]

#: The priority of the batch being measured: served before every batch announced ahead.
CURRENT = 0.0
_announced = itertools.count(1)  # batches announced ahead, process-wide, in order


def announced_order() -> float:
    """The priority of a batch announced now: after every batch announced before it."""
    return float(next(_announced))


def compile_jobs(
    kernel: Any,
    todo: Sequence[Variant],
    cancelled: threading.Event | None = None,
    shared_by: int = 0,
    priority: float = CURRENT,
    timeout_s: float | None = None,
) -> Iterator[tuple[Variant, Any]]:
    """(variant, handle or exception) in completion order, through the shared compile pool,
    each compile bounded by ``timeout_s`` (default: the limit in force, ``compile_limit``).
    Jobs not started when ``cancelled`` is set end at once with ``CompileCancelled``.
    ``shared_by``: what the streams beside this one compile at once; ``priority``: their
    order for the compile processes (``variant_compiler``)."""
    from tunedsl.backends.triton import interpreting

    if interpreting():  # nothing to compile ahead: the interpreter runs the Python source
        for v in todo:
            yield v, None
        return
    from tunedsl.backends.compile_pool import CompileCancelled, CompileJob, compile_stream
    from tunedsl.backends.process_compile import prebuild_launcher, variant_compiler
    from tunedsl.backends.triton_cache import check_triton_cache

    check_triton_cache()  # here, not in each job: a UsageError out of the tuning, once

    # before the stream's threads
    compile_variant = variant_compiler(
        kernel, len(todo), shared_by=shared_by, priority=priority, cancelled=cancelled
    )
    if todo:  # beside the compiles, not after the first one
        prebuild_launcher(kernel, todo[0].args, todo[0].kwargs, todo[0].options, todo[0].grid)
    by_id: dict[int, Variant] = {}
    jobs = []
    for v in todo:

        def compile_one(v: Variant = v) -> object:
            if cancelled is not None and cancelled.is_set():
                raise CompileCancelled("the search ended before this configuration compiled")
            return compile_variant(v.args, v.kwargs, v.options, v.grid)

        job = CompileJob(v.config, compile_one)
        by_id[id(job)] = v
        jobs.append(job)
    for job, result in compile_stream(jobs, timeout_s=timeout_s):
        yield by_id[id(job)], result


class CompileAhead:
    """One batch to compile in the background (the driver's compile-ahead): once started, a
    thread drives the compile stream and queues each ``(variant, handle or exception)`` as
    it finishes, so ``prepare`` of that batch takes finished compiles instead of starting
    them. Started by the next ``prepare``, once every batch announced with it is known, so
    the compile pool is sized for all of them at once (``shared_by``)."""

    def __init__(self, kernel: Any, variants: Sequence[Variant]) -> None:
        self.kernel = kernel
        self.variants = list(variants)
        self.configs = {v.config for v in variants}
        self.cancelled = threading.Event()
        self.priority = announced_order()
        self.timeout_s = compile_limit_s()  # the caller's limit: compiled on another thread
        self.results: queue.SimpleQueue[tuple[Variant, Any] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None

    def start(self, shared_by: int) -> None:
        """Start compiling (once): ``shared_by`` is what every batch in flight compiles."""
        if self.thread is None:
            self.thread = start_drained_thread(self._run, shared_by, name="tunedsl-compile-ahead")

    def _run(self, shared_by: int) -> None:
        done: set[Config] = set()
        variants = self.variants
        try:
            compiled = compile_jobs(
                self.kernel,
                variants,
                self.cancelled,
                shared_by,
                priority=self.priority,
                timeout_s=self.timeout_s,
            )
            for v, handle in compiled:
                done.add(v.config)
                self.results.put((v, handle))
        except BaseException as err:  # the pool itself failed: each job left reports it
            for v in variants:
                if v.config not in done:
                    self.results.put((v, err))
        finally:
            self.results.put(None)

    def cancel(self) -> None:
        """Start no further compile of this batch (the search ended without it)."""
        self.cancelled.set()

    def take(self, wanted: set[Config]) -> Iterator[tuple[Variant, Any]]:
        """The wanted configurations' results, in completion order (once started)."""
        left = set(wanted)
        while left:
            item = self.results.get()
            if item is None:
                return
            if item[0].config in left:
                left.discard(item[0].config)
                yield item
