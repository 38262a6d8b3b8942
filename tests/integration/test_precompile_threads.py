"""Precompile mode is the entering thread's (its contextvars context): while one thread runs
a precompile, the process's other threads call the same and other sites, which tune and
launch as usual. Real threads, real kernels under the interpreter."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.needs_triton


def _vadd() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def vadd(a, b, c, n, TILE: tl.constexpr):
        i = tl.program_id(0) * TILE + tl.arange(0, TILE)
        tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)

    return vadd


VADD = None


def _call(site: Callable[..., Any], n: int) -> tuple[Any, bool]:
    """One call of ``site`` (an ``autotune_launch`` line) on ``n`` elements: its result, and
    whether the output was written."""
    import torch

    a, b = torch.randn(n), torch.randn(n)
    c = torch.full((n,), -7.0)
    return site(a, b, c, n), torch.equal(c, a + b)


def site_one(a: Any, b: Any, c: Any, n: int) -> Any:
    from tunedsl import autotune_launch, cdiv

    return autotune_launch(VADD, space={"tile": [32, 64]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})  # fmt: skip


def site_two(a: Any, b: Any, c: Any, n: int) -> Any:
    from tunedsl import autotune_launch, cdiv

    return autotune_launch(VADD, space={"tile": [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})  # fmt: skip


@pytest.fixture(autouse=True)
def _kernel() -> None:
    global VADD
    if VADD is None:
        VADD = _vadd()


@contextmanager
def precompile_thread(work: Callable[[], Any] | None = None) -> Iterator[dict[str, Any]]:
    """A thread inside ``precompile_mode()`` (running ``work`` there first) for the block."""
    from tunedsl.precompile.workload import precompile_mode

    entered, release, out = threading.Event(), threading.Event(), {}

    def run() -> None:
        try:
            with precompile_mode() as session:
                out["session"] = session
                if work is not None:
                    out["work"] = work()
                entered.set()
                release.wait(60)
        except BaseException as err:
            out["error"] = err
            entered.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert entered.wait(120)
    try:
        yield out
    finally:
        release.set()
        thread.join(120)
    assert "error" not in out, out.get("error")


def _records() -> list[Path]:
    return sorted((Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records").glob("*.json"))


def test_a_site_first_called_in_another_thread_during_a_precompile_launches() -> None:
    # The mode was process-wide: the site was built as a precompile site, its call compiled,
    # returned None and never launched: the output was left unwritten, with no error.
    with precompile_thread():
        result, written = _call(site_one, 300)
    assert written and result is not None and result.source == "tuned"


def test_a_site_built_before_a_precompile_tunes_a_new_key_in_another_thread() -> None:
    # It raised a UsageError about the other thread's precompile_mode().
    assert _call(site_two, 100)[1]
    with precompile_thread():
        result, written = _call(site_two, 200)
    assert written and result.source == "tuned"


def test_a_site_the_precompile_thread_built_launches_in_the_others() -> None:
    # Built by the precompile thread's first call, the site is every thread's: the serving
    # thread's call of the key the precompile compiled launches it, during the mode and after.
    with precompile_thread(lambda: _call(site_one, 500)) as out:
        assert out["work"] == (None, False)  # the precompile's own call compiled only
        assert out["session"].totals()["interpreted"] == 2
        result, written = _call(site_one, 500)
        assert written and result.source == "tuned"
    assert _call(site_one, 500)[1]


def test_in_precompile_mode_a_site_built_before_it_compiles_a_new_key_never_tunes_it() -> None:
    # The mode's own thread: a site built (and tuned) before the block compiles a new key's
    # configurations there, nothing tuned or written, and launches again after the block.
    assert _call(site_two, 100)[1]
    before = _records()
    with precompile_thread(lambda: _call(site_two, 700)) as out:
        pass
    assert out["work"] == (None, False)
    assert out["session"].totals()["interpreted"] == 2 and _records() == before
    result, written = _call(site_two, 700)
    assert written and result.source == "tuned"


def test_overlapping_tuning_precompiles_measure_isolated_until_the_last_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each precompile(tune=True) set TUNEDSL_ISOLATE=1 and removed it as it ended: the first
    # to end turned isolation off under the other, still tuning on its own thread.
    from tunedsl.precompile.run import _isolate_by_default

    monkeypatch.delenv("TUNEDSL_ISOLATE", raising=False)
    first_in, second_in, first_out, second_go = (threading.Event() for _ in range(4))
    seen: list[str | None] = []

    def first() -> None:
        with _isolate_by_default(True):
            first_in.set()
            assert second_in.wait(60)
        first_out.set()

    def second() -> None:
        assert first_in.wait(60)
        with _isolate_by_default(True):
            second_in.set()
            assert first_out.wait(60)
            seen.append(os.environ.get("TUNEDSL_ISOLATE"))
            second_go.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert second_go.is_set() and seen == ["1"]
    assert "TUNEDSL_ISOLATE" not in os.environ
