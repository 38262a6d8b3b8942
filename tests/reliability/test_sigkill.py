"""SIGKILL in the middle of writing: a real process writes tuning records and bytecode
entries in a loop and is killed at random moments, many times. Afterwards every entry
either loads cleanly or is absent; nothing torn is ever seen (no warning, no bad data)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rel_helpers import cache_warnings, child_env, only_cache_warnings

from tunedsl import bytecode
from tunedsl.store import records

KILLS = 25
KEYS = 6
SEED = 20261122

WRITER = r"""
import os, sys
sys.path.insert(0, {here!r})
from test_sigkill import module_source, record_for
from tunedsl import bytecode
from tunedsl.store import records

directory = {directory!r}
i = 0
while True:
    k = i % {keys}
    records.save_record(record_for(k, generation=i))
    bytecode.compile_and_store(module_source(k, generation=i), os.path.join(directory, f"m{{k}}.py"))
    if i == 0:  # one record and one entry whole, however slow the machine: then the kills
        print("ready", flush=True)
    i += 1
"""


def module_source(k: int, generation: int = 0) -> bytes:
    # The generation is in a comment: same key, different bytes would be another entry, so
    # the text that is cached stays the same per k (only the key's entry is rewritten).
    del generation
    lines = [f"from tunedsl import autotune, cdiv\nVALUE = {k}\n"]
    lines += [
        f"def f{j}(k, x, n):\n"
        f"    return autotune(space=dict(t=[{j + 1}, 2]), blocks=cdiv(n, $t), k(x, T=$t))\n"
        for j in range(40)
    ]
    return "".join(lines).encode()


def digest_of(k: int) -> str:
    return f"{k:02x}" * 32


def record_for(k: int, generation: int) -> records.Record:
    """A large record (many results), so a write takes long enough to be cut in the middle."""
    from tunedsl.model.config import Config

    results = tuple(
        records.ConfigResult(Config(TILE=2**j, gen=generation), "ok", 1.0 + j, 0.01, 10, 0.5)
        for j in range(400)
    )
    return records.Record(
        site=f"site{k}",
        digest=digest_of(k),
        key={"k": k, "pad": "x" * 2000},
        chosen=results[0].config,
        results=results,
        kernel={"qualname": "kernel"},
        signature={},
        device={},
        versions={},
        context={},
        tuning_s=1.0,
        timestamp=float(generation),
    )


def test_sigkill_during_writes_never_leaves_a_torn_entry(tmp_path: Path) -> None:
    cache = Path(os.environ["TUNEDSL_CACHE_DIR"])
    script = tmp_path / "writer.py"
    script.write_text(
        WRITER.format(here=str(Path(__file__).parent), directory=str(tmp_path), keys=KEYS)
    )
    env = child_env(cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    rng = random.Random(SEED)
    for _ in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL

    # Every entry loads or is absent, silently; something was written at all.
    loaded_records = loaded_code = 0
    with cache_warnings() as caught:
        for k in range(KEYS):
            record = records.load_record(digest_of(k))
            if record is not None:
                loaded_records += 1
                assert record.digest == digest_of(k)
                assert len(record.results) == 400
            code = bytecode.lookup(module_source(k), str(tmp_path / f"m{k}.py"))
            if code is not None:
                loaded_code += 1
                namespace: dict[str, object] = {}
                exec(code, namespace)
                assert namespace["VALUE"] == k
    assert only_cache_warnings(caught) == []
    assert loaded_records > 0 and loaded_code > 0
    # No file under an entry's name is torn: each record file parses, each entry is listed.
    for path in records.iter_record_files():
        records.Record.from_json(json.loads(path.read_text()))
    assert len(list(bytecode.iter_entries())) <= KEYS
    # Known limitation (see RELIABILITY.md): a killed writer leaves its temporary file behind
    # (never read as an entry). At most one per kill and store.
    leftovers = [p for p in cache.rglob(".*tmp*") if p.is_file()]
    assert len(leftovers) <= 2 * KILLS


TUNER = """
import sys, time
sys.path.insert(0, {here!r})
import torch
from rel_kernels import vadd
from tunedsl import autotune_launch

slow = sys.argv[1] == "slow"
n = 1000
a, b, c = torch.ones(n), torch.ones(n), torch.zeros(n)
announced = []

def hook(args):
    if not announced:
        announced.append(True)
        print("TUNING", flush=True)
    if slow:
        time.sleep(0.5)  # the key's lock is held all along

result = autotune_launch(
    vadd,
    space=dict(TILE=[64, 128]),
    grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
    args=(a, b, c, n),
    kwargs=lambda cfg: dict(TILE=cfg.TILE),
    pre_hook=hook,
    effort="quick",
    name="killed-tuner",
)
assert torch.equal(c, a + b)
print("RESULT", result.source, flush=True)
"""


@pytest.mark.needs_triton
def test_a_tuner_killed_holding_the_key_lock_does_not_block_the_next(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    script = tmp_path / "tuner.py"
    script.write_text(TUNER.format(here=str(Path(__file__).parent)))
    env = child_env(cache)
    victim = subprocess.Popen(
        [sys.executable, str(script), "slow"], env=env, stdout=subprocess.PIPE, text=True
    )
    assert victim.stdout is not None
    assert victim.stdout.readline().strip() == "TUNING"
    assert list((cache / "locks").glob("*.lock")), "the tuner holds a lock file"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert not list((cache / "records").glob("*.json"))

    after = subprocess.run(
        [sys.executable, str(script), "fast"], env=env, capture_output=True, text=True, timeout=120
    )
    assert after.returncode == 0, after.stderr[-3000:]
    assert "RESULT tuned" in after.stdout  # it took the lock and tuned: nothing was stuck
    (record,) = (cache / "records").glob("*.json")
    records.Record.from_json(json.loads(record.read_text()))
