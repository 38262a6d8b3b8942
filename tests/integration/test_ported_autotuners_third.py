"""A third batch of other autotuners' test suites, ported to tunedsl: Triton's kernel cache
tests (python/test/unit/runtime/test_cache.py: what makes a kernel another kernel), the
argument checks of ``triton.autotune`` and Kernel Tuner (restrictions, grids, outputs to
verify), Kernel Tuner's and Helion's search-strategy tests, PyTorch Inductor's max-autotune
cache and vLLM's shipped tuned configurations.

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through DSL macros compiled by ``tunedsl.frontend``
(``SCRIPT``, written to a file so that a test can edit it and load it as a new process
would) or through ``autotune_launch``.

Not ported, for want of a counterpart under tunedsl's design or the interpreter:
Triton's closure tests (test_cache_closure, test_constexpr_cache_invalidation_recreated:
the interpreter does not run a kernel reading a closure variable), test_jit_noinline (a
binary the interpreter never builds),
test_changed_line_numbers_invalidate_cache (a decision does not depend on where the kernel
sits in its file, docs/runtime.md "Site identity"), test_preload / test_jit_warmup_cache
(Triton's own binary cache; tunedsl's stored binaries are GPU-only), test_exceed_threads /
test_exceed_tmem (device limits: GPU only), ``prune_configs_by``'s fractional ``top_k`` (the
prune is one user function), Inductor's grid-size splitting (a launch's grid is the user's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_process, record_files

from tunedsl import Config, Space, TunedslSyntaxError, UsageError, autotune_launch, cdiv
from tunedsl.frontend.compile import compile_source

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import triton
import triton.language as tl
from tunedsl import autotune, cdiv


@triton.jit
def copy_wide(dst, src, N, BLOCK: tl.constexpr, WIDE: tl.constexpr = WIDTH):
    tl.static_assert(BLOCK == WIDE)  # only the configuration BLOCK == WIDE compiles
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def copy_dtype_wide(dst, src, N, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK == DTYPE.primitive_bitwidth * 2)  # 32 for float16, 64 for float32
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.constexpr_function
def wide_of(bits):
    return bits * 2


@triton.jit
def copy_fn_wide(dst, src, N, BLOCK: tl.constexpr):
    W: tl.constexpr = wide_of(16)
    tl.static_assert(BLOCK == W)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)


@triton.jit
def step0(x):
    return x + 1.0


@triton.jit
def step1(x):
    FN: tl.constexpr = step0
    return FN(x) + 1.0


@triton.jit
def add_steps(dst, src, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, step1(tl.load(src + offs, mask=offs < N)), mask=offs < N)


@triton.jit
def combine(a, b):
    return a + b


@triton.jit
def reduce_all(dst, src, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst, tl.reduce(tl.load(src + offs, mask=offs < N, other=0.0), 0, combine))


@triton.jit
def scaled(x):
    return x * SCALE


@triton.jit
def scale_copy(dst, src, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, scaled(tl.load(src + offs, mask=offs < N)), mask=offs < N)


@triton.jit
def store_int(dst, i, BLOCK: tl.constexpr):
    tl.store(dst + tl.arange(0, BLOCK), tl.full([BLOCK], i, tl.int32))


wide = lambda dst, src, N: autotune(space=dict(block=[32, 64, 128]), blocks=cdiv(N, $block),
    copy_wide(dst, src, N, BLOCK=$block))
dtype_wide = lambda dst, src, N: autotune(space=dict(block=[32, 64]), blocks=cdiv(N, $block),
    copy_dtype_wide(dst, src, N, BLOCK=$block))
fn_wide = lambda dst, src, N: autotune(space=dict(block=[32, 64]), blocks=cdiv(N, $block),
    copy_fn_wide(dst, src, N, BLOCK=$block))
steps = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    add_steps(dst, src, N, BLOCK=$block))
reduced = lambda dst, src, N: autotune(space=dict(block=[512, 1024]), blocks=1,
    reduce_all(dst, src, N, BLOCK=$block))
scale = lambda dst, src, N: autotune(space=dict(block=[32, 128]), blocks=cdiv(N, $block),
    scale_copy(dst, src, N, BLOCK=$block))
optioned = lambda dst, src, N, fusion, warps: autotune(space=dict(block=[32, 128]),
    blocks=cdiv(N, $block), add_steps(dst, src, N, BLOCK=$block, enable_fp_fusion=fusion, num_warps=warps))
ints = lambda dst, i: autotune(space=dict(block=[16, 32]), blocks=1,
    store_int(dst, i, BLOCK=$block))
"""

HEAD = "WIDTH = 32\nDTYPE = tl.float16\nSCALE = tl.constexpr(2.0)\n"


