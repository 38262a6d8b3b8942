"""Reading keys keeps no memory per key: a serving loop meets a new row length, and with it a
new stride tuple, on every call for as long as it runs (pure Python, tensor-like objects)."""

from __future__ import annotations

import gc
import tracemalloc

from tunedsl.model import keys


class _Tensor:
    """What the key reads of a tensor: dtype, shape, strides, address."""

    def __init__(self, rows: int, cols: int) -> None:
        self.dtype = "float16"
        self.shape = (rows, cols)
        self._stride = (cols, 1)

    def stride(self) -> tuple[int, int]:
        return self._stride

    def data_ptr(self) -> int:
        return 0


def test_reading_keys_of_ever_new_strides_keeps_no_memory_per_stride() -> None:
    def read(first: int, count: int) -> None:
        for cols in range(first, first + count):
            keys.readable_value(_Tensor(8, cols), False, True)

    read(10, 2_000)  # the module's tables, at their working size
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        read(100_000, 50_000)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 50,000 new strides kept were several MiB (about 200 bytes each).
    assert kept < 1024 * 1024, f"{kept} bytes kept after reading 50,000 new strides"
