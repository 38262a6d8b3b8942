"""Record lookup latency: a Redis hit against a local file hit (and this process's memory).

Starts its own ``redis-server`` on a free loopback port (no persistence), stores one
realistic record (48 configurations, like the anchor matmul's) in each store, and times
``get`` of that digest, many times, in this process. A loopback Redis is the best case: a
fleet's Redis adds the network round trip. A Redis hit is paid once per key and node: the
layered store writes it through to the local files.

    python benchmarks/bench_record_stores.py [--n 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))


def record_with(configs: int, digest: str):  # a record the size of a real one
    from tunedsl.model.config import Config
    from tunedsl.store.records import ConfigResult, Record

    results = tuple(
        ConfigResult(Config(BM=16 * (i % 4 + 1), BN=16 * (i // 4 % 4 + 1), BK=32, num_warps=4,
                            num_stages=2 + i // 16), "ok", 0.1 + i / 100, 0.01, 50, 0.1,
                     options={"num_warps": 4, "num_stages": 2 + i // 16}, constexprs={})
        for i in range(configs)
    )  # fmt: skip
    return Record(
        site="anchor_mm.py:40:4", digest=digest, key={"args": {"a": {"shape": [2048, 2048]}}},
        chosen=results[0].config, results=results,
        kernel={"module": "m", "qualname": "mm", "file": "/m.py", "source_hash": "0" * 64},
        signature={"a": "*fp16"}, device={"type": "cuda", "name": "bench"},
        versions={"triton": "3.6"}, context={"env": {}}, tuning_s=10.0, timestamp=1.0e9,
    )  # fmt: skip


def time_gets(get, digest: str, n: int) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        assert get(digest) is not None
        samples.append((time.perf_counter() - start) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    from redis_server import RedisServer

    from tunedsl.store.files import FileRecordStore
    from tunedsl.store.layered import LayeredStore
    from tunedsl.store.redis_store import RedisRecordStore, RedisSettings

    digest = "ab" * 32
    record = record_with(48, digest)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        try:
            files = FileRecordStore(Path(tmp) / "records")
            redis_store = RedisRecordStore(RedisSettings(url=server.url))
            files.put(record)
            redis_store.put(record)
            layered = LayeredStore([files, redis_store])
            layered.get(digest)
            rows = [
                ("memory hit (layered store)", layered.get),
                ("local file hit", files.get),
                ("Redis hit (loopback)", redis_store.get),
            ]
            size = len(Path(files.root / f"{digest}.json").read_bytes())
            print(f"record: 48 configurations, {size} bytes of JSON; {args.n} gets each")
            print(f"{'lookup':<28} {'median us':>10} {'p99 us':>10}")
            for name, get in rows:
                time_gets(get, digest, 50)  # warm-up
                median, p99 = time_gets(get, digest, args.n)
                print(f"{name:<28} {median:>10.1f} {p99:>10.1f}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