def load(path: Path, text: str = SCRIPT, head: str = HEAD) -> dict[str, Any]:
    """``text`` with ``head`` after its imports, written to ``path``, expanded by the front
    end and run as a module."""
    imports, rest = text.split("\n\n\n", 1)
    path.write_text(f"{imports}\n\n{head}\n\n{rest}", encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_third", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    """The functions of ``SCRIPT``, as a module."""
    return load(tmp_path / "ported_third.py")


def copy_run(module: dict[str, Any], site: str, n: int = 300) -> Any:
    """One call of a copy-like ``site`` on fresh tensors; returns the result and the output."""
    src, dst = torch.randn(n), torch.zeros(n)
    return module[site](dst, src, n), dst, src


# --- Triton test_cache: what makes a kernel another kernel, in a new process ---------------


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_kernel_default_arg
def test_a_changed_constexpr_default_is_tuned_again_in_a_new_process(tmp_path: Path) -> None:
    """Triton fixes a ``tl.constexpr`` parameter's default when the kernel is declared
    (``i: tl.constexpr = GLOBAL_DEFAULT_ARG``), and a new default is another kernel. A
    decision stored while the default was 32 is not served once the module declares it
    64: there only BLOCK=64 compiles, and the stored BLOCK=32 would fail at launch."""
    path = tmp_path / "ported_third.py"
    first, dst, src = copy_run(load(path), "wide")
    assert first.source == "tuned" and first.config == Config(block=32) and torch.equal(dst, src)
    new_process()
    same, dst, src = copy_run(load(path), "wide")
    assert same.source == "disk" and torch.equal(dst, src)
    new_process()
    changed, dst, src = copy_run(load(path, head=HEAD.replace("WIDTH = 32", "WIDTH = 64")), "wide")
    assert changed.source == "tuned" and changed.config == Config(block=64)
    assert torch.equal(dst, src) and changed.digest != first.digest


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_cache_builtin_as_global
def test_a_changed_dtype_global_is_tuned_again_in_a_new_process(tmp_path: Path) -> None:
    """Triton records a ``tl.dtype`` global the kernel reads (``BUILTIN_AS_GLOBAL =
    tl.int32``) and refuses to reuse the kernel once it changed. A decision stored under
    ``DTYPE = tl.float16`` is not served under ``tl.float32``, where only BLOCK=64 compiles."""
    path = tmp_path / "ported_third.py"
    first, dst, src = copy_run(load(path), "dtype_wide")
    assert first.source == "tuned" and first.config == Config(block=32) and torch.equal(dst, src)
    new_process()
    head = HEAD.replace("tl.float16", "tl.float32")
    changed, dst, src = copy_run(load(path, head=head), "dtype_wide")
    assert changed.source == "tuned" and changed.config == Config(block=64)
    assert torch.equal(dst, src)


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_constexpr_fn_change
def test_an_edited_constexpr_function_is_tuned_again_in_a_new_process(tmp_path: Path) -> None:
    """Triton's hash covers a ``@triton.constexpr_function`` the kernel calls: editing its
    body (here the width it returns) is another kernel, so the stored choice is not served."""
    path = tmp_path / "ported_third.py"
    first, dst, src = copy_run(load(path), "fn_wide")
    assert first.config == Config(block=32) and torch.equal(dst, src)
    new_process()
    assert copy_run(load(path), "fn_wide")[0].source == "disk"
    new_process()
    edited = SCRIPT.replace("return bits * 2", "return bits * 4")
    changed, dst, src = copy_run(load(path, edited), "fn_wide")
    assert changed.source == "tuned" and changed.config == Config(block=64)
    assert torch.equal(dst, src)


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_nested2_change
def test_a_function_edited_two_calls_deep_is_tuned_again(tmp_path: Path) -> None:
    """Triton test_nested1_change / test_nested2_change: the kernel calls ``step1``, which
    calls ``step0`` through a ``tl.constexpr`` local; editing ``step0`` (two calls deep)
    makes another kernel, and its output changes with it."""
    path = tmp_path / "ported_third.py"
    first, dst, src = copy_run(load(path), "steps")
    assert first.source == "tuned" and torch.allclose(dst, src + 2.0)
    new_process()
    edited = SCRIPT.replace("return x + 1.0\n", "return x + 5.0\n")
    assert SCRIPT.count("return x + 1.0\n") == 1
    changed, dst, src = copy_run(load(path, edited), "steps")
    assert changed.source == "tuned" and torch.allclose(dst, src + 6.0)


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_combine_fn_change
def test_an_edited_combine_function_of_a_reduction_is_tuned_again(tmp_path: Path) -> None:
    """Triton hashes the ``combine_fn`` given to ``tl.reduce`` (it is passed, not called):
    a sum edited into a maximum is another kernel, tuned again, and its result is right."""
    path = tmp_path / "ported_third.py"
    src, dst = torch.randn(300), torch.zeros(1)
    assert load(path)["reduced"](dst, src, 300).source == "tuned"
    torch.testing.assert_close(dst, src.sum().reshape(1), rtol=1e-5, atol=1e-4)
    new_process()
    assert load(path)["reduced"](dst, src, 300).source == "disk"
    new_process()
    edited = SCRIPT.replace("    return a + b\n", "    return tl.maximum(a, b)\n")
    src = src.abs()  # the masked lanes load 0.0
    changed = load(path, edited)["reduced"](dst, src, 300)
    assert changed.source == "tuned" and dst.item() == src.max().item()


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_conflicting_global_in_inner_function
def test_a_constexpr_global_read_by_a_called_function_is_part_of_the_kernel(
    tmp_path: Path,
) -> None:
    """Triton test_kernel_global_var_change / test_conflicting_global_in_inner_function: a
    ``tl.constexpr`` global read by a function the kernel calls belongs to the kernel; a
    new value is tuned again and computes with the new value."""
    path = tmp_path / "ported_third.py"
    first, dst, src = copy_run(load(path), "scale")
    assert first.source == "tuned" and torch.equal(dst, src * 2.0)
    new_process()
    changed, dst, src = copy_run(load(path, head=HEAD.replace("(2.0)", "(3.0)")), "scale")
    assert changed.source == "tuned" and torch.equal(dst, src * 3.0)


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_specialize
def test_ints_are_keyed_by_tritons_specialization_classes(dsl: dict[str, Any]) -> None:
    """Triton test_specialize ("enable": ints 1, 2, 4, 8, 16, 32 compile 3 kernels: equal to
    1, divisible by 16, other): the same three decisions, each int stored correctly."""
    got = []
    for i in (1, 2, 4, 8, 16, 32):
        dst = torch.zeros(32, dtype=torch.int32)
        got.append(dsl["ints"](dst, i))
        assert (dst[:16] == i).all()
    assert [r.source for r in got] == ["tuned", "tuned", "memory", "memory", "tuned", "memory"]
    assert len({r.digest for r in got}) == 3


# ported from: triton-lang/triton python/test/unit/runtime/test_specialize.py::test_specialize_impl
def test_an_int_subclass_is_keyed_like_the_int_it_is() -> None:
    """Triton test_specialize_impl (``MockInt(1)``, an ``int`` subclass, is specialized as
    the int it is: 1 becomes a constant, multiples of 16 are marked divisible): an
    ``IntEnum`` size gets the decisions of Triton's three int classes, not one decision
    for its class whatever the value."""
    import enum

    from ported_kernels_more import copy

    class Size(enum.IntEnum):
        ONE = 1
        ODD = 17
        EVEN = 32
        EVEN_TOO = 48

    got = []
    for n in (Size.ONE, Size.ODD, Size.EVEN, Size.EVEN_TOO, Size.ODD):
        src, dst = torch.randn(64), torch.zeros(64)
        got.append(
            autotune_launch(
                copy,
                space={"block": [32, 128]},
                grid=lambda cfg, n=n: (cdiv(int(n), cfg.block),),
                args=(dst, src, n),
                kwargs=lambda cfg: {"BLOCK": cfg.block},
                name="int-enum",
            )
        )
        assert torch.equal(dst[:n], src[:n]) and not dst[n:].any()
    assert [r.source for r in got] == ["tuned", "tuned", "tuned", "memory", "memory"]
    assert [r.key["args"]["N"] for r in got] == ["i1", "i", "i16", "i16", "i"]


# ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_jit_debug
# ported from: triton-lang/triton python/test/unit/runtime/test_launch.py::test_launch_with_options
def test_a_launch_option_passed_in_the_launch_is_keyed_by_its_value(dsl: dict[str, Any]) -> None:
    """Triton test_jit_debug (a launch with ``debug=True`` compiles a second kernel beside
    the ``debug=False`` one): Triton's launch options given in the launch
    (``enable_fp_fusion=``, ``num_warps=``) are keyed by value, as each value is another
    binary: ``num_warps=8`` or fusion off is decided apart from ``num_warps=4`` with fusion
    on (not keyed by the class of an int or bool, under which all of them look alike, and
    on a GPU a later call would be launched with the first call's binary)."""
    got = []
    for fusion, warps in ((True, 4), (False, 4), (True, 8), (True, 4)):
        src, dst = torch.randn(300), torch.zeros(300)
        got.append(dsl["optioned"](dst, src, 300, fusion, warps))
        assert torch.allclose(dst, src + 2.0)
    assert [r.source for r in got] == ["tuned", "tuned", "tuned", "memory"]
    assert got[1].key["args"]["enable_fp_fusion"] != got[0].key["args"]["enable_fp_fusion"]
    assert len({r.digest for r in got}) == 3


# ported from: triton-lang/triton python/test/unit/runtime/test_launch.py::test_memory_leak
def test_repeated_launches_of_a_decided_key_keep_no_memory(dsl: dict[str, Any]) -> None:
    """Triton test_memory_leak (100 launches of one kernel grow the traced memory by less
    than 30 kB): once a key is decided, 200 more calls of a site keep nothing per call
    (no result, key or entry piles up), measured with tracemalloc after a warm-up."""
    import gc
    import tracemalloc

    src, dst = torch.randn(10), torch.zeros(10)
    for _ in range(50):  # the decision, then the site's entry and its repeat check
        dsl["steps"](dst, src, 10)
    tracemalloc.start()
    try:
        for _ in range(100):  # what the first traced calls allocate once
            dsl["steps"](dst, src, 10)
        gc.collect()
        begin, _ = tracemalloc.get_traced_memory()
        for _ in range(200):
            dsl["steps"](dst, src, 10)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - begin < 10_000 and torch.allclose(dst, src + 2.0)


# --- triton.autotune and Kernel Tuner: arguments checked before anything runs -------------


def launch_copy(name: str, **options: Any) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """``copy`` over 300 elements tuned on ``block`` through ``autotune_launch``, with
    ``options`` replacing the defaults; returns the result, the output and the input."""
    from ported_kernels_more import copy

    src, dst = torch.randn(300), torch.zeros(300)
    call: dict[str, Any] = {
        "space": {"block": [32, 128]},
        "grid": lambda cfg: (cdiv(300, cfg.block),),
        "args": (dst, src, 300),
        "kwargs": lambda cfg: {"BLOCK": cfg.block},
        "name": name,
    }
    call.update(options)
    return autotune_launch(copy, **call), dst, src


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_restrictions
def test_a_restriction_given_as_a_string_is_a_usage_error() -> None:
    """Kernel Tuner takes restrictions as strings ("block_size_x>=32"); tunedsl's
    constraint is a function of the configuration, and a string is named with what it
    must be, instead of failing later as "'str' object is not callable"."""
    with pytest.raises(UsageError, match=r"constraint=.*must be callable, not 'block >= 64'"):
        Space(block=[32, 128], constraint="block >= 64")  # type: ignore[arg-type]


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_get_grid_dimensions1
@pytest.mark.parametrize(
    ("grid", "problem"),
    [
        (lambda cfg: (300 / cfg.block,), r"non-negative ints, got \(9\.375,\)"),
        (lambda cfg: (-1,), r"non-negative ints, got \(-1,\)"),
        (lambda cfg: (1, 1, 1, 1), r"1 to 3 dimensions, got \(1, 1, 1, 1\)"),
    ],
    ids=["float", "negative", "four-dimensions"],
)
def test_a_grid_triton_cannot_launch_is_a_usage_error(grid: Any, problem: str) -> None:
    """Kernel Tuner computes grid dimensions as ceil(problem / grid_div) and Triton takes
    1 to 3 non-negative ints: a grid of a float (``n / block`` instead of ``cdiv``), a
    negative size or four dimensions is one error naming ``grid=`` before any
    configuration runs, instead of every configuration failing in the interpreter."""
    with pytest.raises(UsageError, match=rf": grid= must .*{problem}") as info:
        launch_copy(f"grid-{problem[:8]}", grid=grid)
    assert "Config(" not in str(info.value)  # not a list of failed configurations
    assert "blocks=" not in str(info.value)  # the DSL's argument, which this call never wrote


@pytest.mark.parametrize(
    ("which", "grid"),
    [
        ("one", lambda cfg: ((cdiv(300, cfg.block), 1),)),
        ("two", lambda cfg: ((cdiv(300, cfg.block), 1), 1)),
    ],
)
def test_a_nested_grid_names_grid_not_the_dsls_blocks(which: str, grid: Any) -> None:
    """A nested tuple from ``grid=`` told the user to write its dimensions in ``blocks=``
    (or called the argument ``blocks=/grid=``): ``autotune_launch`` has no ``blocks=``."""
    with pytest.raises(UsageError, match=r": grid= is a nested tuple \(\(\d+, 1\),") as info:
        launch_copy(f"grid-nested-{which}", grid=grid)
    assert "blocks=" not in str(info.value), str(info.value)


# ported from: KernelTuner/kernel_tuner test/test_core.py::test_check_kernel_output
@pytest.mark.parametrize(
    "verify",
    [lambda inputs: {"dstt": inputs["src"].clone()}, ["dstt"]],
    ids=["reference", "names"],
)
def test_verifying_an_argument_the_kernel_does_not_have_is_a_usage_error(verify: Any) -> None:
    """Kernel Tuner checks that ``answer`` has one entry per kernel argument; tunedsl's
    ``verify=`` names outputs, and a name that is not a tensor parameter (a typo) is an
    error listing the tensor parameters, never an output left unchecked in silence."""
    with pytest.raises(
        UsageError, match=r"'dstt' is not a (tensor )?parameter.*(dst, src|did you mean 'dst')"
    ):
        launch_copy("verify-typo", verify=verify)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_restore
@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"restore_value": ["srcc"]}, r"restore_value=?: 'srcc' is not a parameter"),
        ({"reset_to_zero": ["N"]}, r"reset_to_zero=?: (argument )?'N' is not a tensor"),
    ],
    ids=["misspelled", "not-a-tensor"],
)
def test_restore_or_reset_of_what_is_no_tensor_parameter_is_a_usage_error(
    option: dict[str, Any], message: str
) -> None:
    """``triton.autotune(restore_value=[...])`` looks its names up among the kernel's
    arguments: a misspelled name, or an int, would leave the data it should protect
    unprotected, so either is an error naming it, and the caller's tensors are untouched."""
    with pytest.raises(UsageError, match=message):
        launch_copy("restore-typo", **option)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_kwargs
