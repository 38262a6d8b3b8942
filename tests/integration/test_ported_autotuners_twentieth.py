"""A twentieth batch of other autotuners' test suites, ported to tunedsl: Triton's ``key=``
naming an argument the kernel does not have (python/test/unit/runtime/test_autotuner.py:
``Autotuner.run`` keys on the names it finds among the arguments and leaves the others out),
as Unsloth's and Liger-Kernel's row kernels are keyed on ``n_cols``; AMD's Triton
configurations with ``waves_per_eu`` and ``matrix_instr_nonkdim`` (Triton's tutorial 03,
``get_hip_autotune_config``), cross-compiled here for ``hip:gfx942`` and for ``cuda:90`` by
``tunedsl precompile --target``; Kernel Tuner's shared memory sized per configuration
(test/test_runners.py::test_smem_args); Unsloth's grouped-GEMM prunes, which rewrite the
configurations they are given in place.

Found and fixed: ``key=["n_rows", "N_COLS"]`` for a kernel taking ``n_cols`` (Triton keys on
``n_rows`` and leaves ``N_COLS`` out) was taken as a value, the same on every call, so every
shape shared the first call's decision without a word; only a list naming nothing but
parameters was refused. A list or tuple of strings naming any parameter is now a
``UsageError`` naming the name the kernel lacks and the values to pass
(test_a_key_of_names_one_of_them_absent_is_named_not_shared). AMD's options passed in the
launch and compiled for NVIDIA failed each configuration with Triton's bare ``KeyError``
("Keyword argument waves_per_eu was specified but unrecognised"); each now names the option
as AMD's backend's and the fix, and given as a launch hint they are refused saying the same
(test_amds_options_in_the_launch_compile_for_amd_and_are_named_for_cuda,
test_an_amd_option_as_a_static_hint_is_named_with_where_it_goes;
tests/gpu/test_amd_options_gpu.py on a CUDA GPU); so too NVIDIA's ``maxnreg`` compiled for
AMD (test_nvidias_register_cap_compiled_for_amd_is_named_with_occupancy), and a record holding
``waves_per_eu`` replayed for ``cuda:90``
(test_a_record_with_an_amd_option_replayed_for_cuda_names_it). A prune setting a
field by item (``config["BLOCK"] = 16``, Triton's ``config.kwargs[...] = v`` ported) failed
with Python's bare item-assignment ``TypeError``; it now says the configuration is frozen
and to return ``cfg.replace(BLOCK=...)``
(test_a_prune_that_rewrites_a_configuration_in_place_is_named_with_the_copy_to_return).

Looked at and found sound (and kept so by a test): strings naming no parameter (``("fp16",
"rows")``) keyed as a value; AMD's options passed on by the interpreter, which ignores them,
each value measured; each value of ``waves_per_eu`` and ``matrix_instr_nonkdim``, and of
``occupancy=``, its own binary for ``hip:gfx942``; a scratch buffer ``args=`` allocates per
configuration, checked by ``verify=["out"]`` and read back from disk (``verify=True``
rejects the others by the scratch's shape, as documented).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter through ``autotune_launch``, and real cross-compiles in a
subprocess.

Not ported, for want of a counterpart or because an earlier batch has it: Helion's
``autotune_max_generations`` (tunedsl's budget is in seconds) and its ``Config.from_dict``
with unknown keys (a ``default=`` with a field the space lacks is a ``UsageError``, and a
stored choice with one is tuned again: test_ported_autotuners_more.py); Triton's
``do_bench=``, ``warmup=``/``rep=``, ``cache_results=`` and per-``Config`` ``pre_hook``
(named with tunedsl's counterpart: test_ported_autotuners.py and _tenth.py), its fractional
``top_k`` after an early prune (test_ported_autotuners_nineteenth.py) and its IR overrides
(GPU binaries); vLLM's and SGLang's tuned tables by batch size (nearest entry compared with
``tunedsl rules`` in docs/shapes.md; test_ported_autotuners_fourteenth.py); a kernel that
hangs (``isolate=True``: test_ported_autotuners_twelfth.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_api_process

from tunedsl import autotune_launch, cdiv
from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _scale(x: torch.Tensor, out: torch.Tensor, key: Any, name: str) -> Any:
    from ported_kernels_twentieth import scale_rows

    rows, cols = x.shape
    return autotune_launch(scale_rows, space={"BLOCK": [16, 64]}, grid=(rows,),
                           args=(x, out, rows, cols, 2.0),
                           kwargs=lambda c: {"BLOCK": c.BLOCK}, key=key, name=name)  # fmt: skip


@pytest.mark.parametrize("key", [["n_rows", "N_COLS"], ("n_cols", "dtype")])
def test_a_key_of_names_one_of_them_absent_is_named_not_shared(key: Any) -> None:
    """Triton keys on the names of ``key=`` it finds among the kernel's arguments and
    leaves out a name it does not find (``N_COLS`` for ``n_cols``, or a ``"dtype"`` no
    argument is called), so ``key=["n_rows", "N_COLS"]`` still tunes per ``n_rows``.
    tunedsl's ``key=`` is a value: such a list is the same on every call, and so every
    shape shared the first call's decision, without a word, unless every name was a
    parameter. A list or tuple of strings naming any parameter is now named with the fix,
    the names the kernel lacks said to be left out by Triton."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py (Autotuner.run's key)
    # ported from: unslothai/unsloth unsloth/kernels (row kernels keyed on n_cols)
    x, out = torch.randn(4, 40), torch.zeros(4, 40)
    with pytest.raises(UsageError) as info:
        _scale(x, out, key, f"absent-{key[1]}")
    said = str(info.value)
    present = [k for k in key if k in ("n_rows", "n_cols")]
    absent = [k for k in key if k not in present]
    assert f"key={key!r} names parameters" in said, said
    assert f"`{absent[0]}` is not a parameter" in said and "triton.autotune leaves" in said, said
    assert said.endswith(f"key={present[0]}"), said
    assert not out.any()  # nothing launched


