"""Crash-isolated measurement (``isolate=True``) with real worker processes under the
interpreter: a configuration that segfaults, one that aborts and one that hangs are recorded
as failed with their reasons, the best working one is chosen, and this process lives on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from isolate_kernels import double_or_die

from tunedsl import autotune_launch, cdiv
from tunedsl.backends import isolated
from tunedsl.errors import TuningError, UsageError
from tunedsl.model.settings import resolve

pytestmark = pytest.mark.needs_triton
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_workers(monkeypatch: pytest.MonkeyPatch):
    # A short hang timeout keeps the test fast; kernels here take milliseconds.
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "20")
    isolated.shutdown_workers()
    yield
    isolated.shutdown_workers()


def test_crashing_and_hanging_configurations_fail_the_worker_not_the_caller() -> None:
    n = 300
    x = torch.randn(n)
    y = torch.full_like(x, float("nan"))
    result = autotune_launch(
        double_or_die,
        space={"mode": [0, 1, 2]},
        grid=lambda cfg: (cdiv(n, 64),),
        args=(x, y, n),
        kwargs=lambda cfg: {"TILE": 64, "MODE": cfg.mode},
        isolate=True,
    )
    assert result.source == "tuned"
    timings = {cfg.mode: r for cfg, r in result.timings.items()}
    assert timings[0].status == "ok" and timings[0].median_ms > 0
    assert timings[1].status == "failed" and "SIGSEGV" in (timings[1].reason or "")
    assert timings[2].status == "failed" and "timeout" in (timings[2].reason or "")
    assert result.config.mode == 0
    # The real launch ran here with the winner; the caller's process and data are fine.
    torch.testing.assert_close(y, x * 2)
    z = torch.empty_like(x)
    double_or_die[(cdiv(n, 64),)](x, z, n, TILE=64, MODE=0)
    torch.testing.assert_close(z, x * 2)


def test_a_hang_names_the_timeout_as_set_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    # TUNEDSL_CONFIG_TIMEOUT=1.5 was reported as "no answer after 2 s" (0.25 as "0 s"), with
    # no word of the setting that decides it.
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "1.5")
    n = 100
    x, y = torch.randn(n), torch.empty(n)
    with pytest.raises(TuningError) as caught:
        autotune_launch(
            double_or_die,
            space={"tile": [32, 64]},  # both spin (MODE 2)
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, y, n),
            kwargs=lambda cfg: {"TILE": cfg.tile, "MODE": 2},
            isolate=True,
        )
    message = str(caught.value)
    assert message.count("timeout: no answer after 1.5 s (TUNEDSL_CONFIG_TIMEOUT") == 2, message


def test_an_abort_fails_one_configuration_and_hooks_reach_the_worker() -> None:
    from isolate_kernels import double_or_abort

    n = 100
    x = torch.randn(n)
    y = torch.empty_like(x)
    seen: list[int] = []
    result = autotune_launch(
        double_or_abort,
        space={"abort": [True, False]},
        grid=(cdiv(n, 64),),
        args=(x, y, n),
        kwargs=lambda cfg: {"TILE": 64, "ABORT": cfg.abort},
        # A closure over a local list: sent by value; it runs (and appends) in the worker.
        pre_hook=lambda args: seen.append(1),
        isolate=True,
    )
    timings = {cfg.abort: r for cfg, r in result.timings.items()}
    assert timings[True].status == "failed" and "SIGABRT" in (timings[True].reason or "")
    assert timings[False].status == "ok" and result.config.abort is False
    assert seen == []  # the hook ran on the worker's copy of the list, not this one
    torch.testing.assert_close(y, x * 2)


def test_a_worker_that_leaves_cleanly_is_replaced_and_the_request_sent_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A GPU worker exits with status 0 after replying to a failed launch; a request that
    # finds it gone is sent again to a new worker, once: here the configuration itself
    # leaves, so the second try fails too and is recorded, and the next one is measured.
    from isolate_kernels import double_or_exit

    log = tmp_path / "exits.log"
    monkeypatch.setenv("TUNEDSL_TEST_EXIT_LOG", str(log))
    n = 100
    x = torch.randn(n)
    y = torch.empty_like(x)
    result = autotune_launch(
        double_or_exit,
        space={"leave": [True, False]},
        grid=(cdiv(n, 64),),
        args=(x, y, n),
        kwargs=lambda cfg: {"TILE": 64, "EXIT": cfg.leave},
        isolate=True,
    )
    timings = {cfg.leave: r for cfg, r in result.timings.items()}
    assert timings[True].status == "failed"
    assert "exited with status 0" in (timings[True].reason or "")
    assert log.read_text().splitlines() == ["attempt", "attempt"]  # sent twice, not more
    assert timings[False].status == "ok" and result.config.leave is False
    torch.testing.assert_close(y, x * 2)


def test_isolated_measurement_keeps_restore_value_semantics() -> None:
    from runtime_kernels import scale_inplace

    x = torch.arange(200, dtype=torch.float32)
    original = x.clone()
    result = autotune_launch(
        scale_inplace,
        space={"tile": [64, 128]},
        grid=lambda cfg: (cdiv(200, cfg.tile),),
        args=(x, 200),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        restore_value=["x"],
        isolate=True,
    )
    assert all(r.status == "ok" for r in result.timings.values())
    # Measured on the worker's copy; the one real launch doubled x exactly once.
    torch.testing.assert_close(x, original * 2)
    # The worker stays warm: the next tuning (another site) is set up on the same process.
    (worker,) = isolated._workers.values()
    assert worker.proc is not None
    pid = worker.proc.pid
    autotune_launch(
        scale_inplace,
        space={"tile": [32, 64]},
        grid=lambda cfg: (cdiv(200, cfg.tile),),
        args=(x, 200),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        restore_value=["x"],
        isolate=True,
        name="second-site",
    )
    assert worker.proc is not None and worker.proc.pid == pid
    torch.testing.assert_close(x, original * 4)


def test_inputs_keep_views_and_shared_storage() -> None:
    import torch as t

    from tunedsl.model.config import Config
    from tunedsl.model.variant import Variant

    base = t.arange(12, dtype=t.float32)
    view = base[2:10:2]
    v = Variant(Config(a=1), (base, view, 3), {"k": view}, (1,), {})
    storages, packed = isolated.pack_inputs([v])
    assert len(storages) == 1  # one storage shared by the three tensor arguments
    rebuilt = isolated.rebuild_variant(packed[0], isolated.rebuild_storages(storages, None))
    b2, v2, three = rebuilt.args
    assert three == 3 and v2.stride() == (2,) and v2.storage_offset() == 2
    t.testing.assert_close(v2, view)
    b2[2] = 100.0  # the worker's copies alias like the originals, and are copies
    assert v2[0] == 100.0 and rebuilt.kwargs["k"][0] == 100.0 and base[2] == 2.0


def test_kernel_defined_in_a_tunedsl_run_script_reaches_the_worker(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            import triton
            import triton.language as tl

            from tunedsl import autotune, cdiv

            SCALE = 3.0  # a global of __main__: cloudpickle sends it with the kernel


            @triton.jit
            def triple(x, y, n, TILE: tl.constexpr):
                offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
                mask = offs < n
                tl.store(y + offs, tl.load(x + offs, mask=mask) * SCALE, mask=mask)


            def run(x, y):
                n = x.numel()
                return autotune(
                    space=dict(tile=[32, 64]),
                    isolate=True,
                    blocks=cdiv(n, $tile),
                    triple(x, y, n, TILE=$tile),
                )


            x = torch.randn(100)
            y = torch.empty_like(x)
            launch = run(x, y)
            torch.testing.assert_close(y, x * 3)
            assert all(r.status == "ok" for r in launch.timings.values()), launch.timings
            print("ok", launch.source, triple.fn.__module__)
            """
        )
    )
    env = dict(os.environ, TRITON_INTERPRET="1", TUNEDSL_CONFIG_TIMEOUT="120")
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok tuned __main__" in done.stdout