@pytest.mark.parametrize("timing", ["graph", "events"])
def test_each_timing_mode_tunes_under_the_interpreter(timing: str) -> None:
    """Triton test_kwargs with ``use_cuda_graph`` True and False (``do_bench`` or
    ``do_bench_cudagraph``): tunedsl's ``timing=`` modes; under the interpreter both time
    by the wall clock, tune every configuration and launch the chosen one."""
    res, dst, src = launch_copy(f"timing-{timing}", timing=timing)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert len(res.timings) == 2 and torch.equal(dst, src)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_kwargs
def test_an_unknown_timing_mode_is_a_usage_error_naming_the_modes() -> None:
    """Triton's ``do_bench=`` takes any function; tunedsl's ``timing=`` is one of three
    modes, and another word is an error listing them before anything runs."""
    with pytest.raises(UsageError, match=r"timing='cudagraph'; expected one of auto, graph"):
        launch_copy("timing-bad", timing="cudagraph")


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_kwargs
def test_tensors_a_kwargs_function_passes_only_on_later_calls_are_keyed() -> None:
    """Triton test_kwargs (a launch by keyword is keyed like one by position) and
    test_reset_to_zero's optional buffer: a ``kwargs=`` function whose later calls return
    names the first call's did not (an optional ``bias``, tensors passed by keyword) keys
    those tensors as well, so a call with a bias, or of another dtype and size, gets its
    own decision instead of the first call's."""
    from ported_kernels_third import copy_plus

    def call(n: int, dtype: torch.dtype, with_bias: bool) -> Any:
        src, dst = torch.randn(n, dtype=dtype), torch.zeros(n, dtype=dtype)
        bias = torch.randn(n, dtype=dtype)
        named = {"dst": dst, "src": src, "N": n, **({"bias": bias} if with_bias else {})}
        res = autotune_launch(
            copy_plus,
            space={"block": [32, 128]},
            grid=lambda cfg: (cdiv(n, cfg.block),),
            kwargs=lambda cfg: {**named, "BLOCK": cfg.block},
            name="optional-bias",
        )
        torch.testing.assert_close(dst, src + bias if with_bias else src)
        return res

    got = [call(300, torch.float32, False), call(300, torch.float32, True)]
    got += [call(300, torch.float32, True), call(4096, torch.float16, True)]
    assert [r.source for r in got] == ["tuned", "tuned", "memory", "tuned"]
    assert len({r.digest for r in got}) == 3
    assert got[1].key["args"]["bias"] == {"dtype": "float32", "shape": [300], "stride": "1"}