def test_a_key_of_strings_naming_no_parameter_is_a_value() -> None:
    """A tuple of strings none of which is a parameter is a value like any other (labels
    such as ``("fp16", "rowmajor")``): each distinct value is its own decision. Triton,
    finding none of such names, keys on the dtypes alone; so does this constant key."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py (Autotuner.run's key)
    x, out = torch.randn(4, 40), torch.zeros(4, 40)
    first = _scale(x, out, ("fp32", "rows"), "labels")
    assert first.source == "tuned" and torch.equal(out, x * 2.0)
    other = _scale(x, out, ("fp32", "cols"), "labels")
    assert other.source == "tuned" and other.key != first.key
    out.zero_()
    again = _scale(torch.randn(8, 100), torch.zeros(8, 100), ("fp32", "rows"), "labels")
    assert again.source == "memory" and again.key == first.key


AMD_SCRIPT = """
import torch
from tunedsl import autotune_launch, cdiv, workload
from tunedsl.precompile.workload import precompile_device
from ported_kernels_twentieth import add, matmul, scale_rows


def vadd(x, y, out):
    n = x.numel()
    return autotune_launch(add, space={"BLOCK": [64, 128], "waves_per_eu": [1, 2]},
                           grid=lambda c: (cdiv(n, c.BLOCK),), args=(x, y, out, n),
                           kwargs=lambda c: {"BLOCK": c.BLOCK, "waves_per_eu": c.waves_per_eu},
                           name="waves")


def mm(a, b, c):
    (m, k), n = a.shape, b.shape[1]
    return autotune_launch(matmul, space={"BM": [32], "BN": [32], "BK": [16],
                                          "matrix_instr_nonkdim": [16, 32]},
                           grid=lambda cfg: (cdiv(m, cfg.BM), cdiv(n, cfg.BN)),
                           args=(a, b, c, m, n, k),
                           kwargs=lambda cfg: {**cfg.as_dict()}, name="nonkdim")


def scale(x, out):
    rows, cols = x.shape
    return autotune_launch(scale_rows, space={"BLOCK": [64, 128], "occupancy": [1, 2]},
                           grid=(rows,), args=(x, out, rows, cols, 2.0),
                           kwargs=lambda c: {"BLOCK": c.BLOCK}, name="occupancy")


@workload
def warm():
    dev = precompile_device()
    x = torch.empty(4096, device=dev)
    vadd(x, x, x)
    a = torch.empty(64, 64, device=dev, dtype=torch.float16)
    mm(a, a, torch.empty(64, 64, device=dev))
    scale(torch.empty(8, 256, device=dev), torch.empty(8, 256, device=dev))
