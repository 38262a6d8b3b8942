"""A seventeenth batch of other autotuners' test suites, ported to tunedsl: Triton's
test_specialize.py (every native scalar input it lists, and ``numpy.float64``, which Triton
specializes as the float it is), Helion's private clones of mixed-dtype aliases
(test_autotune_clone_alignment.py: a float tensor and a byte view of its storage), its
restore of mutated arguments when a launch is interrupted half done, its candidates
benchmarked in a subprocess (test_autotuner_subprocess.py: here ``isolate=True`` with kernels
the worker cannot import) and its custom baseline function (one that hangs), PyTorch Inductor's
zero-size inputs (test_max_autotune.py: here an empty reduction beside an output with work)
and its coordinate-descent persistent reduction that must be right on the tuning call
(test_coordinate_descent_tuner.py::test_persistent_reduction).

Found and fixed: a ``numpy.float64`` given to a kernel's runtime float (``scale = 1.0 /
np.sqrt(d)``, as attention kernels compute their softmax scale) was refused on the site's
first call with a ``UsageError`` ("pass float(scale)"), though it is a Python ``float``
(a subclass) that Triton takes as ``fp32``, on the GPU and under the interpreter alike
(test_a_numpy_float64_scale_is_launched_as_triton_takes_it). Other numpy scalars
(``numpy.float32``, ``numpy.int64``, ``numpy.bool_``), which Triton cannot launch, are still
named with the fix.

With ``isolate=True`` on a GPU, a kernel defined in ``__main__`` (``tunedsl run``), a notebook
cell or a function body could not be tuned: it is sent to the worker by value and made a
Triton kernel there again, which reads its source, and cloudpickle 3.1 and later ship a
function's code as from ``<dynamic-code>`` (a cell is on no disk either), so every tuning
failed with "@jit functions should be defined in a Python file". Its source now travels with
it. The worker's kernel also lost ``do_not_specialize_on_alignment``, so it timed a binary
specialized on a pointer's alignment that the caller never launches
(test_a_kernel_sent_by_value_compiles_in_the_worker_as_in_the_caller, shown by
cross-compiling for ``cuda:90``: no GPU here). A ``@triton.constexpr_function`` such a kernel
calls, defined beside it, could not be sent at all, on a GPU or under the interpreter: it
holds a lock ("cannot pickle '_thread.RLock' object", blamed on the user's hooks or
arguments); it is made again in the worker from its function and source
(test_a_kernel_and_its_constexpr_function_in_a_script_are_tuned_isolated). A ``verify=fn``
whose reference hangs in the worker timed out after ``TUNEDSL_CONFIG_TIMEOUT`` plus 60 s, and
the error gave that sum as if it were the variable's value, naming nothing that ran; it now
names the setup, the limit as set and the reference
(test_a_reference_that_hangs_in_the_worker_is_named_with_the_limit_as_set).

Looked at and found sound (and kept so by a test): each of Triton's native scalar
specializations its own decision, none split further, read back from disk; a float tensor and
a uint8 view of its storage passed side by side, in process and in a worker; Ctrl-C arriving
inside a launch, after some programs wrote the caller's tensor, with and without
``restore_value``; a row sum over rows of zero elements verified against a reference, in
process and isolated; an in-place row normalisation right on the tuning call and after.

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through DSL macros compiled by ``tunedsl.frontend`` and
through ``autotune_launch``.

Not ported, for want of a counterpart: Helion's checkpoints of a search in progress
(test_checkpoint_resumability.py: a tuning killed half way leaves no record in tunedsl, and
the next process tunes the key whole, docs/runtime.md "Locks") and its crash recovery
(test_autotuner_subprocess.py: the configuration being measured when the process died is
skipped by the next run; in tunedsl a configuration that kills the process needs
``isolate=True``, where it is recorded as failed, docs/runtime.md "When configurations
fail"); Triton's ``launch_metadata`` and launch hooks
(test_launch.py::test_metadata: the interpreter calls no launch hook); Triton's neg and conj
views (a kernel reads the raw storage, so a reference computed by
PyTorch from such a view differs from what every configuration writes, in tunedsl as in
Triton).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from compile_scripts import run_report
from runtime_helpers import new_api_process

from tunedsl import TuningError, UsageError, autotune_launch, cdiv
from tunedsl.frontend.compile import compile_source
from tunedsl.warn import forget

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import triton
import triton.language as tl
from tunedsl import autotune, cdiv
from ported_kernels_seventeenth import scaled_copy


def softmax_scaled(out, x, scale):
    n = x.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK),
                    scaled_copy(out, x, n, scale, BLOCK=$BLOCK))


@triton.constexpr_function
def times(v):
    return v * 3


@triton.jit
def tripled(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * times(1), mask=offs < n)


def triple_isolated(x, y):
    n = x.numel()
    return autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK), isolate=True,
                    tripled(x, y, n, BLOCK=$BLOCK))
"""


