"""A tuning in the process (no worker can take it: its pre_hook closes over a lock) that is
killed (``SIGKILL``: the OOM killer, a scheduler's time limit, a user) while it launches a
configuration. One death in a launch is no proof of a crash: the next tuning of the key
measures that configuration again, and only a second death on it leaves it out, recorded
failed. Real subprocesses killed by a real signal from the configuration's own pre_hook,
real in-flight files (``store/inflight.py``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rel_helpers import child_env, write_script

pytestmark = pytest.mark.needs_triton

# WORK=1 is by far the fastest configuration (the others loop WORK times); KILL_ON names
# the WORK values whose pre_hook kills the process, as a kill from outside would.
SCRIPT = """
import os
import signal
import threading
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch


@triton.jit
def work(x, y, n, WORK: tl.constexpr, TILE: tl.constexpr):
    offs = tl.arange(0, TILE)
    acc = tl.zeros((TILE,), dtype=tl.float32)
    for _ in range(WORK):
        acc += tl.load(x + offs, mask=offs < n)
    tl.store(y + offs, acc, mask=offs < n)


lock = threading.Lock()  # no worker process can be sent this hook
kill_on = {int(w) for w in os.environ.get("KILL_ON", "").split(",") if w}


def hook(args):
    with lock:
        if args["WORK"] in kill_on:
            os.kill(os.getpid(), signal.SIGKILL)


works = [int(w) for w in os.environ.get("WORKS", "1,40").split(",")]
x, y = torch.ones(16), torch.empty(16)
res = autotune_launch(work, space=dict(WORK=works, TILE=[16]), grid=lambda c: (1,),
                      args=(x, y, 16), kwargs=lambda c: dict(WORK=c.WORK, TILE=c.TILE),
                      pre_hook=hook, effort="quick", name="killed-site")
print("RESULT", res.source, res.config.WORK, flush=True)
"""


def _run(script: Path, cache: Path, kill_on: str = "", works: str = "1,40") -> Any:
    env = child_env(cache, TUNEDSL_QUIET="1", KILL_ON=kill_on, WORKS=works)
    return subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )


def _entries(cache: Path) -> list[dict[str, Any]]:
    directory = cache / "inflight"
    files = sorted(directory.iterdir()) if directory.is_dir() else []
    return [json.loads(p.read_text()) for p in files]


def _record(cache: Path) -> dict[str, dict[str, Any]]:
    """The stored record's results, by WORK."""
    (path,) = (cache / "records").glob("*.json")
    text = path.read_text()
    results = json.loads(text)["results"]
    return {str(r["config"]["WORK"]): r for r in results}


def _killed(out: subprocess.CompletedProcess[str]) -> bool:
    return out.returncode == -signal.SIGKILL


def test_one_kill_in_a_launch_is_measured_again_and_chosen_when_fastest(tmp_path: Path) -> None:
    # A kill while the fastest configuration was launched left it out, recorded failed, and
    # every later run launched a slower one from that record.
    script = write_script(tmp_path / "killed_site.py", SCRIPT)
    cache = tmp_path / "cache"
    first = _run(script, cache, kill_on="1")
    assert _killed(first), first.stdout + first.stderr
    (entry,) = _entries(cache)
    assert entry["config"]["WORK"] == 1 and entry.get("deaths", 0) == 0, entry

    second = _run(script, cache)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "RESULT tuned 1" in second.stdout, second.stdout + second.stderr
    assert "measures Config(WORK=1, TILE=16) again" in second.stderr, second.stderr
    assert "a second death in its launch leaves it out" in second.stderr, second.stderr
    assert _record(cache)["1"]["status"] == "ok"
    assert _entries(cache) == []  # taken, and this tuning's own removed at its end

    third = _run(script, cache)  # the record decides
    assert third.returncode == 0 and "RESULT disk 1" in third.stdout, third.stdout + third.stderr