"""


def _precompile(
    tmp_path: Path, script: Path, target: str, *more: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / f"triton-{target}"), TRITON_DEFAULT_FP_FUSION="1",
               TUNEDSL_COMPILE_WORKERS="2", PYTHONPATH=str(HERE),
               PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))  # fmt: skip
    argv = ["precompile", "--json", "--target", target, *more, str(script)]
    return subprocess.run([sys.executable, "-m", "tunedsl", *argv], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)  # fmt: skip


def _sites(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The summary's sites by the ``name=`` of their ``autotune_launch`` call in the script."""
    lines: dict[str, int] = {}
    call = 0
    for number, line in enumerate(AMD_SCRIPT.splitlines(), start=1):
        call = number if "return autotune_launch(" in line else call
        for name in ("waves", "nonkdim", "occupancy"):
            if f'name="{name}"' in line:
                lines[name] = call
    sites = json.loads(done.stdout)["sites"]
    return {
        name: next(s for s in sites if f":{line}:" in s["site"]) for name, line in lines.items()
    }


def test_amds_options_in_the_launch_compile_for_amd_and_are_named_for_cuda(tmp_path: Path) -> None:
    """AMD's Triton configurations carry ``waves_per_eu`` and ``matrix_instr_nonkdim``
    among their keyword arguments, options of Triton's AMD backend that its launch takes
    besides the kernel's parameters. Ported as space fields passed in ``kwargs=``, each
    value compiles a binary of its own for ``hip:gfx942`` (``occupancy=``, tunedsl's form,
    becomes ``waves_per_eu`` there). Triton's CUDA launch rejects such a keyword; for
    ``cuda:90`` every such configuration failed with Triton's bare ``KeyError`` ("Keyword
    argument waves_per_eu was specified but unrecognised"), naming neither the backend the
    option belongs to nor the fix. Each failure now says the option is AMD's and what to
    do instead; ``occupancy=`` compiles for both."""
    # ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
    script = tmp_path / "amd_configs.py"
    script.write_text(AMD_SCRIPT)
    hip = _precompile(tmp_path, script, "hip:gfx942")
    assert hip.returncode == 0, hip.stdout + hip.stderr
    sites = _sites(hip)
    assert sites["waves"]["compiled"] == 4 and not sites["waves"]["failed"], sites["waves"]
    assert sites["nonkdim"]["compiled"] == 2 and not sites["nonkdim"]["failed"]
    assert sites["occupancy"]["compiled"] == 4 and not sites["occupancy"]["failed"]
    cuda = _precompile(tmp_path, script, "cuda:90")
    assert cuda.returncode == 1, cuda.stdout + cuda.stderr
    sites = _sites(cuda)
    for name, option in (("waves", "waves_per_eu"), ("nonkdim", "matrix_instr_nonkdim")):
        failed = sites[name]["failed"]
        assert len(failed) == (4 if name == "waves" else 2), failed
        for why in failed.values():
            assert f"`{option}=` is an option of Triton's AMD (hip) backend" in why, why
            assert "cuda:90" in why and "kwargs=" in why, why
    assert "occupancy=" in next(iter(sites["waves"]["failed"].values()))
    assert sites["occupancy"]["compiled"] >= 1 and not sites["occupancy"]["failed"]


@pytest.mark.parametrize("option", ["waves_per_eu", "matrix_instr_nonkdim"])
def test_an_amd_option_as_a_static_hint_is_named_with_where_it_goes(option: str) -> None:
    """``waves_per_eu=2`` given to ``autotune_launch`` as a launch hint (as AMD's
    ``triton.Config(..., waves_per_eu=2)`` might be ported) was refused as an "unknown
    launch hint", listing tunedsl's hints without a word of the option's owner or of
    ``occupancy=``; the refusal now says it is AMD's and where it goes."""
    # ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
    from ported_kernels_twentieth import add

    x, out = torch.randn(100), torch.zeros(100)
    with pytest.raises(UsageError) as info:
        autotune_launch(add, space={"BLOCK": [32, 64]}, grid=lambda c: (cdiv(100, c.BLOCK),),
                        args=(x, x, out, 100), kwargs=lambda c: {"BLOCK": c.BLOCK},
                        name=f"static-{option}", **{option: 2})  # fmt: skip
    said = str(info.value)
    assert f"`{option}=` is an option of Triton's AMD (hip) backend" in said, said
    assert "kwargs=" in said, said
    if option == "waves_per_eu":
        assert "occupancy=" in said, said
    assert not out.any()


