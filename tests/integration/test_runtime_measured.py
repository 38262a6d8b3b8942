"""verify=, hooks, prune= and log events see what is measured (real kernels, interpreter)."""

from __future__ import annotations

import logging
import threading

import pytest
import torch
import triton
import triton.language as tl
from runtime_kernels import add_strided, sum_atomic, vadd, vadd_wrong_for_big_tiles

from tunedsl import Config, autotune_launch, cdiv
from tunedsl.errors import TuningError

pytestmark = pytest.mark.needs_triton
SPACE = {"tile": [64, 128, 256]}


def wrong(a, b, c, space, **options):
    n = a.numel()
    return autotune_launch(
        vadd_wrong_for_big_tiles,
        space=space,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        **options,
    )


def reference(inputs):
    return {"c": inputs["a"] + inputs["b"]}


def test_verify_checks_the_only_configuration_of_a_space() -> None:
    a, b = torch.randn(300), torch.randn(300)
    c = torch.zeros(300)
    with pytest.raises(TuningError, match=r"tile=256.*fails verify="):
        wrong(a, b, c, {"tile": [256]}, name="one-wrong", verify=reference)
    res = wrong(a, b, c, {"tile": [64]}, name="one-right", verify=reference)
    assert res.source == "default" and res.config == Config(tile=64)
    torch.testing.assert_close(c, a + b)


def test_verify_checks_what_prune_leaves() -> None:
    a, b = torch.randn(300), torch.randn(300)
    c = torch.zeros(300)
    with pytest.raises(TuningError, match="fails verify="):
        wrong(
            a,
            b,
            c,
            SPACE,
            name="pruned-wrong",
            verify=reference,
            prune=lambda cs, args: [cfg for cfg in cs if cfg.tile == 256],
        )


def test_verify_with_a_broadcast_input() -> None:
    # Helion's test_autotune_broadcast_arg: a stride-0 input cannot be copied into.
    n = 300
    x, bias = torch.randn(n), torch.randn(1).expand(n)
    out = torch.empty(n)
    res = autotune_launch(
        add_strided,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, bias, out, n, bias.stride(0)),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name="broadcast-verified",
        verify=True,
    )
    assert res.source == "tuned"
    assert all(r.status == "ok" for r in res.timings.values())
    torch.testing.assert_close(out, x + bias)


def test_a_failing_restore_never_hides_the_tuning_error() -> None:
    # A pre_hook gives the restore_value= input another shape (its 300 values as 2 x 150):
    # every later restore fails (torch cannot copy a 300-vector into it), so every
    # configuration fails, and so does the final restore. The error the user sees is still the TuningError naming the
    # failures, with the cleanup's failure as a note.
    n = 300
    x, bias, out = torch.randn(n), torch.randn(n), torch.empty(n)
    with pytest.raises(TuningError, match="every configuration") as info:
        autotune_launch(
            add_strided,
            space=SPACE,
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, bias, out, n, 1),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="resized-restored",
            restore_value=["b"],
            pre_hook=lambda args: args["b"].set_(torch.randn(2, n // 2)),
        )
    assert len(info.value.failures) == 3
    assert any("restoring the arguments" in note for note in info.value.__notes__)


def test_hooks_see_the_configuration_being_measured() -> None:
    x = torch.ones(256)
    out = torch.zeros(1)
    pre: list[int] = []
    post: list[int] = []
    n = x.numel()

    def pre_hook(args):
        pre.append(args["TILE"])
        args["out"].zero_()

    autotune_launch(
        sum_atomic,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, out, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name="hooks-measured",
        pre_hook=pre_hook,
        post_hook=lambda args, exception: post.append(args["TILE"]),
    )
    assert sorted(set(pre)) == [64, 128, 256]
    assert sorted(post) == [64, 128, 256]  # once per configuration, each with its own TILE


def test_prune_sees_numbers_a_kwargs_function_returns() -> None:
    # Triton's test_prune_configs: N given as a keyword, read by the prune.
    seen: list[int] = []

    def prune(configs, args):
        seen.append(args["n"])
        return [cfg for cfg in configs if cfg.tile <= args["n"]]

    def run(n: int):
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        res = autotune_launch(
            vadd,
            space=SPACE,
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(a, b, c),
            kwargs=lambda cfg: {"n": n, "TILE": cfg.tile},
            name="prune-kwargs",
            prune=prune,
        )
        torch.testing.assert_close(c, a + b)
        return res

    small = run(150)
    assert seen[-1] == 150 and set(small.timings) == {Config(tile=64), Config(tile=128)}
    big = run(300)  # another n: prune read it, so it is another key
    assert seen[-1] == 300 and set(big.timings) == {Config(tile=t) for t in (64, 128, 256)}
    assert small.digest != big.digest
    # the record keys n by its class, as Triton specializes on it, and prune's value apart
    assert small.key["args"]["n"] == "i" and small.key["prune"]["n"]["value"] == 150


def test_numbers_from_kwargs_are_keyed_by_their_class_without_prune() -> None:
    # An int a kwargs= function returns alike for every configuration is keyed as the same
    # int passed in args= is: by the class Triton specializes on, not by its value.
    n = 200
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    res = autotune_launch(
        vadd,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c),
        kwargs=lambda cfg: {"n": n, "TILE": cfg.tile},
        name="kwargs-no-prune",
    )
    assert res.key["args"]["n"] == "i" and set(res.key["args"]) == {"a", "b", "c", "n"}
    assert "TILE" not in res.key["args"]  # a per-configuration value is not keyed
    torch.testing.assert_close(c, a + b)