# --- Kernel Tuner and Helion: search strategies ---------------------------------------------


class CostMeasurer:
    """A ``Measurer`` whose configuration costs ``cost(config)`` ms, or fails to compile
    where ``cost`` gives None (as Kernel Tuner's strategy tests replay a cache file)."""

    compile_workers = 1

    def __init__(self, cost: Any) -> None:
        self.cost = cost
        self.prepared: list[Config] = []

    def prepare(self, configs: Any) -> Any:
        from tunedsl.engine.seams import Prepared

        for cfg in configs:
            self.prepared.append(cfg)
            if self.cost(cfg) is None:
                yield Prepared(cfg, status="failed", error="compile: too many registers")
            else:
                yield Prepared(cfg)

    def sample(self, config: Config, reps: int) -> list[float]:
        return [self.cost(config)] * reps

    def close(self) -> None:
        pass


def ticking_clock(step: float = 0.01) -> Any:
    """A clock that moves ``step`` seconds each time it is read: budgets in reads, not in
    this machine's speed."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def search(strategy: str, seed: int = 0, budget_s: float = 3.0) -> tuple[Any, CostMeasurer]:
    """One search of a 9 x 9 x 4 space with a constraint and a failing region."""
    from tunedsl.engine.driver import run_search
    from tunedsl.engine.search import make_strategy
    from tunedsl.model.space import Axis

    space = Space(
        BM=Axis.pow2(1, 256),
        BN=Axis.pow2(1, 256),
        num_warps=[1, 2, 4, 8],
        constraint=lambda c: c.BM * c.BN <= 4096,
    )

    def cost(c: Config) -> float | None:
        if c.BM * c.BN * c.num_warps > 8192:
            return None  # fails to compile
        return 1 + abs(c.BM - 32) / 8 + abs(c.BN - 16) / 8 + abs(c.num_warps - 4) / 2

    m = CostMeasurer(cost)
    out = run_search(space, make_strategy(strategy, seed=seed), m, budget_s=budget_s,
                     clock=ticking_clock())  # fmt: skip
    return out, m


# ported from: KernelTuner/kernel_tuner test/strategies/test_strategies.py::test_strategies
@pytest.mark.parametrize("strategy", ["exhaustive", "random", "pattern", "model"])
def test_a_strategy_proposes_only_valid_configurations_once_each(strategy: str) -> None:
    """Kernel Tuner test_strategies (every strategy, with restrictions, returns results
    for valid configurations only, each once, and reports the best): each of tunedsl's
    strategies compiles only configurations the constraint keeps, never one twice, and
    chooses the fastest of those that did not fail."""
    out, m = search(strategy)
    assert m.prepared and all(c.BM * c.BN <= 4096 for c in m.prepared)
    assert len(m.prepared) == len(set(m.prepared))
    ok = {o.config: o for o in out.observations if o.status == "ok"}
    assert out.chosen in ok and out.chosen.BM * out.chosen.BN * out.chosen.num_warps <= 8192
    assert ok[out.chosen].median_ms == min(o.median_ms for o in ok.values())


# ported from: pytorch/helion test/test_autotuner.py::test_autotune_random_seed_from_env_var
@pytest.mark.parametrize("strategy", ["random", "pattern", "model"])
def test_a_search_is_reproducible_given_its_seed(strategy: str) -> None:
    """Helion's autotuner seed setting (the same seed gives the same search) and Kernel
    Tuner's strategy seeds: two searches with one seed compile the same configurations in
    the same order and choose the same one; another seed starts elsewhere."""
    first, m1 = search(strategy, seed=3, budget_s=1.0)
    again, m2 = search(strategy, seed=3, budget_s=1.0)
    _, m3 = search(strategy, seed=4, budget_s=1.0)
    assert m1.prepared == m2.prepared and first.chosen == again.chosen
    assert m1.prepared[:8] != m3.prepared[:8]


# ported from: KernelTuner/kernel_tuner test/strategies/test_strategies.py::test_strategies
def test_an_axis_of_mixed_types_keeps_one_and_true_apart() -> None:
    """Kernel Tuner test_strategies tunes ``test_mixed = ["test", 1, True, 2.45]`` with
    restrictions: every value is its own configuration. In Python ``1 == True``, but as a
    ``tl.constexpr`` each compiles another kernel, so tunedsl measures, records and hands
    hooks each value with its own type, and a constraint sees them as Python does."""
    from ported_kernels_third import copy_mode

    seen: set[tuple[str, Any]] = set()
    src, dst = torch.randn(300), torch.zeros(300)
    res = autotune_launch(
        copy_mode,
        space=Space(mode=["test", 1, True, 2.45, 0], constraint=lambda c: c.mode != 0),
        grid=(cdiv(300, 64),),
        args=(dst, src, 300),
        kwargs=lambda cfg: {"MODE": cfg.mode, "BLOCK": 64},
        pre_hook=lambda args: seen.add((type(args["MODE"]).__name__, args["MODE"])),
        name="mixed-axis",
    )
    modes = [(type(c.mode).__name__, c.mode) for c in res.timings]
    assert sorted(modes) == [("bool", True), ("float", 2.45), ("int", 1), ("str", "test")]
    assert seen == set(modes) and torch.equal(dst, src)


# --- vLLM / SGLang: tuned configurations shipped with an application ------------------------


# ported from: vllm-project/vllm vllm/model_executor/layers/fused_moe/fused_moe.py::get_moe_configs
def test_shipped_records_are_used_read_only_and_only_for_the_kernel_they_tuned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM and SGLang load tuned configurations from JSON files shipped beside the kernel
    (``configs/E=...,device_name=....json``) and fall back to tuning or defaults when none
    matches. tunedsl's counterpart is a ``TUNEDSL_RECORDS_PATH`` directory: a new process
    with an empty cache launches the shipped choice without tuning, writing nothing there
    or in its cache; once the kernel is edited, the shipped record no longer matches and
    the key is tuned (into the cache, never into the shipped directory)."""
    path = tmp_path / "ported_third.py"
    first, _, _ = copy_run(load(path), "steps")
    assert first.source == "tuned"
    shipped = tmp_path / "shipped"
    shutil.copytree(Path(os.environ["TUNEDSL_CACHE_DIR"]) / "records", shipped)
    shipped.chmod(0o755)
    before = sorted(p.name for p in shipped.iterdir())
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "fresh-cache"))
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(shipped))
    new_process()
    used, dst, src = copy_run(load(path), "steps")
    assert used.source == "disk" and used.config == first.config
    assert torch.allclose(dst, src + 2.0) and not record_files()
    new_process()
    edited, dst, src = copy_run(load(path, SCRIPT.replace("FN(x) + 1.0", "FN(x) + 3.0")), "steps")
    assert edited.source == "tuned" and torch.allclose(dst, src + 4.0)
    assert len(record_files()) == 1 and sorted(p.name for p in shipped.iterdir()) == before


