"""Event timing beside a thread that wants the GIL (GPU): what other Python threads cost.

Triton's launcher lets go of the GIL around ``cuLaunchKernel``. A thread of the tuning
process that takes it then (a compile thread loading a kernel, the program's own work)
can keep the timing thread from queueing the end event, and the GPU's wait is timed:
``CudaEventTimer`` (``backends/timers.py``) does not hold such threads back. This prints,
for a 64 MiB read (~25 µs) and a 2048^3 fp16 matmul (~30 µs), the median of 31 samples
alone and beside a thread that runs pure Python without pause.

    python benchmarks/bench_timing_contention.py
"""

from __future__ import annotations

import statistics
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
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch "
          f"{torch.__version__}; medians of 31 samples in µs")  # fmt: skip
    for name, run in kernels().items():
        run()
        timer = timers.CudaEventTimer()
        quiet = median(timer, run)
        stop = threading.Event()
        holder = threading.Thread(target=hold, args=(stop,), daemon=True)
        holder.start()
        try:
            busy = median(timer, run)
        finally:
            stop.set()
            holder.join(10)
        print(f"{name}: alone {quiet:8.1f}; beside a GIL holder {busy:8.1f} "
              f"({busy / quiet:5.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
