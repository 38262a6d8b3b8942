"""An in-process sweep (``use_ray=False``) keeps its task's records apart in its own thread
only: the process's other threads (a service, another sweep) read and write their own
records meanwhile. Real threads, real sweeps, real kernels under the interpreter."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.needs_triton

REPO = str(Path(__file__).resolve().parents[2])

# A workload that holds its task (records kept apart) open until the test releases it.
SWEEP = """
import sys
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def scale(x, y, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


@workload
def hold(n=128):
    gate = sys.modules["GATE"]
    gate.entered.set()
    assert gate.release.wait(120)
    x, y = torch.randn(n), torch.empty(n)
    autotune_launch(scale, space={"tile": [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(x, y, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="NAME")
"""

SERVE = """
import torch, triton, triton.language as tl
from tunedsl import autotune_launch, cdiv
@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)
def serve(n):
    a, b = torch.randn(n), torch.randn(n); c = torch.empty(n)
    return autotune_launch(vadd, space={"tile": [32, 64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="serving-vadd")
"""


class Sweep:
    """An in-process sweep of a held workload on a thread of its own."""

    def __init__(self, tmp: Path, name: str) -> None:
        self.gate = types.ModuleType(f"gate_{name}")
        self.gate.entered, self.gate.release = threading.Event(), threading.Event()  # type: ignore[attr-defined]
        sys.modules[self.gate.__name__] = self.gate
        self.script = tmp / f"sweep_{name}.py"
        self.script.write_text(SWEEP.replace("GATE", self.gate.__name__).replace("NAME", name))
        self.shapes = tmp / "shapes.json"
        self.shapes.write_text(json.dumps([{"n": 128}]))
        self.bundle = tmp / f"{name}.bundle.json"
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        from tunedsl.precompile.sweep import sweep

        try:
            sweep(str(self.script), str(self.shapes), use_ray=False, bundle=str(self.bundle), out=io.StringIO())  # fmt: skip
        except BaseException as err:
            self.error = err
            self.gate.entered.set()  # type: ignore[attr-defined]

    def start(self) -> None:
        self.thread.start()
        assert self.gate.entered.wait(120)  # type: ignore[attr-defined]
        assert self.error is None, self.error

    def finish(self) -> list[str]:
        """Release the task; the sites of the records in its bundle."""
        self.gate.release.set()  # type: ignore[attr-defined]
        self.thread.join(240)
        sys.modules.pop(self.gate.__name__, None)
        assert self.error is None, self.error
        header, *records = self.bundle.read_text().splitlines()  # JSON Lines: a record a line
        assert json.loads(header) == {"tunedsl_records": 2}
        return sorted(json.loads(line)["site"] for line in records)


@pytest.fixture
def released() -> Iterator[list[Sweep]]:
    """Sweeps a failing test leaves held are released (their threads end)."""
    sweeps: list[Sweep] = []
    yield sweeps
    for s in sweeps:
        s.gate.release.set()  # type: ignore[attr-defined]
        s.thread.join(240)
        sys.modules.pop(s.gate.__name__, None)


def test_a_serving_thread_keeps_its_stored_records_while_a_sweep_runs(
    tmp_path: Path, released: list[Sweep]
) -> None:
    # The redirect was the process's: the serving key stored on disk was a miss, tuned
    # again while the sweep ran, and its record landed in the sweep's bundle.
    (tmp_path / "serving.py").write_text(SERVE)
    earlier = subprocess.run(
        [sys.executable, "-c", "import serving; print(serving.serve(500).source)"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert earlier.stdout.split() == ["tuned"], earlier.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        import serving  # type: ignore[import-not-found]

        sweep = Sweep(tmp_path, "sweep-scale")
        released.append(sweep)
        sweep.start()
        result: Any = serving.serve(500)
        assert result.source == "disk"
        assert sweep.finish() == ["sweep-scale"]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("serving", None)


def test_two_sweeps_on_two_threads_keep_their_own_records(
    tmp_path: Path, released: list[Sweep]
) -> None:
    # The first sweep's task wrote its record into the second's directory, and its end
    # restored the cache's records under the second's task: each bundle held the wrong site.
    first, second = Sweep(tmp_path, "first-site"), Sweep(tmp_path, "second-site")
    released.extend([first, second])
    first.start()
    second.start()
    assert first.finish() == ["first-site"]
    assert second.finish() == ["second-site"]


def test_rules_still_decide_in_other_threads_while_one_measures() -> None:
    # ``rules.measuring()`` (a sweep's task, a precompile --tune) turned rules off for the
    # whole process: another thread's miss a rule decides was tuned instead.
    from tunedsl.store import rules

    entered, release, seen = threading.Event(), threading.Event(), []

    def measure() -> None:
        with rules.measuring():
            seen.append(rules.rules_decide())
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=measure)
    thread.start()
    assert entered.wait(60)
    try:
        assert rules.rules_decide() and seen == [False]
    finally:
        release.set()
        thread.join(60)
