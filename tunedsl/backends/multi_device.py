"""Measuring on every GPU of a host (backends layer): one isolated worker per device.

``MultiDeviceMeasurer`` implements the engine's ``Measurer`` seam (``engine/seams.py``) over
several measurement workers (``isolated.py``'s processes: kernel by value, inputs copied),
one per GPU of the caller's model (``TUNEDSL_TUNE_DEVICES``, see ``tune_devices``):

- **Compiling once, on every core** (``host_compile.py``): ``prepare`` compiles its batch
  in this process, once, on the compile pool's threads (all the host's cores), into
  Triton's cache, and ``prefetch`` starts the search's next batch while the GPUs measure.
  Compiling for a GPU needs the model, not the device, so one compile serves every GPU of
  the model. (Before, each worker compiled its own chunk in its own pool, no more
  configurations at once than its chunk held, and its GPU idled meanwhile: two H200s were
  0.88x of one, compile-bound.)
- **Spreading**: each worker's thread takes what the host has compiled (work stealing, up
  to ``chunk`` at a time), loads it in its worker (a Triton cache hit) and takes its opening
  repetitions on its GPU while the host compiles the next ones. The results come back in
  completion order, so the race opens candidates while the other GPUs still work.
- **Merging**: a candidate's first ``sample`` is its banked opening (taken in parallel);
  later samples of the race are taken on the GPU that opened it (same model: comparable).
- **The choice is the caller's GPU's**: ``final_on_caller(leaders)`` (the driver calls it
  before the final race of the leaders) routes every later ``sample`` to the caller's
  worker, so the leaders are raced side by side on the device the kernel will run on.
- **Failure**: a configuration that crashes or hangs one worker fails alone (that worker
  restarts, ``isolated.py``); a worker that cannot be set up at all hands its part back to
  the others and takes no more; a configuration that fails to compile fails on the host.

Mixed models never share a decision: only GPUs of the caller's model are used, and the
device model is part of every key (``backends.triton.device_facts``).
"""

from __future__ import annotations

import atexit
import queue
import statistics
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tunedsl import knobs
from tunedsl.backends.host_compile import HostCompiler, Split
from tunedsl.backends.isolated import IsolatedMeasurer, Worker, worker_for
from tunedsl.engine.racing import DEFAULT_RACE
from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.config import Config

__all__ = ["MultiDeviceMeasurer", "maybe_multi_device", "shutdown_workers", "tune_devices"]

#: Spaces smaller than this are measured on the caller's GPU alone: starting and setting up
#: a worker per GPU costs seconds, more than a small space saves.
MIN_CANDIDATES = 8
#: The most configurations one work item holds (about a compile pool's width).
MAX_CHUNK = 32


def tune_devices(
    setting: str, visible: Sequence[int], caller: int, models: Mapping[int, str]
) -> list[int]:
    """The devices a tuning measures on, the caller's first (pure; ``TUNEDSL_TUNE_DEVICES``).

    ``setting``: ``all`` (every visible device of the caller's model), ``N`` (a count: the
    caller's and the next N-1 of its model; ``1`` is the caller's only) or a comma-separated
    list of device indices (``3,`` names device 3 alone); the caller's device is always
    included, because the leaders are re-measured there. ``models`` maps each visible device
    to its model (name and capability); a listed device of another model is an error: its
    timings would choose for the wrong device.
    """
    where = "TUNEDSL_TUNE_DEVICES"
    if caller not in visible:
        raise UsageError(f"{where}: the caller's device {caller} is not visible ({visible})")
    mine = [d for d in visible if models.get(d) == models.get(caller)]
    others = [d for d in mine if d != caller]
    text = setting.strip().lower()
    if text in ("", "all"):
        return [caller, *others]
    if "," not in text:
        try:
            count = int(text)
        except ValueError:
            raise UsageError(
                f"{where}={setting!r}: expected 'all', a count like 2, or device indices like 0,1"
            ) from None
        if count < 1:
            raise UsageError(f"{where}={setting!r}: the count must be at least 1")
        return [caller, *others[: count - 1]]
    chosen = [caller]
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            device = int(part)
        except ValueError:
            raise UsageError(
                f"{where}={setting!r}: {part.strip()!r} is not a device index"
            ) from None
        if device not in visible:
            raise UsageError(
                f"{where}={setting!r}: device {device} is not visible (visible: "
                f"{', '.join(map(str, visible))}); check CUDA_VISIBLE_DEVICES"
            )
        if models.get(device) != models.get(caller):
            raise UsageError(
                f"{where}={setting!r}: device {device} is a {models.get(device)}, the "
                f"caller's device {caller} a {models.get(caller)}; timings of another model "
                "would choose for the wrong device: list devices of one model only"
            )
        if device not in chosen:
            chosen.append(device)
    return chosen


