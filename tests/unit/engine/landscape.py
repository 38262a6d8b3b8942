"""A synthetic tuning landscape: a deterministic cost over a large space, seeded noise and a
simulated clock, measured through the real ``Measurer`` protocol (no GPU, no wall clock).

The space has 288,000 points (tiles, group size, warps, stages, a layout and split-K) and a
shared-memory constraint; some configurations "run out of registers" when compiled. The
cost is a bowl in log space with interactions and a deterministic per-configuration bump,
whose unique global best is ``BEST`` (cost 1.0 ms; every other point costs more).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterator, Sequence

from tunedsl.engine.seams import MeasureFailure, Prepared
from tunedsl.model.config import Config
from tunedsl.model.space import Axis, Space

BEST = Config(
    BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=4,
    layout="nn", split_k=1,
)  # fmt: skip


def fits_shared_memory(c: Config) -> bool:
    return (c.BLOCK_M * c.BLOCK_K + c.BLOCK_K * c.BLOCK_N) * 2 * c.num_stages <= 196_608


def make_space() -> Space:
    return Space(
        BLOCK_M=Axis.pow2(16, 256),
        BLOCK_N=[16, 32, 64, 128, 256],
        BLOCK_K=Axis.pow2(16, 128),
        GROUP_M=[1, 2, 4, 8],
        num_warps=[1, 2, 4, 8, 16],
        num_stages=Axis.ordered(range(1, 9)),
        layout=["nn", "nt", "tn"],
        split_k=[1, 2, 4],
        constraint=fits_shared_memory,
    )


def cost_ms(c: Config) -> float:
    """The true time of ``c``: 1.0 at BEST, more everywhere else."""
    return one_basin(c)


def one_basin(c: Config) -> float:
    lm, ln, lk = math.log2(c.BLOCK_M), math.log2(c.BLOCK_N), math.log2(c.BLOCK_K)
    bowl = (
        0.08 * (lm - 7) ** 2
        + 0.08 * (ln - 7) ** 2
        + 0.05 * (lk - 5) ** 2
        + 0.03 * (math.log2(c.GROUP_M) - 2) ** 2
        + 0.06 * (math.log2(c.num_warps) - 2) ** 2
        + 0.04 * (c.num_stages - 4) ** 2
        + 0.02 * (lm - ln) ** 2
        + {"nn": 0.0, "nt": 0.05, "tn": 0.12}[c.layout]
        + {1: 0.0, 2: 0.03, 4: 0.1}[c.split_k]
    )
    if c == BEST:
        return 1.0
    digest = hashlib.sha256(c.dumps().encode()).digest()
    bump = 0.01 + 0.04 * digest[0] / 255  # ruggedness: no point ties the best
    return 1.0 + bowl + bump


def compiles(c: Config) -> bool:
    return c.BLOCK_M * c.BLOCK_N // c.num_warps <= 4096  # "registers"


class SimClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LandscapeMeasurer:
    """A ``Measurer`` over the landscape: compiling costs ``compile_s`` of simulated time,
    each repetition its cost plus ``overhead_s``; timings carry 2% seeded noise. It compiles
    one configuration at a time (``compile_workers``, the driver's hint to the strategy)."""

    compile_workers = 1

    def __init__(
        self,
        seed: int = 0,
        noise: float = 0.02,
        compile_s: float = 0.02,
        overhead_s: float = 0.002,
        clock: SimClock | None = None,
        fail_at_run: Sequence[Config] = (),
    ) -> None:
        self.rng = random.Random(seed)
        self.noise = noise
        self.compile_s = compile_s
        self.overhead_s = overhead_s
        self.clock = clock or SimClock()
        self.fail_at_run = set(fail_at_run)
        self.prepared: Counter[Config] = Counter()
        self.reps: Counter[Config] = Counter()
        self.calls: list[tuple[Config, int]] = []
        self.prefetched: list[list[Config]] = []
        self.closed = False

    def prepare(self, configs: Sequence[Config]) -> Iterator[Prepared]:
        for cfg in configs:
            self.clock.now += self.compile_s
            self.prepared[cfg] += 1
            if compiles(cfg):
                yield Prepared(cfg)
            else:
                yield Prepared(cfg, "failed", "compile: out of resources: registers")

    def prefetch(self, configs: Sequence[Config]) -> None:
        self.prefetched.append(list(configs))

    def sample(self, config: Config, reps: int) -> list[float]:
        assert self.prepared[config], f"{config} sampled before it was prepared"
        if config in self.fail_at_run:
            raise MeasureFailure("illegal memory access")
        self.calls.append((config, reps))
        self.reps[config] += reps
        true = cost_ms(config)
        out = []
        for _ in range(reps):
            self.clock.now += self.overhead_s + true / 1e3
            out.append(true * (1 + self.rng.gauss(0, self.noise)))
        return out

    def close(self) -> None:
        self.closed = True
