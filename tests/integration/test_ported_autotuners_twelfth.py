"""A twelfth batch of other autotuners' test suites, ported to tunedsl: PyTorch Inductor's
max-autotune tests of a choice that fails when it is benchmarked (not when it is built), of
every choice failing, of its benchmark process crashing or hanging and being replaced
(test/inductor/test_max_autotune.py), and of its remote autotune cache shared by fresh
processes (one shape, then another); Triton's autotuner hooks under ``isolate=True``
(python/test/unit/runtime/test_autotuner.py::test_hooks); Helion's benchmark results
kept aligned with their configurations when some fail to build, and its finite search over
a configuration that fails (test/test_autotuner.py).

Found and fixed: a configuration whose launch wrote an input and then raised (under the
interpreter, its first program wrote and a later one failed) left what it wrote in the
caller's tensor for the rest of the tuning: every later launch, of every configuration, ran
on it (timed on data the caller never had; a kernel reading indices from it could read out of
bounds), and it was put back only after tuning. The in-place watch, which keeps the caller's
values of every tensor argument for the tuning, now puts back what a raising launch changed
before the next launch (test_what_a_failed_launch_wrote_is_put_back_before_the_next_launch).
With ``isolate=True`` and no ``verify=``, the worker never ran ``post_hook`` for a
configuration that compiled (docs/runtime.md: once after each configuration is prepared,
and again with the error of a later launch that fails, in the worker); it now runs it as
the tuning process does
(test_post_hook_runs_once_per_configuration_and_again_when_a_later_launch_fails). The
isolated worker had no in-place watch: each of its launches started from the one before, so
a kernel advancing an index in place (``idx += 1``, gathering through it) ran past its bounds
and every configuration was recorded as failed, where in process all were measured; the
worker now watches its copies as the tuning process watches the caller's
(test_an_index_a_kernel_advances_in_place_is_restored_between_launches).

Found and not fixed: two programs that share one store and call one site with different
spaces (one adds a configuration the other lacks) tune in turn at every start: each record
keeps only its writer's space, so the other program measures again what it lacks and
writes its own record over it (each start measures only the configurations the record
lacks, and never launches one outside its space: a cost, not a wrong launch; give each
space its own ``key=`` or ``name=``).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through ``autotune_launch``, real subprocesses and a
real redis-server.

Not ported, for want of a counterpart or because another test file has it: Inductor's
test_select_algorithm.py GEMM and convolution templates and its counters (Inductor's own
lowering: a site is one opaque operator), its duplicated and overlapping arguments
(``mm(a, a)``, two views of one tensor: Helion's aliasing test in
test_ported_autotuners_fourth.py), a preprocessing step that keeps one choice (a ``prune=``
keeping one: test_ported_autotuners_ninth.py); test_max_autotune.py's precompilation in
threads (test_ported_autotuners_fourth.py), a filled cache that compiles nothing (under the
interpreter nothing compiles to count), its device guard and GPU-only templates, and its
remote cache under ``torch.compile(dynamic=True)`` (a site inside ``torch.compile``
decides per key at run time: test_ported_autotuners_seventh.py); Triton's test_autotuner.py
resource limits and IR overrides (GPU only), fractional ``top_k`` (``prune=`` is one user
function), ``cache_results`` and its key of environment variables and knobs (a decision is
always stored; a knob set from Python is written to the environment, which the key reads:
test_ported_autotuners_more.py); vLLM's and SGLang's nearest batch size and missing device
file (test_ported_autotuners_more.py, tests/reliability/test_record_sources.py); Helion's
out-of-memory and final re-benchmark settings (GPU only; tunedsl races its leaders).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_process, record_files

from tunedsl import Config, autotune_launch, cdiv
from tunedsl.errors import TuningError
from tunedsl.runtime import api

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).resolve().parent


def wearing(dst: torch.Tensor, src: torch.Tensor, wear: torch.Tensor, space: Any, name: str) -> Any:
    from ported_kernels_twelfth import wearing_copy

    n = dst.numel()
    return autotune_launch(wearing_copy, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(dst, src, wear, n),
                           kwargs=lambda c: {"SLOT": c.SLOT, "LIMIT": c.LIMIT, "BLOCK": c.BLOCK},
                           name=name)  # fmt: skip


def launches(wear: torch.Tensor) -> list[int]:
    """The launches each slot of ``wear`` counts (1e-4 a launch)."""
    return [round(w) for w in (wear * 1e4).tolist()]


# --- Inductor: a choice that raises when benchmarked ---------------------------------------


@pytest.mark.parametrize("limit", [1, 2])
def test_a_configuration_that_raises_when_benchmarked_is_dropped(limit: int) -> None:
    """A configuration that builds and runs its first launch, then raises at a later one
    (after ``limit`` launches: among the timed repetitions), is the fastest of three: it is recorded
    as failed with the kernel's own reason, one of the others is launched, and the call
    leaves the caller's data as one launch of that configuration would. A new process
    reads the record and launches the same choice without trying the failed one again."""
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_benchmark_choice_fail_in_subproc
    fragile = Config(SLOT=0, LIMIT=limit, BLOCK=512)
    space = [fragile, Config(SLOT=1, LIMIT=1000, BLOCK=32), Config(SLOT=2, LIMIT=1000, BLOCK=64)]
    src, dst, wear = torch.randn(2000), torch.zeros(2000), torch.zeros(3)
    res = wearing(dst, src, wear, space, f"bench-fail-{limit}")
    assert res.source == "tuned" and res.config != fragile
    assert res.timings[fragile].status == "failed"
    assert "Assume failed" in (res.timings[fragile].reason or "")
    assert all(res.timings[c].status == "ok" for c in space[1:])
    assert torch.equal(dst, src)
    expected = [0, 0, 0]
    expected[res.config.SLOT] = 1
    assert launches(wear) == expected, "tuning's launches were left in the caller's tensor"
    (path,) = record_files()
    stored = {r["config"]["SLOT"]: r for r in json.loads(path.read_text())["results"]}
    assert stored[0]["status"] == "failed" and "Assume failed" in stored[0]["reason"]

    new_process(*api._sites.values())
    dst, wear = torch.zeros(2000), torch.zeros(3)
    again = wearing(dst, src, wear, space, f"bench-fail-{limit}")
    assert again.source == "disk" and again.config == res.config
    assert torch.equal(dst, src) and launches(wear) == expected


def test_every_configuration_raising_when_benchmarked_leaves_the_callers_data() -> None:
    """Every configuration runs its first launch, writing the output, then raises at its
    second: the tuning fails naming each configuration and its reason (Inductor's
    ``NoValidChoicesError`` when every choice times as infinite), the output and the launch
    counts are the caller's again, nothing is stored, and the next call tries again."""
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_inf_timing
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_no_valid_choices
    space = [Config(SLOT=0, LIMIT=1, BLOCK=64), Config(SLOT=1, LIMIT=1, BLOCK=128)]
    src = torch.randn(300)
    for _ in range(2):
        dst, wear = torch.zeros(300), torch.zeros(2)
        with pytest.raises(TuningError) as info:
            wearing(dst, src, wear, space, "all-fail-when-benchmarked")
        message = str(info.value)
        assert "every configuration of wearing_copy failed" in message
        assert message.count("Assume failed") == 2
        assert not dst.any() and launches(wear) == [0, 0]
    assert not record_files()