# -- workers beyond the first of a device ----------------------------------------------------

# The first worker of a device is ``isolated.worker_for(device)`` (shared with isolate=True,
# kept warm); a device listed twice (tests on the CPU) gets more from here.
_extra: dict[tuple[int | None, int], Worker] = {}
_extra_lock = threading.Lock()


def _worker(device: int | None, nth: int) -> Worker:
    if nth == 0:
        return worker_for(device)
    with _extra_lock:
        worker = _extra.get((device, nth))
        if worker is None:
            worker = _extra[(device, nth)] = Worker(device)
        return worker


@atexit.register
def shutdown_workers() -> None:
    """Kill the extra workers (the first of each device belongs to ``isolated``)."""
    with _extra_lock:
        for worker in _extra.values():
            worker.kill()
        _extra.clear()


# -- the measurer ----------------------------------------------------------------------------


class _Slot:
    """One worker: its measurer, a lock (its pipe carries one request at a time), and what
    it has compiled."""

    def __init__(self, measurer: IsolatedMeasurer) -> None:
        self.measurer = measurer
        self.lock = threading.Lock()
        self.ready: set[Config] = set()
        self.dead: str | None = None  # why it takes no more work


class MultiDeviceMeasurer:
    """The ``Measurer`` seam over one worker per device (see the module docstring).

    ``devices``: device indices, the caller's first (``caller`` names it otherwise); off a
    GPU every worker runs the interpreter, and ``devices=[0, 0]`` gives two of them.
    ``opening_reps``: repetitions each worker takes of a configuration it loaded (the
    race's ``first_reps``). ``chunk``: the most compiled configurations a worker takes at
    once (default: a batch split in about four per worker, at most ``MAX_CHUNK``).
    ``compile_target``: the host stage compiles for this target (``"cuda:90"``) instead of
    the caller's GPU (a cross-compile: what a host without the GPU does; tests use it).
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
    ) -> None:
        if not devices:
            raise UsageError("MultiDeviceMeasurer: devices is empty")
        self.devices = list(devices)
        self.caller = self.devices.index(caller) if caller in self.devices else 0
        self.opening_reps = opening_reps
        self.chunk = chunk
        self.timing = timing
        self.stats = Split(measure_s=[0.0] * len(self.devices))
        variants = {v.config: v for v in req.variants}
        self.host = HostCompiler(req.kernel, variants, self.stats, compile_target)
        self.compiles = self.host.compiles  # host compiles per configuration
        self.events = self.host.events  # ("submitted"|"compiled"|"measuring", config, time)
        self._deferred: list[Config] = []  # prefetched before the first batch
        seen: dict[int, int] = {}
        self.slots: list[_Slot] = []
        try:
            for device in self.devices:
                nth = seen[device] = seen.get(device, -1) + 1
                worker = _worker(device, nth)
                self.slots.append(
                    _Slot(IsolatedMeasurer(req, timing, device=device, worker=worker))
                )
        except BaseException:
            self.close()
            raise
        self.owner: dict[Config, int] = {}
        self.banked: dict[Config, list[float]] = {}
        self.final = False
        self.trace: list[tuple[Config, int]] = []  # (config, slot) of each non-banked sample
        self.final_from: int | None = None

    # -- prepare: one host compile stage feeding every GPU's worker --------------------------
    def _chunks(self, configs: Sequence[Config]) -> int:
        """How many compiled configurations a worker takes at once (at most MAX_CHUNK: a
        closed stream, the budget spent, waits for the ones in flight)."""
        return self.chunk or max(1, min(MAX_CHUNK, -(-len(configs) // (4 * len(self.slots)))))

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        configs = list(configs)
        compiled: queue.Queue[Config] = queue.Queue()  # compiled on the host, not yet measured
        out: queue.Queue[Prepared | None] = queue.Queue()  # None: a worker thread ended
        stop = threading.Event()
        compiling = threading.Event()  # set when the host stage has compiled the whole batch
        self.host.submit(configs)  # what the driver prefetched is compiling (or compiled)
        if self._deferred:  # announced before the first batch: compiled after it
            self.host.submit(self._deferred)
            self._deferred = []
        host = threading.Thread(
            target=self.host.feed, args=(configs, compiled, out, stop, compiling), daemon=True
        )
        host.start()
        size = self._chunks(configs)
        done = 0
        try:
            while done < len(configs):
                live = [i for i, slot in enumerate(self.slots) if slot.dead is None]
                if not live:
                    break
                for i in live:
                    args = (i, size, compiled, out, stop, compiling)
                    threading.Thread(target=self._serve, args=args, daemon=True).start()
                running = len(live)
                while running:  # a worker thread ends once the host stage ended and all is taken
                    item = out.get()
                    if item is None:
                        running -= 1
                    else:
                        done += 1
                        yield item
                # Left in the queue: a worker that died handed its part back after the others
                # had ended; the live ones start again.
            host.join()
            why = "; ".join(
                f"device {self.devices[i]}: {s.dead}" for i, s in enumerate(self.slots) if s.dead
            )
            while True:  # every worker is dead: what is left fails, with the reasons
                try:
                    item = out.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    yield item
            while True:
                try:
                    config = compiled.get_nowait()
                except queue.Empty:
                    break
                yield Prepared(config, "failed", f"no measurement worker left ({why})")
        finally:
            stop.set()  # a closed stream (budget spent): no new compile or measurement starts

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Start compiling ``configs`` on the host now: the driver announces the next batch
        before it races the current one, so the host compiles while the GPUs measure.
        (Announced before the first batch, they wait for the first ``prepare``.)"""
        if not self.host.started():
            self._deferred = list(configs)
            return
        self.host.submit(configs)

    def _serve(
        self,
        index: int,
        size: int,
        compiled: queue.Queue[Config],
        out: queue.Queue[Prepared | None],
        stop: threading.Event,
        compiling: threading.Event,
    ) -> None:
        """One GPU's thread: takes what the host compiled (up to ``size`` at a time), loads
        it in its worker (a Triton cache hit) and takes the opening repetitions, while the
        host compiles the next ones."""
        slot = self.slots[index]
        try:
            while not stop.is_set():
                try:
                    part = [compiled.get(timeout=0.05)]
                except queue.Empty:
                    if compiling.is_set() and compiled.empty():
                        return
                    continue
                while len(part) < size:
                    try:
                        part.append(compiled.get_nowait())
                    except queue.Empty:
                        break
                try:
                    with slot.lock:
                        start = time.perf_counter()
                        results = list(self._prepare_on(index, part))
                        self.stats.measure_s[index] += time.perf_counter() - start
                except TuningError as err:  # the worker cannot be set up: others take it
                    slot.dead = str(err)
                    for config in part:
                        compiled.put(config)
                    return
                for result in results:
                    out.put(result)
        finally:
            out.put(None)

    def _prepare_on(self, index: int, part: list[Config]) -> Iterator[Prepared]:
        """Load ``part`` on one worker and bank each loaded one's opening samples."""
        slot = self.slots[index]
        for prepared in slot.measurer.prepare(part):
            if prepared.status != "ok" or prepared.error is not None:
                yield prepared
                continue
            config = prepared.config
            self.events.append(("measuring", config, time.perf_counter()))
            try:
                samples = slot.measurer.sample(config, self.opening_reps)
            except MeasureFailure as err:
                yield Prepared(config, "failed", str(err))
                continue
            slot.ready.add(config)
            self.owner[config] = index
            self.banked[config] = samples
            yield prepared

    # -- sample: banked, then the owner's GPU, then (final) the caller's ----------------------
    def sample(self, config: Config, reps: int) -> list[float]:
        if not self.final:
            banked = self.banked.pop(config, None)
            if banked:
                return banked
        index = self.caller if self.final else self.owner.get(config, self.caller)
        slot = self.slots[index]
        with slot.lock:
            if config not in slot.ready:
                self._ready_on(index, [config])
            self.trace.append((config, index))
            return slot.measurer.sample(config, reps)

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
        """From now on every sample is taken on the caller's GPU; the ``leaders`` are
        compiled there now (and, with the auto timer, its timer settles on them)."""
        self.final = True
        self.final_from = len(self.trace)  # where the caller's race starts in ``trace``
        self.banked.clear()
        slot = self.slots[self.caller]
        with slot.lock:
            self._ready_on(self.caller, leaders)
            if self.timing == "auto":
                self._settle(slot, leaders)

    def _settle(self, slot: _Slot, leaders: Sequence[Config]) -> None:
        from tunedsl.backends import triton as bt
        from tunedsl.engine.bench import Timing

        if bt.device_facts()["type"] not in ("cuda", "hip"):
            return
        first = {}
        for config in leaders:
            if config in slot.ready:
                try:
                    samples = slot.measurer.sample(config, self.opening_reps)
                except MeasureFailure:
                    continue
                mid = statistics.median(samples)
                first[config] = Timing(mid, 0.0, len(samples), min(samples))
        if first:
            slot.measurer.settle(first)

    def close(self) -> None:
        """Drop every worker's copies (the processes stay warm for the next tuning); the
        host stage starts no further compile."""
        self.host.closed = True
        for slot in self.slots:
            with slot.lock:
                slot.measurer.close()


