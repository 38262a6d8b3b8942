"""Ctrl-C latency: seconds from SIGINT to process exit, against the 2-second promise.

The reliability tests (tests/reliability/test_sigint.py) check that an interrupted process
ends, writes no record and leaves no child; how fast it ends depends on the machine's load,
so it is measured here instead, on a quiet machine:

- ``tuning``: a plain script interrupted while measuring configurations;
- ``compiles-run``: ``tunedsl run`` interrupted during real cross-compiles (cuda:90, ptxas);
- ``compiles-python``: the same under plain ``python``.

    python benchmarks/bench_sigint.py [--trials 5]

Exit status 1 when any trial took longer than the promise (2 s).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))

from rel_helpers import child_env, write_script  # noqa: E402
from test_sigint import SLOW_TUNING, _interrupt_compiles  # noqa: E402

PROMISE_S = 2.0


def tuning_trial(tmp: Path) -> float:
    script = write_script(
        tmp / "slow.py", SLOW_TUNING.format(here=str(HERE.parent / "tests" / "reliability"))
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=child_env(tmp / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "TUNING":
        raise SystemExit(f"the tuning script did not start: {proc.communicate()[1][-2000:]}")
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    took = time.monotonic() - sent
    proc.communicate()
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    scenarios = {
        "tuning": tuning_trial,
        "compiles-run": lambda tmp: _interrupt_compiles(tmp, via_cli=True)[0],
        "compiles-python": lambda tmp: _interrupt_compiles(tmp, via_cli=False)[0],
    }
    worst = 0.0
    print(f"{'scenario':<18} {'median s':>9} {'max s':>7}  (promise: {PROMISE_S:g} s)")
    for name, trial in scenarios.items():
        times = []
        for _ in range(args.trials):
            with tempfile.TemporaryDirectory() as tmp:
                times.append(trial(Path(tmp)))
        worst = max(worst, max(times))
        print(f"{name:<18} {statistics.median(times):>9.2f} {max(times):>7.2f}")
    return 1 if worst > PROMISE_S else 0


if __name__ == "__main__":
    raise SystemExit(main())
