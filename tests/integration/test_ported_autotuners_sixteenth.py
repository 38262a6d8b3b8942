"""A sixteenth batch of other autotuners' test suites, ported to tunedsl: TileLang's autotuner
input tests (testing/python/autotune/test_tilelang_autotune_input_cache.py: a configuration
whose inputs or outputs differ from the others', checked against a reference), Triton's
``restore_value``/``reset_to_zero`` tests (python/test/unit/runtime/test_autotuner.py) on a
buffer picked per configuration, Kernel Tuner's tunable parameters given as pairs (its
``tune_params`` with a list of tuples, one block shape each) and Triton's test_cache.py
``test_function_arguments`` (a Triton function given as a ``tl.constexpr`` with a tuple of
its arguments of any length).

Found and fixed: while tuning, ``verify=``, ``restore_value=``, ``reset_to_zero=`` and the
put-back of the arguments a kernel writes acted on the tensors the first configuration is
launched with. A configuration launched on a tensor of its own (``args=lambda cfg:
(outs[cfg.variant], ...)``, or ``out[$variant]`` in the DSL) was compared through the first
configuration's output, restored from the reference run: each configuration that wrote its
own output right was rejected as a mismatch
(test_a_configurations_own_output_is_the_one_verified), and a stored choice that writes its own
buffer was judged to fail ``verify=True`` in a new process ("not using it"), which tuned the
key again (test_a_stored_choice_writing_its_own_output_is_checked_on_it). Its buffer was never zeroed or
restored between launches, so an accumulating kernel added every launch of the tuning into
it: with ``restore_value`` the tuning call's result was twelve launches' sum instead of one,
and a buffer no configuration chose was left holding the tuning's sums
(test_a_buffer_picked_per_configuration_is_restored_and_zeroed). An optional buffer the first
configuration passes as ``None`` and another as a tensor was never zeroed or restored, the
names being kept only where the first configuration passed a tensor
(test_an_optional_buffer_only_later_configurations_pass_is_restored_and_zeroed). Now each
tensor a configuration passes in place of the first's gets a copy of its own before its first
launch: it is restored, zeroed and compared as the first's are, and put back after the tuning;
one in the first configuration's memory (a new view of the same tensor) through the first's.

A space axis whose values are lists or dicts (Kernel Tuner's block shapes written ``[16,
16]``) failed with a bare ``TypeError: unhashable type: 'list'`` from inside the space (in the
DSL too); tuples were named but with no way out. Both are now a ``UsageError`` at the site
naming the axis and the value, with the form to write: one field per part, kept together by
a list space (test_kernel_tuners_block_shapes_as_pairs_are_named_with_the_fix); an axis given
as a tensor is named with ``t.tolist()`` (test_an_axis_of_dicts_is_named_not_a_type_error).

Looked at and found sound (and kept so by a test): a new view of the caller's tensor made
for each configuration (``out.view(-1)``, ``out[:]``) restored through the first
configuration's tensor, before every launch and after the tuning
(test_a_new_view_of_the_same_tensor_per_configuration_is_restored_through_it); a Triton
function given as a ``tl.constexpr`` with tuples of zero, one and two ints (four keys, the
fifth call from memory, each read back from disk; a float, a bool and ints of each of
Triton's classes in the tuple, each its own key); per-configuration outputs, optional
buffers and views with ``isolate=True`` (the worker's copies); a
``verify=fn`` reference given as a numpy array, a nested list or a tuple, and a 0-d reference
for a vector output (named with its shape); the caller's tensors freed after a tuning whose
configurations fail, or which fails whole (nothing of tunedsl keeps a traceback).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through ``autotune_launch`` and DSL macros compiled by
``tunedsl.frontend``.

Not ported, for want of a counterpart: TileLang's ``supply_prog`` and its cache of the
inputs it supplies (tunedsl tunes on the call's own arguments), its per-trial timeout in a
benchmark thread (``isolate=True`` and ``TUNEDSL_CONFIG_TIMEOUT``:
test_isolated_measure.py); Helion's skip of a configuration that runs out of device memory
(``test_cuda_oom_skips_config``: a GPU's ``torch.OutOfMemoryError``; an error a launch
argument raises reaches the caller, docs/runtime.md); Inductor's kernels whose parameters are
annotated with the string ``"tl.constexpr"`` (Triton's interpreter does not read such an
annotation as ``tl.constexpr``: ``tl.arange`` fails there with or without tunedsl).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_api_process, record_files

from tunedsl import Config, UsageError, autotune_launch, cdiv
from tunedsl.frontend.compile import compile_source

pytestmark = pytest.mark.needs_triton


# --- TileLang: a configuration whose output differs from the others' -------------------------


def copy_into_own(
    outs: dict[int, torch.Tensor], src: torch.Tensor, verify: Any, name: str, isolate: bool = False
) -> Any:
    from ported_kernels_sixteenth import copy

    n = src.numel()
    return autotune_launch(
        copy,
        space={"variant": list(outs), "BLOCK_SIZE": [64, 128]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
        args=lambda cfg: (outs[cfg.variant], src, n),
        kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
        verify=verify,
        name=name,
        isolate=isolate,
    )


@pytest.mark.parametrize(
    "verify, isolate", [("first", False), ("list", False), ("reference", False), ("first", True)]
)
def test_a_configurations_own_output_is_the_one_verified(verify: str, isolate: bool) -> None:
    """TileLang's tuner checks each configuration against the reference on the inputs and
    outputs of that configuration (a variant whose output has another dtype gets buffers of
    its own). In tunedsl a configuration's output is whatever its launch passes: here
    ``variant=1`` writes a float16 buffer and ``variant=2`` a float32 one of its own, where
    ``variant=0`` writes a third. Each copies ``src`` right, so with ``verify=True``,
    ``verify=["dst"]`` (compared with the first configuration) or a reference every
    configuration is measured, none rejected, in this process or in a worker
    (``isolate=True``, on its copies); the buffers the chosen configuration does not write
    are put back as the caller had them."""
    # ported from: tile-ai/tilelang testing/python/autotune/test_tilelang_autotune_input_cache.py::test_autotune_refreshes_incompatible_inputs
    n = 256
    src = torch.randn(n)
    outs = {0: torch.zeros(n), 1: torch.zeros(n, dtype=torch.float16), 2: torch.zeros(n)}
    check = {"first": True, "list": ["dst"], "reference": lambda args: {"dst": args["src"]}}
    name = f"tilelang-own-output-{verify}-{isolate}"
    res = copy_into_own(outs, src, check[verify], name, isolate=isolate)
    assert res.source == "tuned" and len(res.timings) == 6
    assert all(r.status == "ok" for r in res.timings.values()), {
        c: r.reason for c, r in res.timings.items()
    }
    chosen = res.config.variant
    assert torch.allclose(outs[chosen].float(), src, rtol=1e-3, atol=1e-3)
    assert all(not outs[v].any() for v in outs if v != chosen)


@pytest.mark.parametrize("verify", ["first", "reference"])
def test_a_stored_choice_writing_its_own_output_is_checked_on_it(verify: str) -> None:
    """TileLang checks a configuration loaded from its cache against the reference too. A
    record tuned without ``verify=`` chose ``variant=1`` (the wider block: fewer programs,
    faster under the interpreter), which writes a buffer of its own; a new process with
    ``verify=True`` (compared with the first configuration, run for it) or ``verify=fn``
    checks that stored choice once before using it, on the buffer it writes: it agrees, so
    the record decides (``disk``) with no warning."""
    # ported from: tile-ai/tilelang testing/python/autotune/test_tilelang_autotune_input_cache.py::test_autotune_refreshes_incompatible_inputs
    import warnings

    from ported_kernels_sixteenth import copy

    n = 4096
    src = torch.randn(n)
    outs = {0: torch.zeros(n), 1: torch.zeros(n)}

    def site(check: Any) -> Any:
        return autotune_launch(
            copy,
            space=[{"variant": 0, "BLOCK_SIZE": 16}, {"variant": 1, "BLOCK_SIZE": 1024}],
            grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
            args=lambda cfg: (outs[cfg.variant], src, n),
            kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
            verify=check,
            name=f"tilelang-stored-own-output-{verify}",
        )

    res = site(None)
    assert res.source == "tuned" and res.config.variant == 1 and torch.equal(outs[1], src)
    new_api_process()
    outs[1].zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a check that disagreed would warn and tune again
        res = site(True if verify == "first" else lambda args: {"dst": args["src"]})
    assert res.source == "disk" and res.config.variant == 1 and torch.equal(outs[1], src)
    assert not outs[0].any()


def test_a_configuration_writing_its_own_output_wrong_is_rejected() -> None:
    """The other half of TileLang's check: a configuration whose own output is wrong is
    rejected. ``variant=1`` passes a strided view (every second element) to a kernel that
    writes contiguous elements: its output, read through the view, is not ``src``, so it is
    rejected against the first configuration's, and the choice is ``variant=0``."""
    # ported from: tile-ai/tilelang testing/python/autotune/test_tilelang_autotune_input_cache.py::test_autotune_refreshes_incompatible_inputs
    n = 256
    src = torch.randn(n)
    outs = {0: torch.zeros(n), 1: torch.zeros(2 * n)[::2]}
    res = copy_into_own(outs, src, True, "tilelang-own-output-wrong")
    status = {(c.variant, c.BLOCK_SIZE): r.status for c, r in res.timings.items()}
    assert status == {(0, 64): "ok", (0, 128): "ok", (1, 64): "rejected", (1, 128): "rejected"}
    assert res.config.variant == 0 and torch.equal(outs[0], src)