def maybe_multi_device(req: Any) -> MultiDeviceMeasurer | None:
    """A ``MultiDeviceMeasurer`` when this tuning should use several GPUs, else None (the
    caller then measures as before): on a GPU, with ``TUNEDSL_TUNE_DEVICES`` naming more than
    the caller's device, at least ``MIN_CANDIDATES`` candidates, and a kernel and arguments
    that can be sent to a worker (otherwise one warning, and None)."""
    from tunedsl.backends import triton as bt

    if bt.device_facts()["type"] not in ("cuda", "hip"):
        return None
    variants = list(getattr(req, "variants", ()))
    if len(variants) < MIN_CANDIDATES:
        return None
    import torch

    visible = list(range(torch.cuda.device_count()))
    caller = int(torch.cuda.current_device())
    models = {d: _model(d) for d in visible}
    devices = tune_devices(knobs.tune_devices(), visible, caller, models)
    if len(devices) < 2:
        return None
    try:
        return MultiDeviceMeasurer(
            req,
            devices,
            caller=caller,
            timing=getattr(req, "timing", "auto"),
            opening_reps=_opening_reps(getattr(req, "effort", "default")),
        )
    except UsageError as err:  # not picklable: tune in this process, on the caller's GPU
        warnings.warn(f"tuning on one GPU: {err}", RuntimeWarning, stacklevel=2)
        return None


def _model(device: int) -> str:
    from tunedsl.backends import triton as bt

    facts = bt._device_facts_at(device)
    return f"{facts['name']} ({facts['type']} {facts.get('capability')})"


def _opening_reps(effort: str) -> int:
    from tunedsl.engine.effort import SEARCH_EFFORTS

    found = SEARCH_EFFORTS.get(effort)
    return found.race.first_reps if found is not None else DEFAULT_RACE.first_reps
