"""The measuring workers of ``multi_device.py`` (backends layer): one per device, kept warm.

The first worker of a device is ``isolated.worker_for(device)`` (shared with
``isolate=True``, kept warm between tunings); a device listed twice (tests on the CPU: two
interpreter workers) gets more from here. ``Slot`` is one worker as the multi-device
measurer drives it.
"""

from __future__ import annotations

import atexit
import statistics
import threading
from collections.abc import Sequence

from tunedsl.backends.host_compile import WorkerSplit
from tunedsl.backends.isolated import IsolatedMeasurer, Worker, worker_for
from tunedsl.engine.seams import MeasureFailure, Measurer
from tunedsl.model.config import Config

__all__ = ["Slot", "open_here", "settle_leaders", "shutdown_workers", "worker", "workers_warm"]

_extra: dict[tuple[int | None, int], Worker] = {}
_extra_lock = threading.Lock()


def worker(device: int | None, nth: int) -> Worker:
    """The ``nth`` worker of ``device`` (0: the one ``isolated`` keeps)."""
    if nth == 0:
        return worker_for(device)
    with _extra_lock:
        found = _extra.get((device, nth))
        if found is None:
            found = _extra[(device, nth)] = Worker(device)
        return found


def workers_warm(devices: Sequence[int]) -> bool:
    """Whether every worker ``devices`` would use is already running (kept from an earlier
    tuning): then starting them costs no process start."""
    seen: dict[int, int] = {}
    for device in devices:
        nth = seen[device] = seen.get(device, -1) + 1
        with _extra_lock:
            known = worker_for(device) if nth == 0 else _extra.get((device, nth))
        if known is None or not known.alive():
            return False
    return True


@atexit.register
def shutdown_workers() -> None:
    """Kill the extra workers (the first of each device belongs to ``isolated``)."""
    with _extra_lock:
        for each in _extra.values():
            each.kill()
        _extra.clear()


class Slot:
    """One worker: its measurer, a lock (its pipe carries one request at a time), what it
    has loaded, its thread and where its time went."""

    def __init__(self, measurer: IsolatedMeasurer, stats: WorkerSplit) -> None:
        # ``measurer``: the worker's, or the ``InProcessMeasurer`` of a local caller
        self.measurer = measurer
        self.lock = threading.Lock()
        self.ready: set[Config] = set()
        self.dead: str | None = None  # why it takes no more work
        self.stats = stats
        self.started = threading.Event()  # the worker process is up (or could not start)
        self.wanted = 0  # the search's thread waits for this worker: take no new part
        self.thread: threading.Thread | None = None


def open_here(measurer: Measurer, config: Config, reps: int) -> tuple[str, str | None, list[float]]:
    """Open ``config`` in this process (the caller's GPU of a ``local`` multi-device tuning):
    prepare it, take its opening ``reps``; (status, why it failed, samples)."""
    for prepared in measurer.prepare([config]):
        if prepared.status != "ok" or prepared.error is not None:
            return prepared.status, prepared.error, []
    try:
        return "ok", None, measurer.sample(config, reps)
    except MeasureFailure as err:
        return "failed", f"run: {err}", []


def settle_leaders(slot: Slot, leaders: Sequence[Config], reps: int) -> None:
    """The auto timer's choice for the final race, on a GPU: the worker settles on the
    leaders' opening samples (``reps`` each, taken now on that worker)."""
    from tunedsl.backends import triton as bt
    from tunedsl.engine.bench import Timing

    if bt.device_facts()["type"] not in ("cuda", "hip"):
        return
    first = {}
    for config in leaders:
        if config in slot.ready:
            try:
                samples = slot.measurer.sample(config, reps)
            except MeasureFailure:
                continue
            mid = statistics.median(samples)
            first[config] = Timing(mid, 0.0, len(samples), min(samples))
    if first:
        slot.measurer.settle(first)