# --- Helion / Inductor: forcing a new tuning, and an empty input --------------------------


# ported from: pytorch/helion test/test_cache.py::test_force_autotune_skips_read_but_writes
def test_force_retune_tunes_again_over_a_record_and_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helion's ``HELION_FORCE_AUTOTUNE=1`` and Inductor's ``force_disable_caches`` (a stored
    result is ignored and the kernel benchmarked again): under ``TUNEDSL_FORCE_RETUNE=1``
    a new process tunes the key again over its record and writes the new record in its
    place; without it the next process reads that record."""
    path = tmp_path / "ported_third.py"
    first, _, _ = copy_run(load(path), "steps")
    [record] = record_files()
    stamp = json.loads(record.read_text())["timestamp"]
    new_process()
    monkeypatch.setenv("TUNEDSL_FORCE_RETUNE", "1")
    forced, dst, src = copy_run(load(path), "steps")
    assert forced.source == "tuned" and forced.digest == first.digest
    assert torch.allclose(dst, src + 2.0)
    assert record_files() == [record] and json.loads(record.read_text())["timestamp"] > stamp
    new_process()
    monkeypatch.delenv("TUNEDSL_FORCE_RETUNE")
    assert copy_run(load(path), "steps")[0].source == "disk"


# ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_empty_conv_input
def test_an_empty_input_runs_and_decides_nothing(dsl: dict[str, Any]) -> None:
    """Inductor test_max_autotune (max-autotune of an empty input does not fail, and its
    result is not reused for real sizes): a call on zero elements (a grid of no programs)
    runs without error, tunes nothing and writes nothing; the next call of a real size is
    tuned and is right."""
    empty, dst, src = copy_run(dsl, "steps", n=0)
    assert empty.source == "empty" and dst.numel() == 0
    real, dst, src = copy_run(dsl, "steps", n=300)
    assert real.source == "tuned" and real.digest != empty.digest
    assert torch.allclose(dst, src + 2.0)


# --- Kernel Tuner and Triton: mistakes in a site named at their place ----------------------


def site_text(line: str) -> str:
    return f"from tunedsl import autotune, cdiv\nfrom ported_kernels_more import copy\n{line}\n"


def run_site(path: Path, line: str) -> Any:
    """The module of one DSL ``site`` line, compiled and called once on 300 elements."""
    path.write_text(site_text(line), encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_third_site", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    src, dst = torch.randn(300), torch.zeros(300)
    try:
        return namespace["site"](dst, src, 300)
    finally:
        assert not dst.any()  # every test here expects an error before any launch


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_block_size_params_names_list
def test_a_block_name_not_in_the_space_is_named_at_its_column(tmp_path: Path) -> None:
    """Kernel Tuner checks ``block_size_names`` against the tunable parameters; tunedsl's
    ``$name`` in ``blocks=`` must be a field of ``space=``: a misspelled one is a syntax
    error at its file, line and column with the field it probably means."""
    line = ("site = lambda dst, src, N: autotune(space=dict(block=[32, 128]), "
            "blocks=cdiv(N, $blok), copy(dst, src, N, BLOCK=$block))")  # fmt: skip
    path = tmp_path / "blok.py"
    with pytest.raises(TunedslSyntaxError, match=r"`\$blok` is not a field of `space=`") as info:
        run_site(path, line)
    text = str(info.value)
    assert f"{path}:3:{line.index('$blok') + 1}" in text and "did you mean `$block`?" in text


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_tune_params_list
@pytest.mark.parametrize("literal", [True, False], ids=["literal-space", "computed-space"])
def test_a_space_field_nothing_reads_is_named_with_the_hint_it_resembles(
    tmp_path: Path, literal: bool
) -> None:
    """Kernel Tuner refuses tunable parameters it cannot use (reserved or unknown names);
    a tunedsl space field nothing reads (``num_warp``, a misspelled launch hint) would
    tune the same kernel once per value: it is an error naming the field, at compile time
    for a literal space and on the first call for a computed one."""
    space = "dict(block=[32, 128], num_warp=[2, 4])"
    head = "" if literal else f"SPACE = {space}\n"
    line = (f"{head}site = lambda dst, src, N: autotune(space={space if literal else 'SPACE'}, "
            "blocks=cdiv(N, $block), copy(dst, src, N, BLOCK=$block))")  # fmt: skip
    error = TunedslSyntaxError if literal else UsageError
    with pytest.raises(error, match=r"field `num_warp` is read by nothing") as info:
        run_site(tmp_path / "num_warp.py", line)
    assert literal or "did you mean the launch hint `num_warps`?" in str(info.value)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_kwargs
def test_a_launch_in_tritons_bracket_form_is_named_with_the_fix(tmp_path: Path) -> None:
    """Triton's autotuned kernels launch as ``_kernel[grid](...)``; inside ``autotune(...)``
    that form would launch at once, outside the tuning, so it is an error naming the
    launch and the form to write (``copy(...)`` with ``blocks=``)."""
    line = ("site = lambda dst, src, N: autotune(space=dict(block=[32, 128]), "
            "blocks=cdiv(N, $block), copy[(1,)](dst, src, N, BLOCK=$block))")  # fmt: skip
    with pytest.raises(UsageError, match=r"`copy\[\(1,\)\]\(\.\.\.\)` is Triton's .*write `copy"):
        run_site(tmp_path / "brackets.py", line)


# ported from: pytorch/helion test/test_cache.py::test_kernel
def test_a_list_of_tensors_is_a_usage_error_naming_the_tuple_to_pass() -> None:
    """Helion test_cache test_kernel["list_tensor"] passes a list of tensors. Triton takes
    a tuple there (a list fails to launch under every configuration, with an error from
    deep inside the launch): a list is one error naming the parameter and the fix before
    anything runs, and the tuple then tunes and is right."""
    from ported_kernels_more import sum_pair

    a, b = torch.randn(16), torch.randn(16)

    def launch(pair: Any) -> Any:
        return autotune_launch(
            sum_pair,
            space={"block": [32, 128]},
            grid=lambda cfg: (cdiv(16, cfg.block),),
            args=(dst, pair, 16),
            kwargs=lambda cfg: {"BLOCK": cfg.block},
            name=f"pair-{type(pair).__name__}",
        )

    dst = torch.zeros(16)
    with pytest.raises(UsageError, match=r"`srcs` of sum_pair is a list; .* pass tuple\(srcs\)"):
        launch([a, b])
    assert not dst.any()
    assert launch((a, b)).source == "tuned" and torch.equal(dst, a + b)


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_kwargs
def test_a_space_of_triton_configs_is_named_with_the_dicts_to_write() -> None:
    """Triton's tests list ``triton.Config(kwargs={...}, num_warps=...)``; a tunedsl list
    space holds dicts, so a ``triton.Config`` in it is an error that spells out the dict
    of that configuration (its keyword arguments and launch options), and that dict
    tunes."""
    import triton
    from ported_kernels_more import copy

    def launch(space: list[Any], dst: torch.Tensor, src: torch.Tensor) -> Any:
        return autotune_launch(
            copy,
            space=space,
            grid=lambda cfg: (cdiv(300, cfg.BLOCK),),
            args=(dst, src, 300),
            kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
            name="triton-configs",
        )

    src, dst = torch.randn(300), torch.zeros(300)
    configs = [triton.Config({"BLOCK": 32}, num_warps=2), triton.Config({"BLOCK": 128})]
    written = "{'BLOCK': 32, 'num_warps': 2, 'num_stages': 3, 'num_ctas': 1}"
    with pytest.raises(
        UsageError, match=rf"space\[0\] is a triton.Config; .*: {re.escape(written)}"
    ):
        launch(configs, dst, src)
    assert not dst.any()
    spelled = [{"BLOCK": 32, "num_warps": 2, "num_stages": 3}, {"BLOCK": 128, "num_warps": 4}]
    res = launch(spelled, dst, src)
    assert res.source == "tuned" and len(res.timings) == 2 and torch.equal(dst, src)


# --- Helion: configurations and their neighbours ------------------------------------------


# ported from: pytorch/helion test/test_autotuner.py::test_pattern_search_neighbor_values
def test_neighbours_along_each_kind_of_axis() -> None:
    """Helion test_pattern_search_neighbor_values (power-of-two 32 in 1..128: 16 and 64;
    integer 3 in 1..5: 2 and 4; a boolean: the other; an enum: every other choice): the
    neighbours tunedsl's pattern search steps to, one axis at a time."""
    from tunedsl.model.space import Axis

    def along(space: Space, config: Config, field: str) -> set[Any]:
        return {c[field] for c in space.neighbours(config)}

    assert along(Space(b=Axis.pow2(1, 128)), Config(b=32), "b") == {16, 64}
    assert along(Space(i=Axis.ordered(range(1, 6))), Config(i=3), "i") == {2, 4}
    assert along(Space(flag=[False, True]), Config(flag=True), "flag") == {False}
    assert along(Space(e=["a", "b", "c"]), Config(e="b"), "e") == {"a", "c"}
    assert along(Space(b=Axis.pow2(1, 128)), Config(b=128), "b") == {64}  # the edge


# ported from: pytorch/helion test/test_autotuner.py::test_config_pickle_roundtrip
def test_a_configuration_round_trips_through_json_and_pickle() -> None:
    """Helion test_save_load_config / test_config_pickle_roundtrip: a configuration saved
    as JSON and loaded, or pickled (as ``isolate=True`` sends it to its worker), is equal
    and hashes alike; a value JSON cannot hold as a scalar is refused, naming the field."""
    import pickle

    config = Config(block=64, num_warps=4, layout="nt", even=True, scale=0.5, tail=None)
    loaded = Config.from_json(json.loads(json.dumps(config.to_json())))
    restored = pickle.loads(pickle.dumps(config))
    assert loaded == config == restored and hash(loaded) == hash(restored) == hash(config)
    assert {config: 1}[restored] == 1 and restored is not config
    with pytest.raises(UsageError, match=r"field 'sizes' has value \[64, 64\] of type list"):
        Config.from_json({"block": 64, "sizes": [64, 64]})