def test_options_and_knobs_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    space = {"tile": [1, 2]}
    assert resolve(space, {}, {}, "here").isolate is False
    monkeypatch.setenv("TUNEDSL_ISOLATE", "1")
    assert resolve(space, {}, {}, "here").isolate is True
    assert resolve(space, {}, {"isolate": False}, "here").isolate is False
    with pytest.raises(UsageError, match="isolate= must be True or False"):
        resolve(space, {}, {"isolate": "yes"}, "here")
    monkeypatch.setenv("TUNEDSL_TIMING", "graph")
    assert resolve(space, {}, {}, "here").timing == "graph"
    assert resolve(space, {}, {"timing": "events"}, "here").timing == "events"
    with pytest.raises(UsageError, match="timing='fast'"):
        resolve(space, {}, {"timing": "fast"}, "here")
    monkeypatch.setenv("TUNEDSL_TIMING", "bogus")
    with pytest.raises(UsageError, match="TUNEDSL_TIMING"):
        resolve(space, {}, {}, "here")
    with pytest.raises(UsageError, match="capture='never'"):
        resolve(space, {}, {"capture": "never", "timing": "auto"}, "here")


def test_an_in_place_argument_the_worker_finds_keeps_its_launches_timed_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's in-place watch restores an argument the kernel changes before each
    launch, as in process; and, as in process, ``timing="auto"`` is told, so it keeps
    per-launch timing. It was not told: on a GPU, a short kernel was graph-timed, hundreds
    of launches back to back with no restore between them (an index advanced in place ran
    past its bounds). The timer here is the wall-clock one with the flag ``AutoTimer``
    reads, as the GPU's timer cannot run on this machine."""
    from runtime_kernels import add_one_inplace

    from tunedsl.backends import graph_timing, isolated_worker
    from tunedsl.backends.isolated_transfer import pack_inputs
    from tunedsl.backends.timers import WallTimer
    from tunedsl.model.config import Config
    from tunedsl.model.variant import Variant

    made: list[WallTimer] = []

    def make_timer(timing: str = "auto", per_launch_setup: bool = False) -> WallTimer:
        timer = WallTimer()
        timer.per_launch_setup = per_launch_setup  # type: ignore[attr-defined]
        made.append(timer)
        return timer

    monkeypatch.setattr(graph_timing, "make_timer", make_timer)
    x, n = torch.zeros(300), 300
    variants = [Variant(Config(tile=t), (x, n), {"TILE": t}, (cdiv(n, t),), {}) for t in (64, 128)]
    storages, packed = pack_inputs(variants)
    state = isolated_worker._State(
        {
            "device": None,
            "kernel": add_one_inplace,
            "storages": storages,
            "variants": packed,
            "settings": resolve({"tile": [64, 128]}, {}, {}, "here"),
            "timing": "auto",
        }
    )
    state.sample(0, 5)
    assert list(state.guard.restore) == ["x"]  # found in place, restored before each launch
    assert made[0].per_launch_setup, "the timer was not told: it may graph-time the launches"