def test_a_second_death_on_the_same_configuration_leaves_it_out(tmp_path: Path) -> None:
    script = write_script(tmp_path / "killed_site.py", SCRIPT)
    cache = tmp_path / "cache"
    assert _killed(_run(script, cache, kill_on="1"))
    again = _run(script, cache, kill_on="1")  # measured again: it dies in it again
    assert _killed(again), again.stdout + again.stderr
    (entry,) = _entries(cache)
    assert entry["config"]["WORK"] == 1 and entry["deaths"] == 1, entry

    last = _run(script, cache)
    assert last.returncode == 0, last.stdout + last.stderr
    assert "RESULT tuned 40" in last.stdout, last.stdout + last.stderr
    assert "leaves them out, as failed" in last.stderr, last.stderr
    result = _record(cache)["1"]
    assert result["status"] == "failed", result
    assert "the process measuring it died in its launch" in result["reason"], result


def test_earlier_deaths_survive_a_death_on_another_configuration(tmp_path: Path) -> None:
    """The run that measures WORK=1 again dies on WORK=40 (its first death): its in-flight
    file carries WORK=1's death along, so the run after it still knows WORK=1 died once,
    and WORK=1's second death leaves it out for good."""
    script = write_script(tmp_path / "killed_site.py", SCRIPT)
    cache = tmp_path / "cache"
    assert _killed(_run(script, cache, kill_on="1"))
    assert _killed(_run(script, cache, kill_on="40"))
    (entry,) = _entries(cache)
    assert entry["config"]["WORK"] == 40 and entry["deaths"] == 0, entry
    assert entry["earlier"] == [{"config": {"TILE": 16, "WORK": 1}, "deaths": 1}], entry
    assert _killed(_run(script, cache, kill_on="1"))  # WORK=1's second death
    last = _run(script, cache)
    assert last.returncode == 0 and "RESULT tuned 40" in last.stdout, last.stdout + last.stderr
    record = _record(cache)
    assert record["1"]["status"] == "failed" and record["40"]["status"] == "ok", record


def test_damaged_or_hostile_death_counts_neither_crash_nor_skip_the_rule(tmp_path: Path) -> None:
    """In-flight files of dead processes whose ``deaths`` is not a count: a string, a
    float, ``true``, a negative number and a list count as no earlier death (measured
    again); a count past what Python parses as an int counts as an earlier death (left
    out). Junk in the earlier deaths a file carries is passed over; a whole one counts."""
    script = write_script(tmp_path / "killed_site.py", SCRIPT)
    cache = tmp_path / "cache"
    works = "1,2,3,4,5,6,7"
    out = _run(script, cache, works=works)
    assert out.returncode == 0, out.stdout + out.stderr
    (record,) = (cache / "records").glob("*.json")
    record.unlink()  # the key is tuned again
    deaths = {1: '"x"', 2: "1e400", 3: "true", 4: "-7", 5: "9" * 5000, 6: "[1]"}
    junk = [
        "junk", {"config": "x", "deaths": 5}, {"config": {"TILE": 16, "WORK": 1}, "deaths": "7"},
        {"config": {"TILE": 16, "WORK": 2}, "deaths": -3}, {"config": {"TILE": 16, "WORK": 3}},
        {"config": {"TILE": 16, "WORK": 7}, "deaths": 2},
    ]  # fmt: skip
    texts = [
        f'{{"config": {json.dumps({"TILE": 16, "WORK": work})}, "deaths": {count}}}'
        for work, count in deaths.items()
    ]
    texts += [json.dumps({"earlier": junk}), json.dumps({"earlier": {"not": "a list"}})]
    for pid, text in enumerate(texts, start=4194301):
        (cache / "inflight" / f"{record.stem}.{pid}.json").write_text(text)
    again = _run(script, cache, works=works)
    assert again.returncode == 0, again.stdout + again.stderr
    results = _record(cache)
    statuses = {w: r["status"] for w, r in results.items()}
    assert statuses == {"1": "ok", "2": "ok", "3": "ok", "4": "ok", "5": "failed", "6": "ok",
                        "7": "failed"}, results  # fmt: skip
    assert "died in its launch" in results["5"]["reason"], results["5"]
    assert "died in its launch" in results["7"]["reason"], results["7"]
    assert _entries(cache) == []