@pytest.mark.parametrize("order", ["failing-first", "failing-between"])
def test_what_a_failed_launch_wrote_is_put_back_before_the_next_launch(order: str) -> None:
    """A configuration whose launch writes an input and then raises (its first program
    wrote, its second failed): every later launch of the tuning, of whichever
    configuration, starts from the caller's input, not from what the failed launch left
    (a kernel whose work or addresses depend on that input would be timed on data the
    caller never had, or read out of bounds); the failed one is recorded with its reason,
    and the call's result and the input are the caller's."""
    # ported from: pytorch/helion test/test_autotuner.py::test_finite_search_skips_bad_configs
    from ported_kernels_twelfth import copy_or_trash

    good, bad, other = (Config(TRASH=False, BLOCK=128), Config(TRASH=True, BLOCK=128),
                        Config(TRASH=False, BLOCK=256))  # fmt: skip
    space = [bad, good, other] if order == "failing-first" else [good, bad, other]
    n = 1000
    original = torch.randn(n)
    src, dst = original.clone(), torch.zeros(n)
    seen: list[tuple[int, bool]] = []

    def note(args: dict[str, Any]) -> None:
        if not args["TRASH"]:
            seen.append((args["BLOCK"], torch.equal(args["src"], original)))

    res = autotune_launch(copy_or_trash, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                          args=(dst, src, n),
                          kwargs=lambda c: {"TRASH": c.TRASH, "BLOCK": c.BLOCK},
                          pre_hook=note, name=f"trash-{order}")  # fmt: skip
    assert res.timings[bad].status == "failed"
    assert "Assume failed" in (res.timings[bad].reason or "")
    assert res.config in (good, other)
    assert torch.equal(src, original) and torch.equal(dst, original)
    trashed = [block for block, clean in seen if not clean]
    assert seen and not trashed, f"{len(trashed)} of {len(seen)} launches ran on a trashed input"