def test_an_in_place_argument_the_worker_finds_is_warned_of_here_as_in_process() -> None:
    """``x += 1`` tuned with ``isolate=True`` and no ``restore_value=``: the worker finds
    ``x`` changed in place and restores its copy before each launch, and this process warns,
    at the caller's line, as a tuning in process does. It gave no notice: the worker's
    warning was dropped, so the same site warned in process and was silent isolated."""
    import warnings

    from runtime_kernels import add_one_inplace

    from tunedsl.warn import forget

    forget("inplace:")  # a worker's state built in this process (above) has said it here
    x, n = torch.zeros(300), 300
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = autotune_launch(
            add_one_inplace,
            space={"tile": [64, 128]},
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, n),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            isolate=True,
            name="isolated-in-place",
        )
    assert result.source == "tuned" and torch.equal(x, torch.ones(n))  # launched once here
    said = [w for w in caught if "in place" in str(w.message)]
    assert len(said) == 1, [str(w.message) for w in caught]
    assert "add_one_inplace changes 'x' in place" in str(said[0].message)
    assert "restore_value=['x']" in str(said[0].message)
    assert said[0].filename == __file__, said[0].filename  # the caller's line


@pytest.mark.parametrize(
    "space",
    [{"num_warps": [1, 2]}, {"num_warps": [1, 2], "tile": [64]}],
    ids=["launch-hints-only", "hints-and-one-tile"],
)
def test_an_in_place_argument_of_a_space_of_launch_hints_is_warned_of_isolated_as_in_process(
    space: dict[str, list[int]],
) -> None:
    """``x += 1`` over a space of launch hints only (one program under the interpreter, timed
    once): in process, the warm-up launch and the sample are two launches, and the tuning's
    end compares a third time, so ``x`` is found in place and warned of. Isolated, the same
    warning, at the caller's line. The worker launched once (no warm-up) and never made the
    end's comparison: no warning, where the docs promise the same as in process."""
    import warnings

    from runtime_kernels import add_one_inplace

    from tunedsl.warn import forget

    said: dict[bool, list[str]] = {}
    for isolate in (False, True):
        forget("inplace:")
        x, n = torch.zeros(300), 300
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = autotune_launch(
                add_one_inplace,
                space=space,
                grid=(cdiv(300, 64),),
                args=(x, n),
                kwargs=lambda cfg: {"TILE": 64},
                isolate=isolate,
                name=f"hints-in-place-{isolate}-{len(space)}",
            )
        assert result.source == "tuned" and torch.equal(x, torch.ones(n))  # launched once here
        found = [w for w in caught if "in place" in str(w.message)]
        assert all(w.filename == __file__ for w in found), [w.filename for w in found]
        said[isolate] = [str(w.message) for w in found]
    assert len(said[False]) == 1 and "add_one_inplace changes 'x' in place" in said[False][0]
    assert said[True] == said[False]
