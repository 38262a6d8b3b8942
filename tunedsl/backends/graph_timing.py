"""CUDA-graph timing for short kernels (backends layer; GPU only, imported lazily).

A CUDA-event measurement of one launch includes the gap between the start event and the
kernel's start on the GPU; for a kernel of a few microseconds that gap is of the size of
the kernel and can mis-rank configurations (PyTorch saw an RMSNorm picked at 6.19 µs over
one at 4.14 µs). ``CudaGraphTimer`` captures ``n`` back-to-back launches of a configuration
in a CUDA graph once, then times each *replay* between two events and reports
``elapsed / n`` per launch: there is no CPU launch in the timed region (Triton's
``do_bench_cudagraph`` idea).

Where the L2 flush and the argument guards run (and why):

- ``setup()`` (``restore_value`` copies, ``reset_to_zero``, ``pre_hook``) and the L2 flush
  run **before each replay, outside the timed region, and are not captured**: a
  ``pre_hook`` is host code that cannot be captured, and a captured flush of 256 MiB
  (~100 µs) would dwarf the microsecond kernel being timed, so subtracting it is noise.
- Consequently the ``n`` launches of one replay run back to back: launch 2..n see the L2
  warmed by launch 1 and the outputs of the launches before them. That is the steady state
  of a serving loop, and harmless for kernels whose time does not depend on their data.
  For a site with ``restore_value``, ``reset_to_zero`` or ``pre_hook`` the ``auto`` mode
  therefore never switches to graphs (every launch must see restored inputs); forcing
  ``timing="graph"`` there is the user's call (documented in docs/runtime.md).

``AutoTimer`` (``timing="auto"``, the default on a GPU) probes the first configuration with
events (five launches, discarded), then ``settle``: if the fastest is under
``GRAPH_THRESHOLD_MS``, every sample of the tuning is graph-timed, else every sample is
event-timed. One tuning's samples never mix the two (a graph-timed leader always looks
faster than an event-timed rival).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.backends.timers import CudaEventTimer, WallTimer
from tunedsl.backends.triton import device_facts

#: A kernel faster than this (a CUDA-event probe) is short enough that the launch gap
#: matters: ``auto`` mode then graph-times the whole tuning. Not higher: a replay's
#: launches run back to back on a warm L2, which ranks longer kernels differently from
#: the cold-L2 launch they are tuned for: the 30 µs anchor matmul of ``bench_cold_tune.py``
#: (24 MB in the H100's 50 MB L2), graph-timed, chose a configuration 5.0% and 5.8% slower
#: than the best under ``do_bench``'s cold-L2 timing in 2 of 3 runs; event-timed, never.
#: Event timing after an L2 flush keeps a 20 µs kernel's launch queued behind the flush,
#: so no launch gap reaches the timed region.
GRAPH_THRESHOLD_MS = 0.02
#: A replay lasts about this long: ``n = GRAPH_REPLAY_MS / estimate``, clamped below.
GRAPH_REPLAY_MS = 1.0
GRAPH_LAUNCHES = (4, 500)


class CudaGraphTimer(CudaEventTimer):
    """Times replays of a captured graph of ``n`` launches; samples are per launch."""

    kind = "cuda-graph"

    def __init__(self) -> None:
        super().__init__()
        # run -> (run, graph, launches): keyed by identity, the run kept alive beside it.
        self.graphs: dict[int, tuple[Callable[[], Any], Any, int]] = {}
        # device -> the side stream captures run on. Never ``torch.cuda.graph``'s default:
        # PyTorch makes that one stream per process, on the device current at the first
        # capture, and a capture on it makes its device current. After a tuning on GPU 1,
        # every later capture on GPU 0 (this timer's, and the program's own) would run on
        # GPU 1's stream with GPU 0's tensors.
        self.streams: dict[int, Any] = {}

    def _graph(self, run: Callable[[], Any], setup: Callable[[], Any]) -> tuple[Any, int]:
        cached = self.graphs.get(id(run))
        if cached is not None and cached[0] is run:
            return cached[1], cached[2]
        torch = self.torch
        # Estimate one launch (compiles it too: nothing compiles inside the capture).
        estimate = min(self.timed(run, setup, 3))
        low, high = GRAPH_LAUNCHES
        launches = max(low, min(high, int(GRAPH_REPLAY_MS / max(estimate, 1e-4))))
        setup()
        torch.cuda.synchronize()
        device = torch.cuda.current_device()
        stream = self.streams.get(device)
        if stream is None:
            stream = self.streams[device] = torch.cuda.Stream(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(launches):
                run()
        torch.cuda.synchronize()
        self.graphs[id(run)] = (run, graph, launches)
        return graph, launches

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        graph, launches = self._graph(run, setup)
        return [ms / launches for ms in self.timed(graph.replay, setup, reps)]

    def close(self) -> None:
        """Destroy the graphs now, at the end of the tuning. Left to the garbage collector,
        a graph could be destroyed while the program captures one of its own, and a graph
        destroyed during a capture invalidates that capture (``operation not permitted
        when stream is capturing``)."""
        self.graphs.clear()


class AutoTimer:
    """Events, or graphs for every sample when a probe of the kernel is short (``settle``)."""

    def __init__(self, per_launch_setup: bool) -> None:
        self.events = CudaEventTimer()
        self.graph: CudaGraphTimer | None = None
        self.per_launch_setup = per_launch_setup

    @property
    def kind(self) -> str:
        return "cuda-events" if self.graph is None else "cuda-graph"

    def settle(self, first_medians_ms: Sequence[float]) -> None:
        """Called once, before any sample is kept: graph timing from now on when the
        probe (its fastest launch) is under ``GRAPH_THRESHOLD_MS``."""
        if self.per_launch_setup or not first_medians_ms:
            return
        if min(first_medians_ms) < GRAPH_THRESHOLD_MS:
            self.graph = CudaGraphTimer()
            self.graph.flush_buffer = self.events.flush_buffer  # one flush buffer, not two

    def sample(self, run: Callable[[], Any], setup: Callable[[], Any], reps: int) -> list[float]:
        timer = self.graph if self.graph is not None else self.events
        return timer.sample(run, setup, reps)

    def close(self) -> None:
        if self.graph is not None:
            self.graph.close()


def make_timer(timing: str = "auto", per_launch_setup: bool = False) -> Any:
    """The timer for ``timing`` ("auto", "graph", "events"; see ``graph_timing.py``). Off a
    GPU (the interpreter) always the wall-clock timer. ``per_launch_setup``: the site
    restores or zeroes arguments (or has a pre-hook) before every launch, so ``auto``
    keeps per-launch event timing."""
    if device_facts()["type"] not in ("cuda", "hip"):
        return WallTimer()
    if timing == "events":
        return CudaEventTimer()
    if timing == "graph":
        return CudaGraphTimer()
    return AutoTimer(per_launch_setup)
