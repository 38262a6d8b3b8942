"""In-place writes found while tuning (real kernels under the interpreter): an argument the
kernel changes on every launch is restored before each launch and after tuning, with one
warning; outputs are left alone."""

from __future__ import annotations

import warnings

import pytest
import torch
from runtime_kernels import add_one_inplace, sum_atomic, vadd

from tunedsl import autotune_launch, cdiv
from tunedsl.warn import forget

pytestmark = pytest.mark.needs_triton
SPACE = {"tile": [64, 128, 256]}


@pytest.fixture(autouse=True)
def _warn_again():
    """The warning is once per kernel and process: each test sees its own."""
    forget("inplace:")


def add_one(x: torch.Tensor, **options):
    n = x.numel()
    return autotune_launch(
        add_one_inplace,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        **options,
    )


def test_an_in_place_kernel_is_found_restored_and_named() -> None:
    x = torch.zeros(200)
    seen: list[float] = []
    with pytest.warns(UserWarning, match=r"changes 'x' in place.*restore_value=\['x'\]") as w:
        res = add_one(x, name="add-one", pre_hook=lambda args: seen.append(args["x"][0].item()))
    assert res.source == "tuned"
    assert torch.equal(x, torch.ones(200))  # one launch's worth: tuning left no trace
    # The watch needs two launches to tell; every later launch starts from the original.
    assert seen[2:] and set(seen[2:]) == {0.0}
    assert len([m for m in w if "in place" in str(m.message)]) == 1
    assert w[0].filename == __file__  # the warning points at the caller's line

    add_one(x, name="add-one")  # a hit is one plain launch
    assert torch.equal(x, torch.full((200,), 2.0))