def test_an_amd_option_in_the_launch_is_passed_on_under_the_interpreter() -> None:
    """Under ``TRITON_INTERPRET=1`` no backend compiles: Triton's interpreter takes the
    launch's backend options and ignores them, so a space with a ``waves_per_eu`` field is
    tuned like any other (each value measured, every result right, the choice read back
    from memory). Which backend rejects it is known only where a target is: on a CUDA GPU,
    or cross-compiling for ``cuda:90``, the test above."""
    # ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
    from ported_kernels_twentieth import add

    x, y, out = torch.randn(300), torch.randn(300), torch.zeros(300)

    def call() -> Any:
        return autotune_launch(add, space={"BLOCK": [64, 128], "waves_per_eu": [0, 2]},
                               grid=lambda c: (cdiv(300, c.BLOCK),), args=(x, y, out, 300),
                               kwargs=lambda c: {"BLOCK": c.BLOCK,
                                                 "waves_per_eu": c.waves_per_eu},
                               name="interpreted-waves")  # fmt: skip

    first = call()
    assert first.source == "tuned" and torch.equal(out, x + y)
    assert {r.status for r in first.timings.values()} == {"ok"} and len(first.timings) == 4
    out.zero_()
    again = call()
    assert again.source == "memory" and again.config == first.config and torch.equal(out, x + y)


def _staged(x: torch.Tensor, out: torch.Tensor, verify: Any, name: str) -> Any:
    from ported_kernels_twentieth import staged_double

    n = x.numel()
    return autotune_launch(staged_double, space={"BLOCK": [16, 64, 256]},
                           grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=lambda c: (x, out, torch.empty(cdiv(n, c.BLOCK) * c.BLOCK), n),
                           kwargs=lambda c: {"BLOCK": c.BLOCK}, verify=verify, name=name)  # fmt: skip


def test_a_scratch_buffer_sized_per_configuration_is_verified_by_the_output_named() -> None:
    """Kernel Tuner sizes a kernel's shared memory per configuration (``smem_args=
    dict(size=lambda p: p["block_size_x"] * 4)``); Triton has no dynamic shared memory, so
    the port stages through a global scratch buffer that ``args=`` allocates per
    configuration. ``verify=["out"]`` checks each configuration's output (all pass, the
    choice read back from disk, the output right after each call). ``verify=True``
    compares every tensor argument with the first configuration's (docs/runtime.md), the
    scratch of another size among them: the others are rejected with that shape named, as
    documented, and the first is chosen and right."""
    # ported from: KernelTuner/kernel_tuner test/test_runners.py::test_smem_args
    x, out = torch.randn(1000), torch.zeros(1000)
    named = _staged(x, out, ["out"], "staged-out")
    assert named.source == "tuned" and torch.equal(out, x * 2)
    assert {r.status for r in named.timings.values()} == {"ok"}
    new_api_process()
    out.zero_()
    again = _staged(x, out, ["out"], "staged-out")
    assert again.source == "disk" and again.config == named.config and torch.equal(out, x * 2)
    out.zero_()
    every = _staged(x, out, True, "staged-all")
    assert every.config.BLOCK == 16 and torch.equal(out, x * 2)
    for cfg, r in every.timings.items():
        if cfg.BLOCK != 16:
            assert r.status == "rejected" and "output 'scratch'" in (r.reason or ""), r.reason
            assert "shape" in (r.reason or ""), r.reason


def _switch_off_staging_in_place(configs: list[Any], args: dict[str, Any]) -> list[Any]:
    """Unsloth's prune, ported as written: ``config.kwargs["USE_TMA_LOAD_X"] = False`` for
    a call that permutes its rows, with tunedsl's ``c["FIELD"]`` for ``c.kwargs``."""
    for config in configs:
        if args["n_rows"] > 2:
            config["BLOCK"] = 16
    return configs


def _switch_off_staging_by_copy(configs: list[Any], args: dict[str, Any]) -> list[Any]:
    return [c.replace(BLOCK=16) if args["n_rows"] > 2 else c for c in configs]


def test_a_prune_that_rewrites_a_configuration_in_place_is_named_with_the_copy_to_return() -> None:
    """Unsloth's grouped-GEMM prunes (``prune_kernel_configs_fwd``) rewrite the
    configurations they are given in place (``config.kwargs["USE_TMA_LOAD_X"] = False``)
    and return them. tunedsl's configurations are frozen; written as ``config["BLOCK"] =
    16`` the prune failed with Python's bare "'Config' object does not support item
    assignment", where ``config.BLOCK = 16`` names ``cfg.replace``. Both now say the
    configuration is frozen and that the prune returns a changed copy; the copy, returned,
    is launched (the only one left: not timed)."""
    # ported from: unslothai/unsloth unsloth/kernels/moe/grouped_gemm/kernels/autotuning.py (prune_kernel_configs_fwd)
    from ported_kernels_twentieth import scale_rows

    x, out = torch.randn(4, 40), torch.zeros(4, 40)

    def call(prune: Any, name: str) -> Any:
        return autotune_launch(scale_rows, space={"BLOCK": [32, 64]}, grid=(4,),
                               args=(x, out, 4, 40, 2.0), kwargs=lambda c: {"BLOCK": c.BLOCK},
                               prune=prune, name=name)  # fmt: skip

    with pytest.raises(TypeError) as info:
        call(_switch_off_staging_in_place, "in-place")
    said = str(info.value)
    assert "frozen" in said and "cfg.replace(BLOCK=" in said and "prune=" in said, said
    assert not out.any()
    copied = call(_switch_off_staging_by_copy, "by-copy")
    assert copied.config.BLOCK == 16 and torch.equal(out, x * 2.0)
    assert all(c.BLOCK == 16 for c in copied.timings)  # one left: launched, not timed