def test_the_done_event_is_logged_outside_the_measuring_lock() -> None:
    # Triton's free-threading listener test: a handler that waits for another thread's
    # tuning must not wait on a lock its own thread holds.
    logger = logging.getLogger("tunedsl")
    finished = threading.Event()
    waited: list[bool] = []

    def tune_other() -> None:
        a, b, c = torch.randn(64), torch.randn(64), torch.empty(64)
        autotune_launch(
            vadd,
            space=SPACE,
            grid=lambda cfg: (cdiv(64, cfg.tile),),
            args=(a, b, c, 64),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="listener-other",
        )
        finished.set()

    class Listener(logging.Handler):
        def handle(self, record: logging.LogRecord) -> bool:  # without the handler's lock
            self.emit(record)
            return True

        def emit(self, record: logging.LogRecord) -> None:
            event = getattr(record, "tunedsl_event", {})
            if event.get("event") == "done" and event.get("kernel") == "sum_atomic":
                threading.Thread(target=tune_other, daemon=True).start()
                waited.append(finished.wait(timeout=60))

    handler = Listener(level=logging.INFO)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        x, out = torch.ones(256), torch.zeros(1)
        autotune_launch(
            sum_atomic,
            space=SPACE,
            grid=lambda cfg: (cdiv(256, cfg.tile),),
            args=(x, out, 256),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name="listener-first",
            reset_to_zero=["out"],
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert waited == [True]


@triton.jit
def int_sum_short_for_big_tiles(x, out, n, TILE: tl.constexpr):
    """An int32 sum of int8 values; TILE >= 128 leaves out the last element."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    limit = n
    if TILE >= 128:
        limit = n - 1
    v = tl.load(x + offs, mask=offs < limit, other=0).to(tl.int32)
    tl.atomic_add(out, tl.sum(v, axis=0))


def test_verify_compares_integer_outputs_exactly_unless_given_a_tolerance() -> None:
    # An int32 sum 100 short of 2,000,000 is within the default rtol of 1e-3: integer
    # outputs were compared with the float tolerances, so a configuration that drops an
    # element passed verify=True, was timed fastest and was chosen. Integer arithmetic is
    # exact (atomics included), so ints and bools are compared exactly, as
    # torch.testing.assert_close does, unless rtol=/atol= are given.
    n = 20000
    x = torch.full((n,), 100, dtype=torch.int8)

    def tune(out: torch.Tensor, name: str, **options: float):
        return autotune_launch(
            int_sum_short_for_big_tiles,
            space=SPACE,
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(x, out, n),
            kwargs=lambda cfg: {"TILE": cfg.tile},
            reset_to_zero=["out"],
            verify=True,
            name=name,
            **options,
        )

    out = torch.zeros(1, dtype=torch.int32)
    res = tune(out, "exact-ints")
    assert res.config == Config(tile=64) and out.item() == 2_000_000
    for tile in (128, 256):
        assert res.timings[Config(tile=tile)].status == "rejected", res.timings
    loose = tune(torch.zeros(1, dtype=torch.int32), "given-tolerance", rtol=1e-3)
    assert loose.timings[Config(tile=128)].status == "ok", loose.timings


@triton.jit
def int64_one_more_for_big_tiles(x, out, n, TILE: tl.constexpr):
    """Copies int64 values, adding 1 when TILE >= 128."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    v = tl.load(x + offs, mask=offs < n, other=0)
    if TILE >= 128:
        v = v + 1
    tl.store(out + offs, v, mask=offs < n)


def test_verify_names_a_difference_of_int64_values_past_2_to_the_53() -> None:
    # 2**60 and 2**60 + 1 are one float64: the rejection said "max abs difference 0".
    n = 64
    x = torch.full((n,), 2**60, dtype=torch.int64)
    out = torch.zeros(n, dtype=torch.int64)
    res = autotune_launch(
        int64_one_more_for_big_tiles,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(x, out, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        verify=True,
        name="int64-past-2-53",
    )
    assert res.config == Config(tile=64) and torch.equal(out, x)
    reason = res.timings[Config(tile=128)].reason or ""
    assert "rejected" == res.timings[Config(tile=128)].status, res.timings
    assert "max abs difference 1;" in reason and "64 of 64 elements differ" in reason, reason