# --- Triton test_restore / test_reset_to_zero on a buffer picked per configuration ----------

SCRIPT = """\
import torch
from tunedsl import autotune, cdiv
from ported_kernels_sixteenth import accumulate


def add_into(outs, src, option, hook):
    n = src.numel()
    if option == "reset_to_zero":
        return autotune(space=dict(variant=[0, 1], block=[64, 128]), blocks=cdiv(n, $block),
                        reset_to_zero=["out"], pre_hook=hook,
                        accumulate(outs[$variant], src, n, BLOCK_SIZE=$block))
    if option == "restore_value":
        return autotune(space=dict(variant=[0, 1], block=[64, 128]), blocks=cdiv(n, $block),
                        restore_value=["out"], pre_hook=hook,
                        accumulate(outs[$variant], src, n, BLOCK_SIZE=$block))
    return autotune(space=dict(variant=[0, 1], block=[64, 128]), blocks=cdiv(n, $block),
                    pre_hook=hook, accumulate(outs[$variant], src, n, BLOCK_SIZE=$block))
"""


def load(path: Path) -> dict[str, Any]:
    path.write_text(SCRIPT, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_sixteenth", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.mark.parametrize("option", ["reset_to_zero", "restore_value", "neither"])
def test_a_buffer_picked_per_configuration_is_restored_and_zeroed(
    option: str, tmp_path: Path
) -> None:
    """Triton's ``restore_value=['src']`` puts the buffer back before each benchmark run, and
    ``reset_to_zero`` zeroes it, so the call adds into it once. Here the buffer is picked per
    configuration (``accumulate(outs[$variant], ...)``: a scratch or output buffer per
    variant). Before every launch of the tuning (``pre_hook`` sees it) each configuration's
    own buffer is zeroed or holds the caller's values again. Whichever configuration is
    chosen, the call leaves its buffer holding one
    launch's sum (``reset_to_zero``: zeroed first; ``restore_value`` and neither: added into
    what the caller had), and the other buffer as the caller had it (zeroed under
    ``reset_to_zero``, as every buffer it names is after a tuning); a second call (from
    memory) adds once more, except under ``reset_to_zero``."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_restore
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_reset_to_zero
    add_into = load(tmp_path / "sixteenth.py")["add_into"]
    n = 256
    src = torch.ones(n)
    outs = [torch.full((n,), 5.0), torch.full((n,), 5.0)]
    first, second, other = (1.0, 1.0, 0.0) if option == "reset_to_zero" else (6.0, 7.0, 5.0)
    seen: dict[int, set[float]] = {0: set(), 1: set()}

    def hook(args: dict[str, Any]) -> None:  # what each launch of the tuning starts from
        seen[int(args["out"] is outs[1])].update(args["out"].unique().tolist())

    res = add_into(outs, src, option, hook)
    chosen = res.config.variant
    assert res.source == "tuned"
    if option != "neither":  # (unnamed, each launch adds into the one before)
        assert seen == {v: {0.0 if option == "reset_to_zero" else 5.0} for v in (0, 1)}
    assert torch.equal(outs[chosen], torch.full((n,), first))
    assert torch.equal(outs[1 - chosen], torch.full((n,), other))
    res = add_into(outs, src, option, hook)
    assert res.source == "memory" and res.config.variant == chosen
    assert torch.equal(outs[chosen], torch.full((n,), second))
    assert torch.equal(outs[1 - chosen], torch.full((n,), other))


@pytest.mark.parametrize("option", ["reset_to_zero", "restore_value"])
def test_an_optional_buffer_only_later_configurations_pass_is_restored_and_zeroed(
    option: str,
) -> None:
    """Triton's ``test_reset_to_zero``/``test_restore_with_none``: ``src`` is an optional
    buffer, ``None`` in some launches. Here the first configuration passes ``None`` for
    ``extra`` and the other passes a tensor (``extra if cfg.variant else None``): that
    tensor is zeroed (or restored) before each of its launches as ``out`` is, which
    ``pre_hook`` sees, and holds the caller's values again after the tuning."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_reset_to_zero
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_restore_with_none
    from ported_kernels_sixteenth import accumulate_optional

    n = 256
    src, out, extra = torch.ones(n), torch.zeros(n), torch.zeros(n)
    seen: set[float] = set()

    def hook(args: dict[str, Any]) -> None:
        if args["extra"] is not None:
            seen.update(args["extra"].unique().tolist())

    res = autotune_launch(
        accumulate_optional,
        space={"variant": [0, 1], "BLOCK_SIZE": [64, 128]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
        args=lambda cfg: (out, extra if cfg.variant else None, src, n),
        kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
        pre_hook=hook,
        name=f"triton-optional-per-configuration-{option}",
        **{option: ["out", "extra"]},
    )
    assert res.source == "tuned" and seen == {0.0}
    assert torch.equal(out, torch.ones(n))
    assert torch.equal(extra, torch.ones(n) if res.config.variant else torch.zeros(n))


@pytest.mark.parametrize("option", ["restore_value", "verify", "neither"])
def test_a_new_view_of_the_same_tensor_per_configuration_is_restored_through_it(
    option: str,
) -> None:
    """Helion's private copies keep the aliasing of the arguments (a view and its base share
    one copy). A launch function that makes a new view of the caller's tensor for each
    configuration (``out[:]``, ``out.view(-1)``) hands the kernel the same memory under
    another object: it is restored through the first configuration's tensor, before every
    launch (``pre_hook`` sees the caller's 5.0) and after the tuning, so the call adds into
    ``out`` once, whichever configuration is chosen."""
    # ported from: pytorch/helion test/test_autotune_clone_alignment.py::test_storage_aliases_flags_and_partial_selection
    from ported_kernels_sixteenth import accumulate

    n = 256
    src, out = torch.ones(n), torch.full((n,), 5.0)
    seen: set[float] = set()
    options: dict[str, Any] = {
        "restore_value": {"restore_value": ["out"]},
        "verify": {"verify": True},
    }
    res = autotune_launch(
        accumulate,
        space={"variant": [0, 1], "BLOCK_SIZE": [64, 128]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK_SIZE),),
        args=lambda cfg: (out.view(-1) if cfg.variant else out[:], src, n),
        kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
        pre_hook=lambda args: seen.update(args["out"].unique().tolist()),
        name=f"helion-aliases-{option}",
        **options.get(option, {}),
    )
    assert res.source == "tuned" and torch.equal(out, torch.full((n,), 6.0))
    if option == "restore_value":
        assert seen == {5.0}
    else:  # found in place over the first launches, restored from then on
        assert 5.0 in seen and max(seen) <= 6.0


# --- Kernel Tuner: tunable parameters given as pairs --------------------------------------


def copy_tiles(dst: torch.Tensor, src: torch.Tensor, space: Any, name: str) -> Any:
    from ported_kernels_sixteenth import copy_2d

    m, n = src.shape
    return autotune_launch(
        copy_2d,
        space=space,
        grid=lambda cfg: (cdiv(m, cfg.block_0), cdiv(n, cfg.block_1)),
        args=(dst, src, m, n),
        kwargs=lambda cfg: {"BLOCK_X": cfg.block_0, "BLOCK_Y": cfg.block_1},
        verify=lambda args: {"dst": args["src"]},
        name=name,
    )


@pytest.mark.parametrize("pairs", ["tuples", "lists", "lists in a list space"])
def test_kernel_tuners_block_shapes_as_pairs_are_named_with_the_fix(pairs: str) -> None:
    """Kernel Tuner's tests tune block shapes given as one parameter of pairs (``tune_params
    ["block"] = [(16, 16), (32, 8)]``). A tunedsl configuration holds JSON scalars: such an
    axis, of tuples or of lists (which ``json`` gives back for tuples), or a list space whose
    field is a list, is a ``UsageError`` at the site naming the axis, the value and the form
    to write, before anything runs; written that way (one field per part, in a list space)
    the same pairs tune, each checked against ``src``."""
    # ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_populate_parameter_space
    m, n = 64, 64
    src, dst = torch.randn(m, n), torch.zeros(m, n)
    values: list[Any] = [(16, 16), (32, 8)] if pairs == "tuples" else [[16, 16], [32, 8]]
    space: Any = {"block": values}
    if pairs == "lists in a list space":
        space = [{"block": v} for v in values]
    with pytest.raises(UsageError) as err:
        copy_tiles(dst, src, space, f"kernel-tuner-pairs-{pairs}")
    message = str(err.value)
    assert "test_ported_autotuners_sixteenth.py" in message
    assert "field 'block' has value" in message and "16, 16" in message
    assert "space=[{'block_0': 16, 'block_1': 16}, ...]" in message
    assert not dst.any() and not record_files()
    fixed = [{"block_0": a, "block_1": b} for a, b in values]
    res = copy_tiles(dst, src, fixed, f"kernel-tuner-pairs-fixed-{pairs}")
    assert res.source == "tuned" and torch.equal(dst, src)
    assert set(res.timings) == {Config(block_0=16, block_1=16), Config(block_0=32, block_1=8)}
    assert all(r.status == "ok" for r in res.timings.values())


def test_an_axis_of_dicts_is_named_not_a_type_error() -> None:
    """The same for values no JSON scalar spells (a dict per value): named at the site; and
    an axis given as a tensor (``torch.tensor([16, 32])``) is named with ``t.tolist()``."""
    # ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_populate_parameter_space
    src, dst = torch.randn(16, 16), torch.zeros(16, 16)
    with pytest.raises(UsageError, match=r"space axis 'block': field 'block' has value \{"):
        copy_tiles(dst, src, {"block": [{"x": 16, "y": 16}]}, "kernel-tuner-dicts")
    with pytest.raises(UsageError, match=r"has value tensor\(16\) .* write t\.tolist\(\)"):
        copy_tiles(dst, src, {"block_0": torch.tensor([16, 32]), "block_1": 16}, "tensor-axis")


# --- Triton test_cache: a Triton function and a tuple of its arguments --------------------


def test_a_function_and_its_arguments_as_a_tuple_of_any_length() -> None:
    """Triton's kernel ``Y = fn(*fn_args)`` is launched with four functions and tuples of
    zero, one and two ints, and ``func1`` again: four compiled kernels, results ``[1, 2, 3,
    7, 1]``. A tunedsl site tunes four keys (the function and the tuple's length and ints
    are in the key), takes the fifth from memory, and a new process reads each from disk."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_function_arguments
    from ported_kernels_sixteenth import call_fn, func1, func2, func3, func4

    calls = [(func1, ()), (func2, ()), (func3, (3,)), (func4, (3, 4)), (func1, ())]
    for sources in (["tuned"] * 4 + ["memory"], ["disk"] * 4 + ["memory"]):
        y = torch.zeros(5, dtype=torch.int32)
        got = [
            autotune_launch(
                call_fn, space={"num_warps": [1, 2]}, grid=(1,), args=(y[i], fn, fn_args),
                name="triton-function-arguments",
            ).source
            for i, (fn, fn_args) in enumerate(calls)
        ]  # fmt: skip
        assert got == sources and y.tolist() == [1, 2, 3, 7, 1]
        new_api_process()
    assert len(record_files()) == 4