NVIDIA_SCRIPT = """
import torch
from tunedsl import autotune_launch, cdiv, workload
from tunedsl.precompile.workload import precompile_device
from ported_kernels_twentieth import add


def capped(x, y, out):
    n = x.numel()
    return autotune_launch(add, space={"BLOCK": [64, 128], "maxnreg": [64, 128]},
                           grid=lambda c: (cdiv(n, c.BLOCK),), args=(x, y, out, n),
                           kwargs=lambda c: {"BLOCK": c.BLOCK}, name="capped")


@workload
def warm():
    x = torch.empty(4096, device=precompile_device())
    capped(x, x, x)
"""


def test_nvidias_register_cap_compiled_for_amd_is_named_with_occupancy(tmp_path: Path) -> None:
    """The mirror of AMD's options: ``maxnreg``, a launch hint of tunedsl's and a field of
    ``triton.Config``, is an option of Triton's NVIDIA backend only. A space tuning it,
    compiled for ``hip:gfx942``, failed every configuration with Triton's bare ``KeyError``
    ("Keyword argument maxnreg was specified but unrecognised"); each failure now names
    the option as NVIDIA's and ``occupancy=``, the hint for both. Compiled for ``cuda:90``
    each cap is its own binary."""
    # ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
    script = tmp_path / "capped.py"
    script.write_text(NVIDIA_SCRIPT)
    cuda = _precompile(tmp_path, script, "cuda:90")
    assert cuda.returncode == 0, cuda.stdout + cuda.stderr
    (site,) = json.loads(cuda.stdout)["sites"]
    assert site["compiled"] == 4 and not site["failed"], site
    hip = _precompile(tmp_path, script, "hip:gfx942")
    assert hip.returncode == 1, hip.stdout + hip.stderr
    (site,) = json.loads(hip.stdout)["sites"]
    assert len(site["failed"]) == 4, site
    for why in site["failed"].values():
        assert "`maxnreg=` is an option of Triton's NVIDIA (cuda) backend only" in why, why
        assert "occupancy=" in why and "hip:gfx942" in why, why


TUNED_SCRIPT = """
import torch
from tunedsl import autotune_launch, cdiv
from ported_kernels_twentieth import add

x, out = torch.randn(4096), torch.zeros(4096)
autotune_launch(add, space={"BLOCK": [64, 128], "waves_per_eu": [1, 2]},
                grid=lambda c: (cdiv(4096, c.BLOCK),), args=(x, x, out, 4096),
                kwargs=lambda c: {"BLOCK": c.BLOCK, "waves_per_eu": c.waves_per_eu},
                name="replayed-waves")
"""


def test_a_record_with_an_amd_option_replayed_for_cuda_names_it(tmp_path: Path) -> None:
    """A record tuned under the interpreter holds ``waves_per_eu`` among each
    configuration's launch options (the interpreter passes it on). ``tunedsl precompile
    --replay --target cuda:90`` compiled each with it, and each failed with Triton's bare
    ``KeyError``, as a compile from the arguments did; it is named as AMD's option now on
    this path too."""
    # ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
    script = tmp_path / "tuned_waves.py"
    script.write_text(TUNED_SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(HERE)}
    tuned = subprocess.run([sys.executable, "-m", "tunedsl", "run", str(script)],
                           capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=300)  # fmt: skip
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    replay = _precompile(tmp_path, script, "cuda:90", "--replay")
    assert replay.returncode == 1, replay.stdout + replay.stderr
    failed = {k: v for s in json.loads(replay.stdout)["sites"] for k, v in s["failed"].items()}
    assert len(failed) == 4, replay.stdout
    for why in failed.values():
        assert "`waves_per_eu=` is an option of Triton's AMD (hip) backend" in why, why
        assert "cuda:90" in why, why
