"""Concurrency: eight processes tuning the same keys at once, and sixteen threads calling
one site with a mix of new and known keys. Each key is tuned exactly once; every caller
gets correct results; the cache holds one valid record per key."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from rel_helpers import child_env, record_files, write_dsl_project

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

PROCESSES = 8
THREADS = 16
CALLS_PER_THREAD = 6


@pytest.mark.slow  # eight interpreters importing torch on CI's two cores: ~30 s
def test_eight_processes_tuning_the_same_keys(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    script = write_dsl_project(tmp_path)
    env = child_env(cache, REL_BARRIER=str(barrier))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # all of them write the same bytecode entry too
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "always", "-m", "tunedsl", "run", str(script)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(tmp_path),
        )
        for _ in range(PROCESSES)
    ]
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready-*"))) < PROCESSES:
        assert time.monotonic() < deadline, "the processes did not all start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.02)
    (barrier / "go").touch()
    outputs = [p.communicate(timeout=180) for p in procs]

    tuned: Counter[str] = Counter()
    chosen: dict[str, set[str]] = {}
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]  # each asserts its own results are correct
        assert "CacheWarning" not in err, err[-3000:]
        rows = [line.split() for line in out.splitlines() if line.startswith("RESULT")]
        assert [r[1] for r in rows] == ["40", "50", "60"]
        for _, n, source, tile in rows:
            assert source in ("tuned", "disk"), rows
            tuned[n] += source == "tuned"
            chosen.setdefault(n, set()).add(tile)
    assert tuned == {"40": 1, "50": 1, "60": 1}  # each key tuned once, by one process
    assert all(len(tiles) == 1 for tiles in chosen.values()), chosen  # everyone agrees
    files = record_files(cache)
    assert len(files) == 3
    for path in files:
        record = records.Record.from_json(json.loads(path.read_text()))
        size = record.key["args"]["a"]["shape"][0]  # n is keyed by type; the shapes by size
        assert str(record.chosen.tile) in chosen[str(size)]
    assert len(list((cache / "bytecode").glob("*.tbc"))) == 2  # main script + kernel module


def test_sixteen_threads_on_one_site_tune_each_key_once() -> None:
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    def call(n: int):
        a = torch.arange(n, dtype=torch.float32)
        b = torch.full((n,), 2.0)
        c = torch.zeros(n)
        result = autotune_launch(
            vadd,
            space={"TILE": [16, 32]},
            grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
            args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.TILE},
            key=n,  # one key per size
            effort="quick",
            name="threads",
        )
        return result, bool(torch.equal(c, a + b))

    known = [40, 48]
    new = [56, 64, 72, 80]
    for n in known:  # tuned before the threads start: these are known keys
        assert call(n)[0].source == "tuned"

    results: list[tuple[int, str, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            for _ in range(CALLS_PER_THREAD):
                n = rng.choice(known + new)
                result, correct = call(n)
                with lock:
                    results.append((n, result.source, correct))
        except BaseException as err:
            with lock:
                errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(results) == THREADS * CALLS_PER_THREAD
    assert all(correct for _, _, correct in results)
    tunings = Counter(n for n, source, _ in results if source == "tuned")
    seen_new = {n for n, _, _ in results if n in new}
    assert tunings == dict.fromkeys(seen_new, 1)  # every new key tuned exactly once
    assert all(source in ("tuned", "memory") for _, source, _ in results)
    assert len(record_files(Path(os.environ["TUNEDSL_CACHE_DIR"]))) == len(known) + len(seen_new)
