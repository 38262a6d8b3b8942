"""Event timing beside a thread that wants the GIL (GPU): what the timer's guards buy.

Triton's launcher lets go of the GIL around ``cuLaunchKernel``. While tuning, compile
threads load kernels in the same process; one that takes the GIL then keeps the timing
thread from queueing the end event, and the GPU's wait is timed. ``CudaEventTimer`` takes a
late sample again and shortens the switch interval while it samples
(``backends/timers.py``). This prints, for a 64 MiB read (~25 µs) and a 2048^3 fp16 matmul
(~30 µs): the median of 31 samples alone, beside a GIL-holding thread with the guards, and
beside it without them, for several switch intervals; then beside a thread whose Python
work goes through the timers' gate, as the compile threads' loads do.

    python benchmarks/bench_timing_contention.py
"""

from __future__ import annotations

import statistics
import sys
import threading

import torch
import triton
import triton.language as tl

from tunedsl.backends import timers


@triton.jit
def read_sum(x, partial, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(partial + tl.program_id(0), tl.sum(tl.load(x + offs, mask=offs < n, other=0.0)))


def hold(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        for _ in range(1000):
            count += 1


def hold_through_the_gate(stop: threading.Event) -> None:
    """As a compile thread's loads: Python in chunks of about a millisecond, each one
    through the timers' gate."""
    while not stop.is_set():
        with timers.GATE.helper_work():
            count = 0
            for _ in range(20_000):
                count += 1


def kernels() -> dict:
    n = 1 << 24
    x = torch.randn(n, device="cuda")
    partial = torch.empty(triton.cdiv(n, 4096), device="cuda")
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    out = torch.empty_like(a)
    return {
        "read 64 MiB": lambda: read_sum[(triton.cdiv(n, 4096),)](x, partial, n, TILE=4096),
        "torch.mm 2048^3": lambda: torch.mm(a, a, out=out),
    }


def median(timer: timers.CudaEventTimer, run) -> float:
    return statistics.median(timer.sample(run, lambda: None, 31)) * 1e3


def main() -> None:
    default = sys.getswitchinterval()
    guards = timers.SAMPLING_SWITCH_INTERVAL_S, timers.RETAKES_PER_REP
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch "
          f"{torch.__version__}; medians of 31 samples in µs")  # fmt: skip
    for name, run in kernels().items():
        run()
        timer = timers.CudaEventTimer()
        quiet = median(timer, run)
        print(f"{name}: flush {timer.flush_time_ms() * 1e3:.1f} µs; alone {quiet:.1f}")
        stop = threading.Event()
        holder = threading.Thread(target=hold, args=(stop,), daemon=True)
        holder.start()
        try:
            for interval in (5e-6, 2e-5, 1e-4, default):
                timers.SAMPLING_SWITCH_INTERVAL_S = interval
                for retakes in (timers.RETAKES_PER_REP, 0):
                    saved, timers.RETAKES_PER_REP = timers.RETAKES_PER_REP, retakes
                    before = timer.retaken
                    value = median(timer, run)
                    timers.RETAKES_PER_REP = saved
                    print(f"  beside a GIL holder, switch {interval * 1e6:>6.0f} µs, retakes "
                          f"{'on ' if retakes else 'off'}: {value:8.1f} ({value / quiet:5.2f}x; "
                          f"{timer.retaken - before} taken again)")  # fmt: skip
        finally:
            stop.set()
            holder.join(10)
        timers.SAMPLING_SWITCH_INTERVAL_S, timers.RETAKES_PER_REP = guards
        stop = threading.Event()
        holder = threading.Thread(target=hold_through_the_gate, args=(stop,), daemon=True)
        holder.start()
        try:
            before = timer.retaken
            value = median(timer, run)
            print(f"  beside a thread working through the gate (default guards): {value:8.1f} "
                  f"({value / quiet:5.2f}x; {timer.retaken - before} taken again)")  # fmt: skip
        finally:
            stop.set()
            holder.join(10)


if __name__ == "__main__":
    main()
