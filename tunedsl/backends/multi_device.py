"""Measuring on every GPU of a host (backends layer): one isolated worker per device.

``MultiDeviceMeasurer`` implements the engine's ``Measurer`` seam (``engine/seams.py``) over
several measurement workers (``isolated.py``'s processes: kernel by value, inputs copied),
one per GPU of the caller's model (``TUNEDSL_TUNE_DEVICES``, see ``tune_devices``), when
``device_plan.py`` expects them to pay for their start:

- **Starting**: every worker starts (import, CUDA, the inputs: seconds) in the background
  when the measurer is made, beside the host's first compiles. With ``local=True`` the
  caller's GPU needs no worker: the search's thread opens configurations on it, in this
  process (``InProcessMeasurer``), from the first compile on, and the other GPUs join as
  their workers come up, so their start costs the tuning nothing.
- **Compiling once, on every core** (``host_compile.py``): each configuration once, in this
  process, on the compile pool's threads, into Triton's cache (one compile serves every GPU
  of the model); ``prefetch`` starts the search's next batches while the GPUs measure.
- **Spreading**: one queue of compiled configurations; each GPU's thread takes a share of
  what waits as soon as its GPU is free and sends it in one ``open`` request (the worker
  loads each, takes its opening repetitions and answers it), so the GPUs open the next batch
  while the search's thread races the current one's later rounds. ``prepare`` yields each
  result as it comes; a ``prepare`` closed early (budget spent) pauses the opening.
- **Merging**: a candidate's first ``sample`` is its banked opening (taken in parallel);
  later samples of the race are taken on the GPU that opened it (same model: comparable),
  and a round's samples on different GPUs side by side (``sample_round``: one thread per
  GPU), so a round costs what its busiest GPU takes, not the sum.
- **The choice is the caller's GPU's**: ``final_on_caller(leaders)`` (the driver calls it
  before the final race of the leaders) routes every later ``sample`` to the caller's GPU
  (this process, or its worker), so the leaders are raced on the device the kernel runs on.
- **Failure**: a configuration that crashes or hangs one worker fails alone (that worker
  restarts, ``isolated.py``; the rest of its part is sent again one at a time to find it);
  a worker that cannot be set up at all hands its part back to the others and takes no
  more; a configuration that fails to compile fails on the host.
- **Where the time went**: ``stats`` (``host_compile.Split``).

Mixed models never share a decision: only GPUs of the caller's model are used, and the
device model is part of every key (``backends.triton.device_facts``).
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from tunedsl.backends import device_plan, device_workers
from tunedsl.backends.device_choice import tune_devices
from tunedsl.backends.device_workers import (
    Slot,
    open_here,
    settle_leaders,
    shutdown_workers,
    workers_warm,
)
from tunedsl.backends.host_compile import HostCompiler, Split, WorkerSplit
from tunedsl.backends.inprocess import InProcessMeasurer
from tunedsl.backends.isolated import IsolatedMeasurer, WorkerDied
from tunedsl.engine.racing import DEFAULT_RACE
from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config

__all__ = ["MultiDeviceMeasurer", "shutdown_workers", "tune_devices", "workers_warm"]

#: The most configurations one part holds: one request per part, so a part costs one round
#: trip; small, so that the search's own samples (and the final race) wait little for it.
MAX_CHUNK = 8


class MultiDeviceMeasurer:
    """The ``Measurer`` seam over one worker per device (see the module docstring).

    ``devices``: device indices, the caller's first (``caller`` names it otherwise); off a
    GPU every worker runs the interpreter, and ``devices=[0, 0]`` gives two of them.
    ``opening_reps``: repetitions each worker takes of a configuration it loaded (the
    race's ``first_reps``). ``chunk``: the most compiled configurations a worker takes at
    once (default: a share of what waits, at most ``MAX_CHUNK``).
    ``compile_target``: the host compiles for this target (``"cuda:90"``), not the caller's
    GPU (a cross-compile, as a host without the GPU does; tests use it).
    ``model``: the devices' model, under which ``device_plan`` records the workers' start
    and measuring seconds. ``local``: the caller's GPU measures in this process, on the
    search's thread (never with ``isolate=True``). The workers start now, in the background
    (``wait_started`` waits for them).
    """

    def __init__(
        self,
        req: Any,
        devices: Sequence[int],
        *,
        caller: int | None = None,
        timing: str = "auto",
        opening_reps: int = DEFAULT_RACE.first_reps,
        chunk: int | None = None,
        compile_target: str | None = None,
        model: str | None = None,
        local: bool = False,
    ) -> None:
        if not devices:
            raise UsageError("MultiDeviceMeasurer: devices is empty")
        born = time.perf_counter()
        self.devices = list(devices)
        self.caller = self.devices.index(caller) if caller in self.devices else 0
        self.opening_reps = opening_reps
        self.chunk = chunk
        self.timing = timing
        self.model = model
        self._count_lock = threading.Lock()
        self.sampling = 0  # GPUs taking a race sample now
        self.most_sampling = 0  # the most at once (a round spread over GPUs)
        self.stats = Split(measure_s=[0.0] * len(self.devices))
        variants = {v.config: v for v in req.variants}
        self._cond = threading.Condition()
        self._work: queue.Queue[Config] = queue.Queue()  # compiled, not yet opened
        self._results: dict[Config, Prepared] = {}  # opened (or failed), not yet prepared
        self._delivered: set[Config] = set()  # every configuration that has its result
        self._paused = False  # a prepare stream was closed early (budget spent)
        self._closed = False
        self.host = HostCompiler(req.kernel, variants, self.stats, compile_target, self._compiled)
        self.compiles = self.host.compiles  # host compiles per configuration
        self.events = self.host.events  # ("submitted"|"compiled"|"measuring", config, time)
        self._deferred: list[Config] = []  # prefetched before the first batch
        self._asked: float | None = None  # when the first prepare began
        seen: dict[int, int] = {}
        self.slots: list[Slot] = []
        self.local: Slot | None = None  # the caller's GPU, measured on the search's thread
        try:
            for n, device in enumerate(self.devices):
                if local and n == self.caller:
                    here = InProcessMeasurer(req, variants.__getitem__, req.variants[0])
                    self.local = Slot(here, WorkerSplit(device=device))  # type: ignore[arg-type]
                    self.local.started.set()
                    self.slots.append(self.local)
                    continue
                nth = seen[device] = seen.get(device, -1) + 1
                worker = device_workers.worker(device, nth)
                measurer = IsolatedMeasurer(req, timing, device=device, worker=worker)
                self.slots.append(Slot(measurer, WorkerSplit(device=device)))
        except BaseException:
            self.close()
            raise
        self.stats.workers = [slot.stats for slot in self.slots]
        self.owner: dict[Config, int] = {}
        self.banked: dict[Config, list[float]] = {}
        self.final = False
        self.trace: list[tuple[Config, int]] = []  # (config, slot) of each non-banked sample
        self.final_from: int | None = None
        # Batches the search announces ahead (driver.py): the host compiles while a race runs.
        self.lookahead = 1 + len(self.slots)
        self.stats.setup_s = time.perf_counter() - born
        # Every worker starts now, side by side and while the host compiles.
        for index, slot in enumerate(self.slots):
            if slot is not self.local:
                slot.thread = threading.Thread(target=self._run, args=(index,), daemon=True)
                slot.thread.start()

    def __repr__(self) -> str:
        return f"MultiDeviceMeasurer(devices={self.devices})"

    def wait_started(self) -> None:
        """Wait until every worker process has started (or failed to)."""
        for slot in self.slots:
            slot.started.wait()

    # -- the host compiles; each compiled configuration goes to the first free GPU ----------
    def _compiled(self, config: Config, why: str | None) -> None:
        with self._cond:
            if why is not None:
                self._deliver(Prepared(config, "failed", why))
            elif all(slot.dead for slot in self.slots):
                self._deliver(Prepared(config, "failed", self._no_worker()))
            else:
                self._work.put(config)
                self._cond.notify_all()  # a local caller's thread may wait for work

    def _deliver(self, prepared: Prepared) -> None:
        with self._cond:
            self._results[prepared.config] = prepared
            self._delivered.add(prepared.config)
            self._cond.notify_all()

    def _no_worker(self) -> str:
        why = "; ".join(f"device {self.devices[i]}: {s.dead}" for i, s in enumerate(self.slots))
        return f"no measurement worker left ({why})"

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        configs = list(configs)
        if self._asked is None:
            self._asked = time.perf_counter()
        self._paused = False
        for config in configs:
            if config not in self.host.variants:
                yield Prepared(config, "failed", "not a candidate of this tuning request")
        if self.final:  # stored leaders of the final race: ``sample`` readies them here
            yield from (Prepared(c) for c in configs if c in self.host.variants)
            return
        waiting = {c for c in configs if c in self.host.variants}
        self.host.submit(configs)  # what the driver prefetched is compiling (or compiled)
        if self._deferred:  # announced before the first batch: compiled after it
            self.host.submit(self._deferred)
            self._deferred = []
        try:
            while waiting:
                with self._cond:
                    done = [self._results.pop(c) for c in list(waiting) if c in self._results]
                # local: open one here, outside the lock (the others deliver meanwhile)
                if not done and self._open_here():
                    continue
                if not done:
                    with self._cond:
                        if not self._ready(waiting):
                            start = time.perf_counter()
                            self._cond.wait(0.05)
                            self.stats.wait_s += time.perf_counter() - start
                    continue
                if self.stats.first_s is None:
                    self.stats.first_s = time.perf_counter() - self._asked
                for prepared in done:
                    waiting.discard(prepared.config)
                    yield prepared
        except GeneratorExit:  # the race stopped taking (budget spent): no new part starts
            self._paused = True
            raise

    def _ready(self, waiting: set[Config]) -> bool:  # a result, or work to open here
        local = self.local is not None and self._taking() and not self._work.empty()
        return local or any(c in self._results for c in waiting)

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Start compiling ``configs`` on the host now: the driver announces the next batch
        before it races the current one, so the host compiles, and the free GPUs open what
        it compiled, while the current batch is raced. (Announced before the first batch,
        they wait for the first ``prepare``.)"""
        if not self.host.started():
            self._deferred.extend(configs)
            return
        self.host.submit(configs)

    # -- one thread per GPU: start its worker, then open what the host compiled --------------
    def _taking(self) -> bool:
        return not (self._closed or self.final or self._paused)

    def _run(self, index: int) -> None:
        slot = self.slots[index]
        born = time.perf_counter()
        try:
            with slot.lock:
                slot.measurer.worker.ensure_started()
        except TuningError as err:  # the worker cannot be set up: the others take its part
            self._retire(index, str(err))
        except Exception:  # died while starting: its first request starts it again
            pass
        finally:
            slot.stats.start_s = time.perf_counter() - born
            slot.started.set()
        if self.model is not None and slot.dead is None:
            device_plan.observe(self.model, start_s=slot.stats.start_s)
        while slot.dead is None and not self._closed:
            part = self._take(slot)
            if not part:
                continue
            with slot.lock:
                start = time.perf_counter()
                try:
                    self._open_on(index, part)
                except TuningError as err:
                    self._retire(index, str(err), part)
                finally:
                    self.stats.measure_s[index] += time.perf_counter() - start

    def _take(self, slot: Slot) -> list[Config]:
        """The next part for this worker (empty after 50 ms without work): a share of what
        waits, so that every GPU gets some."""
        if slot.wanted or not self._taking():
            # The search's thread goes first (its race waits); paused or final: nothing to do.
            time.sleep(0.002 if slot.wanted else 0.02)
            return []
        idle = time.perf_counter()
        try:
            part = [self._work.get(timeout=0.05)]
        except queue.Empty:
            return []
        finally:
            slot.stats.idle_s += time.perf_counter() - idle
        if not self._taking() or slot.dead:
            self._work.put(part[0])
            return []
        live = sum(1 for s in self.slots if s.dead is None)
        size = self.chunk or max(1, min(MAX_CHUNK, (self._work.qsize() + 1) // (2 * live)))
        while len(part) < size:
            try:
                part.append(self._work.get_nowait())
            except queue.Empty:
                break
        return part

    def _open_here(self) -> bool:
        """The search's thread opens one compiled configuration here (``local``): if any."""
        slot = self.local
        if slot is None or not self._taking():
            return False
        try:
            config = self._work.get_nowait()
        except queue.Empty:
            return False
        start = time.perf_counter()
        self.events.append(("measuring", config, start))
        with slot.lock:
            status, why, samples = open_here(slot.measurer, config, self.opening_reps)
        took = time.perf_counter() - start
        slot.stats.time_s += took
        self.stats.measure_s[self.caller] += took
        self._bank(self.caller, config, status, why, samples)
        return True

    def _retire(self, index: int, why: str, part: Sequence[Config] = ()) -> None:
        """The worker cannot be set up: it takes no more; its part goes back to the others,
        or fails when no worker is left."""
        with self._cond:
            self.slots[index].dead = why
            for config in part:
                if config not in self._delivered:
                    self._work.put(config)
            if all(slot.dead for slot in self.slots):
                while True:
                    try:
                        config = self._work.get_nowait()
                    except queue.Empty:
                        break
                    self._deliver(Prepared(config, "failed", self._no_worker()))

    def _open_on(self, index: int, part: list[Config]) -> None:
        """Load ``part`` on one worker and take each loaded one's opening samples, in one
        request (the worker answers each as it is done); a crash or hang fails its
        configuration alone (the others are sent again, one at a time, to find it)."""
        slot = self.slots[index]
        measurer, stats = slot.measurer, slot.stats
        left, single = list(part), False
        while left:
            todo = left[:1] if single else left
            answered: set[Config] = set()
            switched, worker_s = False, 0.0
            start = time.perf_counter()
            self.events.extend(("measuring", c, start) for c in todo)
            request = ("open", [measurer.index[c] for c in todo], self.opening_reps)
            try:
                for answer in measurer.worker.stream(request, measurer.compile_timeout_s):
                    if answer[0] != "opened":
                        raise TuningError(f"measurement worker: {answer[-1]}")
                    _, i, status, reason, samples, load_s, time_s = answer
                    config = measurer.variants[i].config
                    stats.load_s += load_s
                    stats.time_s += time_s
                    worker_s += load_s + time_s
                    if status == "retry":  # after a failed launch: sent again, to a new worker
                        continue
                    answered.add(config)
                    self._bank(index, config, status, reason, samples)
            except WorkerDied as died:
                missing = [c for c in todo if c not in answered]
                if not single and len(missing) > 1:
                    single = True  # send the rest one at a time to find the culprit
                    switched = True
                elif missing:
                    answered.add(missing[0])
                    self._deliver(Prepared(missing[0], "failed", f"run: {died}"))
            finally:
                stats.ipc_s += max(0.0, time.perf_counter() - start - worker_s)
            if not answered and not switched:  # pragma: no cover - it answers every one
                for config in todo:
                    self._deliver(Prepared(config, "failed", "run: the worker did not answer"))
                answered.update(todo)
            left = [c for c in left if c not in answered]

    def _bank(
        self, index: int, config: Config, status: str, reason: str | None, samples: list[float]
    ) -> None:
        slot = self.slots[index]
        if status != "ok":
            self._deliver(Prepared(config, status, reason))
            return
        slot.ready.add(config)
        slot.stats.opened += 1
        self.owner[config] = index
        if samples:
            self.banked[config] = [float(x) for x in samples]
        self._deliver(Prepared(config, "ok"))

    # -- sample: banked, then the owner's GPU, then (final) the caller's ----------------------
    def sample(self, config: Config, reps: int) -> list[float]:
        if not self.final:
            banked = self.banked.pop(config, None)
            if banked:
                return banked
        index = self.caller if self.final else self.owner.get(config, self.caller)
        slot = self.slots[index]
        start = time.perf_counter()
        slot.wanted += 1
        try:
            with slot.lock:
                if config not in slot.ready:
                    self._ready_on(index, [config])
                self.trace.append((config, index))
                with self._count_lock:
                    self.sampling += 1
                    self.most_sampling = max(self.most_sampling, self.sampling)
                try:
                    return slot.measurer.sample(config, reps)
                finally:
                    with self._count_lock:
                        self.sampling -= 1
        finally:
            slot.wanted -= 1
            took = time.perf_counter() - start
            slot.stats.race_s += took
            if self.final:
                self.stats.final_s += took
            else:
                self.stats.rounds_s += took

    def sample_round(self, asked: Sequence[tuple[Config, int]]) -> list[list[float] | Exception]:
        """A race round's samples: those of each GPU in turn, the GPUs side by side (one
        thread each; the search's thread takes the first GPU's). Each configuration's
        samples, or its ``MeasureFailure``, in the order asked."""
        groups: dict[int, list[int]] = {}
        for n, (config, _) in enumerate(asked):
            index = self.caller if self.final else self.owner.get(config, self.caller)
            if not self.final and self.banked.get(config):
                index = -1  # its opening is banked: no GPU needed
            groups.setdefault(index, []).append(n)
        out: list[list[float] | Exception] = [[] for _ in asked]

        def run(indices: list[int]) -> None:
            for n in indices:
                config, reps = asked[n]
                try:
                    out[n] = self.sample(config, reps)
                except MeasureFailure as err:
                    out[n] = err

        # The caller's samples on the search's thread (``local``: where this process measures).
        parts = [groups[i] for i in sorted(groups, key=lambda i: i != self.caller)]
        if len(parts) == 1:
            run(parts[0])
            return out
        with concurrent.futures.ThreadPoolExecutor(len(parts) - 1) as pool:
            others = [pool.submit(run, part) for part in parts[1:]]
            run(parts[0])
            for future in others:
                future.result()
        return out

    def _ready_on(self, index: int, configs: Sequence[Config]) -> None:
        """Compile ``configs`` on one worker (mostly Triton cache hits: same model)."""
        slot = self.slots[index]
        for prepared in slot.measurer.prepare([c for c in configs if c not in slot.ready]):
            if prepared.status == "ok" and prepared.error is None:
                slot.ready.add(prepared.config)
        missing = [c for c in configs if c not in slot.ready]
        if len(configs) == 1 and missing:
            raise MeasureFailure(f"could not be prepared on device {self.devices[index]}")

    def final_on_caller(self, leaders: Sequence[Config]) -> None:
        """From now on every sample is taken on the caller's GPU, no GPU opens anything more
        and the host compiles nothing more; the ``leaders`` are compiled there now (and, with
        the auto timer, its timer settles on them)."""
        start = time.perf_counter()
        self.final = True
        self.host.close()  # batches announced ahead are not needed: free the cores
        self.final_from = len(self.trace)  # where the caller's race starts in ``trace``
        self.banked.clear()
        slot = self.slots[self.caller]
        slot.wanted += 1
        try:
            with slot.lock:
                self._ready_on(self.caller, leaders)
                if self.timing == "auto" and slot is not self.local:  # local: timer chosen
                    settle_leaders(slot, leaders, self.opening_reps)
        finally:
            slot.wanted -= 1
            self.stats.final_s += time.perf_counter() - start

    def close(self) -> None:
        """Drop every worker's copies (the processes stay warm for the next tuning); the
        host stage starts no further compile and no GPU opens anything more."""
        opened = sum(slot.stats.opened for slot in self.slots)
        if self.model is not None and opened and not self._closed:
            busy = sum(s.stats.load_s + s.stats.time_s + s.stats.race_s for s in self.slots)
            device_plan.observe(self.model, measure_s=busy / opened, configs=opened)
        self._closed = True
        if hasattr(self, "host"):
            self.host.close()
        for slot in self.slots:
            if slot.thread is not None and slot.thread is not threading.current_thread():
                slot.thread.join()
        for slot in self.slots:
            with slot.lock:
                slot.measurer.close()