def test_restore_value_silences_the_warning() -> None:
    x = torch.zeros(200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_one(x, name="add-one-named", restore_value=["x"])
    assert torch.equal(x, torch.ones(200))


def test_an_accumulating_kernel_is_found_too() -> None:
    x, out = torch.ones(256), torch.zeros(1)
    with pytest.warns(UserWarning, match="changes 'out' in place"):
        autotune_launch(
            sum_atomic,
            space=SPACE,
            grid=lambda cfg: (cdiv(256, cfg.tile),),
            args=(x, out, 256),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="sum-found",
        )
    assert out.item() == 256.0


def test_an_integer_counter_is_found_however_large() -> None:
    # An int32 counter at 10,000,000 to which each launch adds 256 changed by 2.6e-5 of its
    # value, within the float tolerance the watch compared with: not found, not named, and
    # not restored between the tuning's launches. Integers are compared exactly.
    x, out = torch.ones(256, dtype=torch.int32), torch.full((1,), 10_000_000, dtype=torch.int32)
    with pytest.warns(UserWarning, match="changes 'out' in place"):
        autotune_launch(
            sum_atomic,
            space=SPACE,
            grid=lambda cfg: (cdiv(256, cfg.tile),),
            args=(x, out, 256),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="int-counter",
        )
    assert out.item() == 10_000_256


def test_outputs_are_not_restored_and_not_warned_about() -> None:
    a, b, c = torch.randn(300), torch.randn(300), torch.zeros(300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autotune_launch(
            vadd,
            space=SPACE,
            grid=lambda cfg: (cdiv(300, cfg.tile),),
            args=(a, b, c, 300),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="vadd-output",
        )
    torch.testing.assert_close(c, a + b)


def test_an_in_place_kernel_with_verify_is_restored() -> None:
    x = torch.arange(100, dtype=torch.float32)
    with pytest.warns(UserWarning, match="changes 'x' in place"):
        res = add_one(x, name="add-one-verified", verify=True)
    assert all(r.status == "ok" for r in res.timings.values())
    assert torch.equal(x, torch.arange(100, dtype=torch.float32) + 1)


def test_an_untouched_buffer_holding_nans_is_no_write() -> None:
    # torch.empty may hold NaNs; a configuration that fails before writing leaves them.
    a, b = torch.randn(300), torch.randn(300)
    c = torch.full((300,), float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = autotune_launch(
            vadd,
            space={"tile": [96, 128]},  # 96 fails when it runs (not a power of 2)
            grid=lambda cfg: (cdiv(300, cfg.tile),),
            args=(a, b, c, 300),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="vadd-nan-output",
        )
    assert res.timings[res.config].status == "ok"
    torch.testing.assert_close(c, a + b)


def test_a_finished_tuning_leaves_nothing_for_the_garbage_collector() -> None:
    """The tuning's measurer (its timer, with the CUDA graphs of graph timing, and its
    argument copies) is freed when the tuning returns, not at a later collection: the
    collector can run inside the program's own CUDA-graph capture, and a graph destroyed
    there invalidates the capture. The in-place watch's callback once made a cycle."""
    import gc

    from tunedsl.backends.inprocess import InProcessMeasurer

    gc.collect()
    gc.disable()
    try:
        assert add_one(torch.zeros(300), name="no-cycle", restore_value=["x"]).source == "tuned"
        left = [o for o in gc.get_objects() if isinstance(o, InProcessMeasurer)]
    finally:
        gc.enable()
    assert left == []


def _copies_of(values: torch.Tensor, caller: torch.Tensor) -> int:
    """Live tensors holding ``values`` that are not the caller's own ``caller``."""
    import gc

    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if type(o) is torch.Tensor
        and o is not caller
        and o.shape == values.shape
        and torch.equal(o, values)
    )


def test_verify_and_the_in_place_watch_share_one_copy_of_an_input() -> None:
    """With ``verify=True`` the caller's values of a read-only input are copied once for the
    tuning, not once for the check and again for the in-place watch (a second copy of every
    argument, held for the whole tuning)."""
    a, b, c = torch.randn(301), torch.randn(301), torch.zeros(301)
    a0 = a.clone()
    copies: list[int] = []
    autotune_launch(
        vadd,
        space=SPACE,
        grid=lambda cfg: (cdiv(301, cfg.tile),),
        args=(a, b, c, 301),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name="vadd-one-copy",
        verify=True,
        pre_hook=lambda args: copies.append(_copies_of(a0, a) - 1),  # a0 itself is one
    )
    # One copy for the check and the watch, one the reference output (verify=True compares
    # every tensor argument, a read-only one too).
    assert copies and max(copies) == 2
    torch.testing.assert_close(c, a + b)


@pytest.mark.parametrize("verify", [None, True], ids=["plain", "verify"])
def test_an_interrupted_tuning_holds_no_copy_of_the_arguments(verify: bool | None) -> None:
    """Ctrl-C in the middle of a tuning: the arguments are as the caller had them, and the
    exception (kept by a notebook, a logger or an ``except`` clause, with every frame of the
    tuning) holds no copy of them: on a GPU, memory as large as the arguments."""
    a, b, c = torch.randn(302), torch.randn(302), torch.zeros(302)
    a0, c0 = a.clone(), c.clone()
    calls: list[int] = []

    def interrupt(args: object) -> None:
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        autotune_launch(
            vadd,
            space=SPACE,
            grid=lambda cfg: (cdiv(302, cfg.tile),),
            args=(a, b, c, 302),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name=f"vadd-interrupted-{verify}",
            verify=verify,
            pre_hook=interrupt,
        )
    assert caught.value.__traceback__ is not None
    assert torch.equal(a, a0) and torch.equal(c, c0)
    assert _copies_of(a0, a) - 1 == 0  # a0 itself is one


def test_an_in_place_kernel_is_found_past_configurations_that_fail_when_launched() -> None:
    """Configurations that fail as they launch (a tile that is no power of two here; on a
    GPU, one asking for more shared memory than the device has) among the first launches
    are not compared: the watch stopped after a failed first launch, having seen no write,
    so every later launch of an in-place kernel started from the one before, unwarned."""
    x = torch.zeros(300)
    seen: list[float] = []
    with pytest.warns(UserWarning, match="changes 'x' in place"):
        res = autotune_launch(
            add_one_inplace,
            space={"tile": [96, 48, 64]},  # 96 and 48 fail when they run
            grid=lambda cfg: (cdiv(300, cfg.tile),),
            args=(x, 300),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="add-one-past-failures",
            pre_hook=lambda args: seen.append(args["x"][0].item()),
        )
    assert res.config.tile == 64
    assert torch.equal(x, torch.ones(300))
    assert max(seen) <= 1.0, seen  # restored once found: no launch started from a third