def load(path: Path) -> dict[str, Any]:
    """``SCRIPT`` written to ``path``, expanded by the front end and run as a new module (a
    new process's sites: nothing decided in memory)."""
    path.write_text(SCRIPT, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_seventeenth", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


# --- Triton test_specialize: scalars as Triton specializes them ----------------------------


def test_a_numpy_float64_scale_is_launched_as_triton_takes_it(tmp_path: Path) -> None:
    """Triton's test_specialize lists ``numpy.float64(1.0)`` among the inputs it specializes
    as ``fp32``: ``numpy.float64`` is a Python ``float``. An attention kernel's softmax scale
    is often one (``1.0 / np.sqrt(d)``). The site launches it, keyed by its type (a Python
    float is another key of the same kernel, the safe side), and a new process reads the
    decision from disk. A numpy scalar Triton cannot launch (``numpy.float32``, which is no
    Python float) is still a ``UsageError`` naming the parameter and ``float(scale)``."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_specialize.py::test_specialize_impl
    x, out = torch.randn(200), torch.zeros(200)
    scale = 1.0 / np.sqrt(16)
    assert type(scale) is np.float64
    site = load(tmp_path / "ported_seventeenth.py")
    res = site["softmax_scaled"](out, x, scale)
    assert res.source == "tuned" and res.key["args"]["scale"] == "float64"
    assert torch.equal(out, x * 0.25)
    out.zero_()
    again = site["softmax_scaled"](out, x, 1.0 / np.sqrt(4))
    assert again.source == "memory" and torch.equal(out, x * 0.5)
    out.zero_()
    fresh = load(tmp_path / "ported_seventeenth.py")["softmax_scaled"](out, x, scale)
    assert fresh.source == "disk" and fresh.config == res.config and torch.equal(out, x * 0.25)
    python_float = site["softmax_scaled"](out, x, 0.25)
    assert python_float.key["args"]["scale"] == "f" and torch.equal(out, x * 0.25)
    with pytest.raises(
        UsageError, match=r"`scale` of scaled_copy is a numpy\.float32.*float\(scale\)"
    ):
        site["softmax_scaled"](out, x, np.float32(0.25))


#: Triton's native inputs to specialize (test_specialize.py's ``native_inputs_to_specialize``)
#: grouped by the kernel Triton compiles for each: its type and specialization key
#: (``reference_specialize_impl``: ``u1`` for both bools, the constant 1, ``D`` for a
#: multiple of 16; ``-2 * 31 - 1`` is -63, as written there).
TRITON_CLASSES = [
    [1.0],
    [None],
    [False, True],
    [1],
    [0, 16],
    [-1, 17, 2**31 - 1, -2 * 31 - 1],
    [2**31],
    [2**63 - 1],
    [2**63],
    [2**63 + 1, 2**64 - 1],
]


def flagged(out: torch.Tensor, x: torch.Tensor, flag: Any) -> Any:
    from ported_kernels_seventeenth import add_flag

    n = x.numel()
    return autotune_launch(
        add_flag,
        space={"BLOCK": [32, 64]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(out, x, n, flag),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        name="triton-native-specializations",
    )


def test_each_of_tritons_native_specializations_is_its_own_decision() -> None:
    """Every scalar test_specialize feeds Triton's specializer, passed to one runtime
    parameter: the values Triton compiles one kernel for share one decision (the second
    of a class comes from memory) and the ten kernels get ten, never one for two kernels
    (a 64-bit unsigned int is no signed one, a bool is no int 1); each launch adds the flag
    right. A new process reads each decision from disk."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_specialize.py::test_specialize_impl
    x, out = torch.randn(100), torch.zeros(100)
    keys: list[set[Any]] = []
    for values in TRITON_CLASSES:
        digests = set()
        for i, flag in enumerate(values):
            res = flagged(out, x, flag)
            assert res.source == ("tuned" if i == 0 else "memory"), (flag, res.source)
            assert torch.equal(out, x + 1 if flag else x), flag
            digests.add(res.digest)
        keys.append(digests)
    assert all(len(d) == 1 for d in keys) and len(set.union(*keys)) == len(TRITON_CLASSES)
    new_api_process()
    for values, digests in zip(TRITON_CLASSES, keys, strict=True):
        res = flagged(out, x, values[-1])
        assert res.source == "disk" and {res.digest} == digests, values
        assert torch.equal(out, x + 1 if values[-1] else x)


# --- Helion test_autotune_clone_alignment: mixed-dtype aliases -----------------------------


@pytest.mark.parametrize("isolate", [False, True])
def test_a_float_tensor_and_a_byte_view_of_it_alias_in_every_launch(isolate: bool) -> None:
    """Helion's private clones keep which arguments share memory, also for a view of
    another dtype (``base.view(torch.uint8)``, its "mixed" case). A kernel that reads a
    float32 tensor's bytes through a uint8 view and writes the float32 tensor itself: every
    launch of the tuning, in this process or in a worker (``isolate=True``, on its copies),
    starts from the caller's bytes (the in-place watch restores both names), and the
    caller's tensor ends as one launch leaves it."""
    # ported from: pytorch/helion test/test_autotune_clone_alignment.py::test_storage_aliases_flags_and_partial_selection
    from ported_kernels_seventeenth import byte_sums

    n = 96
    x = torch.randn(n)
    raw = x.view(torch.uint8)
    expected = raw.view(n, 4).to(torch.int32).sum(1).float()
    forget()  # the notice is given once a process
    with pytest.warns(UserWarning, match=r"changes 'out', 'raw' in place"):
        res = autotune_launch(
            byte_sums,
            space={"BLOCK": [16, 32, 64]},
            grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
            args=(x, raw, n),
            kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
            isolate=isolate,
            name=f"mixed-dtype-alias-{isolate}",
        )
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert torch.equal(x, expected)


# --- Helion: mutated arguments restored, also when a launch is interrupted -----------------


@pytest.mark.parametrize("restore", [False, True])
@pytest.mark.parametrize("stop_at", [2, 5, 7, 10])
def test_ctrl_c_inside_a_launch_leaves_the_callers_tensor_as_it_was(
    restore: bool, stop_at: int
) -> None:
    """Helion restores the arguments a kernel mutates after benchmarking. A Ctrl-C that
    arrives inside a launch of the tuning (here at the ``stop_at``-th program, after the
    earlier programs of that launch added 1 to their blocks: the first configuration's first
    launch, its later ones, the second configuration's) reaches the caller, and the caller's
    tensor holds what it held before the call: nothing half written, nothing of the launches
    before. The key is not decided, so the next call tunes it and leaves one launch's
    result."""
    # ported from: pytorch/helion test/test_autotuner.py::test_only_mutated_tensors_cloned_during_benchmark
    import ported_kernels_seventeenth as kernels

    n = 64
    x = torch.arange(n, dtype=torch.float32)

    def call() -> Any:
        return autotune_launch(
            kernels.bump_ticking,
            space={"BLOCK": [16, 32]},  # 4 and 2 programs a launch
            grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
            args=(x, n),
            kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
            restore_value=["x"] if restore else None,
            name=f"interrupted-launch-{restore}-{stop_at}",
        )

    kernels.TICKS.update(count=0, stop_at=stop_at)
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        kernels.TICKS["stop_at"] = None
    assert kernels.TICKS["count"] == stop_at
    assert torch.equal(x, torch.arange(n, dtype=torch.float32))
    with warnings.catch_warnings():  # the in-place notice, once per process, is not the point
        warnings.simplefilter("ignore")
        res = call()
    assert res.source == "tuned"
    assert torch.equal(x, torch.arange(n, dtype=torch.float32) + 1)


# --- Inductor test_max_autotune: zero-size inputs ------------------------------------------


@pytest.mark.parametrize("isolate", [False, True])
def test_rows_of_zero_elements_are_summed_tuned_and_verified(isolate: bool) -> None:
    """Inductor autotunes a matmul of a zero-size input without crashing. Here the empty
    dimension is the reduced one (``K = 0``), so the grid has work (one program per row)
    and every row's sum is 0: the site tunes it, checks each configuration against the
    reference ``x.sum(1)`` (an empty tensor's snapshot, restore and comparison, in process
    and in a worker) and writes zeros over the output's old values. Its record keys the
    empty shape apart from a non-empty one."""
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_max_autotune_regular_mm_zero_size_input
    from ported_kernels_seventeenth import row_sums

    def run(x: torch.Tensor, out: torch.Tensor) -> Any:
        m, k = x.shape
        return autotune_launch(
            row_sums,
            space={"BLOCK_K": [16, 32]},
            grid=(m,),
            args=(out, x, k, max(k, 1)),
            kwargs=lambda cfg: {"BLOCK_K": cfg.BLOCK_K},
            verify=lambda args: {"out": args["x"].sum(1)},
            isolate=isolate,
            name=f"zero-size-rows-{isolate}",
        )

    empty, out = torch.randn(5, 0), torch.full((5,), 7.0)
    res = run(empty, out)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert torch.equal(out, torch.zeros(5))
    x = torch.randn(5, 40)
    full = run(x, out)
    assert full.source == "tuned" and full.digest != res.digest
    torch.testing.assert_close(out, x.sum(1))


# --- Inductor test_coordinate_descent_tuner: a persistent reduction ------------------------


def test_an_in_place_normalisation_is_right_on_the_tuning_call_and_after() -> None:
    """Inductor's coordinate-descent test of ``x / x.sum(dim=-1, keepdim=True)`` (a
    persistent reduction, tuned over ``XBLOCK``) checks the compiled result, noting that
    the first call, a cache miss, must be right too. Written in place (``x /= x.sum``),
    the tuning launches it many times: the call that tunes leaves one normalisation (each
    row sums to 1, not a row divided again by its own sum of 1 after a first launch), equal
    to PyTorch's, and so does a call decided from memory."""
    # ported from: pytorch/pytorch test/inductor/test_coordinate_descent_tuner.py::test_persistent_reduction
    from ported_kernels_seventeenth import normalize_rows

    def normalize(x: torch.Tensor) -> Any:
        m, n = x.shape
        return autotune_launch(
            normalize_rows,
            space={"XBLOCK": [1, 2, 4, 8]},
            grid=lambda cfg: (cdiv(m, cfg.XBLOCK),),
            args=(x, m, n),
            kwargs=lambda cfg: {"XBLOCK": cfg.XBLOCK},
            restore_value=["x"],
            name="persistent-reduction",
        )

    for source in ("tuned", "memory"):
        x = torch.rand(6, 256) + 0.5
        expected = x / x.sum(dim=-1, keepdim=True)
        res = normalize(x)
        assert res.source == source
        torch.testing.assert_close(x, expected, atol=1e-4, rtol=1e-4)


# --- Helion: a candidate compiled in a worker is the kernel the caller launches -------------

SENDER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import triton
import triton.language as tl
from tunedsl.backends import compat, isolated_transfer
from tunedsl.backends.triton_compile import compile_variant


@triton.constexpr_function
def twice(v):
    return v * 2


@triton.jit{options}
def doubled(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * {factor}, mask=offs < n)


x, y = torch.randn(64), torch.empty(64)
built = compile_variant(doubled, (x, y, 64), {{"BLOCK": 64}}, {{"num_warps": 4}}, target="cuda:90")
with open(__file__, "w") as f:  # the script edited while it runs, before it tunes
    f.write("# edited since the kernel was made\\n")
with open({sent!r}, "wb") as f:
    f.write(isolated_transfer.dumps(doubled))
print("REPORT", json.dumps({{"hash": built.hash, "options": compat.jit_declared_options(doubled)}}))
"""

WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import cloudpickle
import torch
from tunedsl.backends import compat
from tunedsl.backends.triton_compile import compile_variant

with open({sent!r}, "rb") as f:
    kernel = cloudpickle.loads(f.read())  # what a worker does with the tuning it is sent
x, y = torch.randn(64), torch.empty(64)
built = compile_variant(kernel, (x, y, 64), {{"BLOCK": 64}}, {{"num_warps": 4}}, target="cuda:90")
print("REPORT", json.dumps({{"hash": built.hash, "options": compat.jit_declared_options(kernel)}}))
"""


@pytest.mark.parametrize(
    "options, factor",
    [("", "2"), ('(do_not_specialize_on_alignment=["x"])', "2"), ("", "twice(1)")],
    ids=["plain", "unaligned", "constexpr_function"],
)
def test_a_kernel_sent_by_value_compiles_in_the_worker_as_in_the_caller(
    tmp_path: Path, options: str, factor: str
) -> None:
    """Helion benchmarks candidates in a subprocess (its crash-recovery runner tunes for
    real there), on the kernel the caller runs. With
    ``isolate=True`` a kernel defined in a script run as ``__main__`` (``tunedsl run``), a
    notebook cell or a function body reaches the worker by value and is made a Triton kernel
    there again. On a GPU that reads its source: here a fresh process (the worker) loads
    what the caller sends, the caller's script edited after its kernel was made (a notebook
    cell is never on disk), and cross-compiles it for ``cuda:90`` into the binary the caller compiles, the
    same Triton hash, with the ``triton.jit`` options that change what Triton specializes
    (``do_not_specialize_on_alignment``: an aligned pointer is not marked so) and the
    ``@triton.constexpr_function`` it calls (which holds a lock: it is made again there)."""
    # ported from: pytorch/helion test/test_autotuner_subprocess.py::TestBashCrashRecoveryScript::test_real_autotune_through_bash
    # ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_specialize
    sent = str(tmp_path / "kernel.pickle")
    caller = run_report(
        tmp_path, "caller.py", SENDER.format(options=options, factor=factor, sent=sent)
    )
    worker = run_report(tmp_path, "worker.py", WORKER.format(sent=sent))
    assert worker == caller
    assert bool(caller["options"]) == bool(options)


def test_a_kernel_and_its_constexpr_function_in_a_script_are_tuned_isolated(
    tmp_path: Path,
) -> None:
    """The same under the interpreter, end to end: a kernel and the
    ``@triton.constexpr_function`` it calls, both defined in a kernel script (a module no
    worker can import: sent by value), tuned with ``isolate=True``: every configuration
    measured in the worker, the caller's output right. The constexpr function could not
    be sent ("cannot pickle '_thread.RLock' object", named as if the user's hooks or
    arguments were to blame)."""
    # ported from: pytorch/helion test/test_autotuner_subprocess.py::TestBashCrashRecoveryScript::test_real_autotune_through_bash
    n = 100
    x, y = torch.randn(n), torch.zeros(n)
    res = load(tmp_path / "ported_seventeenth.py")["triple_isolated"](x, y)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    torch.testing.assert_close(y, x * 3)


def _hangs(args: Any) -> Any:
    """A reference that never answers (module level: sent to the worker by reference)."""
    import time

    time.sleep(3600)


def test_a_reference_that_hangs_in_the_worker_is_named_with_the_limit_as_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Helion's custom baseline function, one that hangs instead of raising
    (test_autotune_baseline_fn_raises_on_failure raises). With ``isolate=True`` the
    ``verify=fn`` reference is computed in the worker as it sets up: the setup's time
    limit is ``TUNEDSL_CONFIG_TIMEOUT`` plus the worker's start, and the error says which
    part of it is the setting (the limit as set) and what ran there. It said "no answer
    after 62 s (TUNEDSL_CONFIG_TIMEOUT; a hang?)" with the variable set to 2. The
    caller's tensors are untouched and its process lives on."""
    # ported from: pytorch/helion test/test_autotuner.py::test_autotune_baseline_fn_raises_on_failure
    from ported_kernels_seventeenth import scaled_copy

    from tunedsl.backends import isolated

    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "2")
    monkeypatch.setattr(isolated, "SETUP_ALLOWANCE_S", 10.0, raising=False)
    isolated.shutdown_workers()
    n = 64
    x, out = torch.randn(n), torch.zeros(n)
    try:
        with pytest.raises(TuningError) as caught:
            autotune_launch(
                scaled_copy,
                space={"BLOCK": [16, 32]},
                grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
                args=(out, x, n, 2.0),
                kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
                verify=_hangs,
                isolate=True,
                name="isolated-hanging-reference",
            )
    finally:
        isolated.shutdown_workers()
    text = str(caught.value)
    assert "could not set up: timeout: no answer after 12 s setting up" in text, text
    assert "TUNEDSL_CONFIG_TIMEOUT=2 s, plus 10 s to start the worker" in text, text
    assert "verify=fn" in text and not out.any(), text