@pytest.mark.parametrize("how", ["crash", "hang"])
def test_an_isolated_configuration_that_crashes_when_benchmarked_leaves_a_working_worker(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``isolate=True``, the fastest configuration kills its worker (an abort) or hangs
    past the timeout at its second launch, a timed repetition, not its first: it is
    recorded as crashed or timed out, a new worker measures the others, one of them is
    launched, and the caller's tensors hold one launch's result."""
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_tuning_pool_crash
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_tuning_pool_timeout
    from ported_kernels_twelfth import copy_failing_late

    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "1.5")
    slot = 10 if how == "crash" else 20  # counted per process: slots of their own
    late = Config(SLOT=slot, AT=2, HOW=1 if how == "crash" else 2, BLOCK=512)
    space = [late, Config(SLOT=slot + 1, AT=0, HOW=0, BLOCK=64),
             Config(SLOT=slot + 2, AT=0, HOW=0, BLOCK=128)]  # fmt: skip
    n = 2000
    src, dst = torch.randn(n), torch.zeros(n)
    res = autotune_launch(copy_failing_late, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                          args=(dst, src, n), kwargs=lambda c: dict(c.items()), isolate=True,
                          name=f"late-{how}")  # fmt: skip
    assert res.source == "tuned" and res.config in space[1:]
    assert res.timings[late].status == "failed"
    expected = "SIGABRT" if how == "crash" else "no answer after 1.5 s"
    assert expected in (res.timings[late].reason or ""), res.timings[late].reason
    assert all(res.timings[c].status == "ok" for c in space[1:])
    assert torch.equal(dst, src)


@pytest.mark.parametrize("isolate", [False, True])
def test_post_hook_runs_once_per_configuration_and_again_when_a_later_launch_fails(
    isolate: bool, tmp_path: Path
) -> None:
    """``post_hook(args, exception=...)`` runs once after each configuration is prepared,
    with ``exception=None``, and again with the error when a later launch of it fails, the
    same in this process and in an isolated worker (where it runs on the worker's copies;
    here it writes each call to a file). The configuration that failed is dropped."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_hooks
    from ported_kernels_twelfth import copy_failing_late

    calls = tmp_path / "post_hook_calls.txt"

    def post(args: dict[str, Any], exception: BaseException | None = None) -> None:
        said = "ok" if exception is None else "failed" if "launch 2 of" in str(exception) else ""
        with open(calls, "a") as out:
            out.write(f"{args['SLOT'] - slot} {said or repr(exception)}\n")

    slot = 30 if isolate else 40  # counted per process: slots of their own
    late = Config(SLOT=slot, AT=2, HOW=3, BLOCK=512)
    space = [late, Config(SLOT=slot + 1, AT=0, HOW=0, BLOCK=64),
             Config(SLOT=slot + 2, AT=0, HOW=0, BLOCK=128)]  # fmt: skip
    n = 2000
    src, dst = torch.randn(n), torch.zeros(n)
    res = autotune_launch(copy_failing_late, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                          args=(dst, src, n), kwargs=lambda c: dict(c.items()),
                          post_hook=post, isolate=isolate, name=f"post-{isolate}")  # fmt: skip
    assert res.timings[late].status == "failed" and torch.equal(dst, src)
    lines = calls.read_text().splitlines() if calls.exists() else []
    assert sorted(lines) == ["0 failed", "0 ok", "1 ok", "2 ok"], lines


@pytest.mark.parametrize("isolate", [False, True])
def test_an_index_a_kernel_advances_in_place_is_restored_between_launches(isolate: bool) -> None:
    """A kernel that gathers through an index tensor and advances it in place (``idx += 1``),
    with a bounds check, tuned without ``restore_value=``, in this process and in an
    isolated worker: the index is found in place and restored before each launch, so no
    configuration runs past the bounds, every one is measured, and the call gathers once
    from the caller's index and advances it once."""
    # ported from: pytorch/helion test/test_autotuner.py::test_only_mutated_tensors_cloned_during_benchmark
    from ported_kernels_twelfth import gather_and_advance

    n = 1000
    src, out = torch.randn(n + 10), torch.zeros(n)
    idx = torch.arange(n, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the in-place notice (the worker's is said here too)
        res = autotune_launch(gather_and_advance, space={"SLACK": [4], "BLOCK": [64, 128, 256]},
                              grid=lambda c: (cdiv(n, c.BLOCK),), args=(out, src, idx, n),
                              kwargs=lambda c: dict(c.items()), isolate=isolate,
                              name=f"advance-{isolate}")  # fmt: skip
    assert {c.BLOCK: r.status for c, r in res.timings.items()} == {64: "ok", 128: "ok", 256: "ok"}
    assert torch.equal(out, src[:n])
    assert torch.equal(idx, torch.arange(n, dtype=torch.int32) + 1)


# --- Helion: benchmark results stay with their configurations ------------------------------


@pytest.mark.parametrize("workers", [("1", "off"), ("4", "on")])
def test_timings_stay_with_their_configurations_when_some_fail_to_build(
    workers: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configurations whose work grows with ``REPEAT`` (1, 4 and 16 copies), with two that
    fail to build between them, compiled by one thread or by four worker processes: each
    timing belongs to its own configuration (the more copies, the slower), the failed ones carry their reason and no timing, and
    the one-copy configuration wins."""
    # ported from: pytorch/helion test/test_autotuner.py::test_benchmark_results_aligned_when_compile_fails
    from ported_kernels_twelfth import repeat_copy

    monkeypatch.setenv("TUNEDSL_COMPILE_WORKERS", workers[0])
    monkeypatch.setenv("TUNEDSL_COMPILE_PROCESSES", workers[1])
    space = [Config(REPEAT=r, WIDTH=w, BLOCK=256) for r, w in
             [(16, 4), (4, 3), (4, 4), (1, 5), (1, 4)]]  # fmt: skip
    n = 1024
    src, dst = torch.randn(n), torch.zeros(n)
    res = autotune_launch(repeat_copy, space=space, grid=lambda c: (cdiv(n, c.BLOCK),),
                          args=(dst, src, n), kwargs=lambda c: dict(c.items()),
                          name=f"aligned-{workers[0]}")  # fmt: skip
    assert torch.equal(dst, src) and res.config == Config(REPEAT=1, WIDTH=4, BLOCK=256)
    for bad in (space[1], space[3]):
        assert res.timings[bad].status == "failed" and res.timings[bad].median_ms is None
        assert "power of 2" in (res.timings[bad].reason or "")
    one, four, sixteen = (res.timings[space[i]].median_ms or 0.0 for i in (4, 2, 0))
    assert 0 < one < four < sixteen and 3 * one < sixteen, (one, four, sixteen)


# --- Inductor: a remote autotune cache shared by fresh processes ---------------------------

CHILD = """
import json, sys
import torch
from tunedsl import autotune_launch, cdiv
from ported_kernels_twelfth import repeat_copy

n = int(sys.argv[1])
src, dst = torch.arange(n, dtype=torch.float32), torch.zeros(n)
res = autotune_launch(repeat_copy, space={"REPEAT": [1], "WIDTH": [4], "BLOCK": [32, 64, 128]},
                      grid=lambda c: (cdiv(n, c.BLOCK),), args=(dst, src, n),
                      kwargs=lambda c: dict(c.items()), key=n, name="remote")
assert torch.equal(dst, src)
print(json.dumps({"source": res.source, "block": res.config.BLOCK}))
"""


def test_a_shared_store_tunes_each_shape_once_across_fresh_processes(
    tmp_path: Path, server: Any
) -> None:
    """Fresh processes, each with an empty cache of its own, share one Redis store: the first
    tunes a shape and writes its record there; the next reads it and launches the same
    choice, tuning nothing and writing nothing to Redis; a new shape (Inductor's dynamic
    variant) is tuned once and written once."""
    # ported from: pytorch/pytorch test/inductor/test_max_autotune.py::test_max_autotune_remote_caching
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    client = server.client()

    def writes() -> int:
        return sum(
            v["calls"]
            for k, v in client.info("commandstats").items()
            if k in ("cmdstat_set", "cmdstat_hset", "cmdstat_setex", "cmdstat_mset")
        )

    def run(n: int, i: int) -> dict[str, Any]:
        env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / f"cache{i}"),
               "TUNEDSL_REDIS_URL": server.url, "TUNEDSL_QUIET": "1",
               "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        done = subprocess.run([sys.executable, str(script), str(n)], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    first = run(300, 0)
    written = writes()
    assert first["source"] == "tuned" and written >= 1
    second = run(300, 1)
    assert second == {"source": "disk", "block": first["block"]}
    assert writes() == written, "a process that read the record wrote to Redis again"
    other = run(5000, 2)
    assert other["source"] == "tuned" and writes() > written
