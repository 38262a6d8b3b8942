"""The Triton boundary against the installed Triton: the version gate in a real process,
and one reading of Triton's interpreter setting (``tests/unit/test_compat.py`` has the
pure side)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunedsl import knobs

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_triton_is_a_tested_version() -> None:
    import triton

    from tunedsl.backends import compat

    assert compat.version_tested(triton.__version__), (
        f"Triton {triton.__version__} is installed: check compat.py's functions and widen "
        "TESTED_TRITON"
    )


GATE_SCRIPT = r"""
import json, sys, warnings
import triton
triton.__version__ = sys.argv[1]  # simulate another installed Triton
sys.path.insert(0, sys.argv[2])
from test_runtime_direct_launch import FakeJit, FakeTensor
from tunedsl.backends import compat, triton_launch as tl

class Runtime:  # Triton's knobs.runtime without hooks (no GPU driver here)
    class launch_enter_hook:
        calls = []
    launch_exit_hook = launch_enter_hook

compat.device_and_stream = lambda: (lambda: 0, lambda device: 1000)
compat.runtime_knobs = lambda: Runtime
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = FakeJit()
    args = (FakeTensor(0), 64)
    launcher = tl.Launcher(kernel, {}, args, {})
    launcher((4,), args, {}, {"TILE": 16}, ())
    launcher((4,), args, {}, {"TILE": 16}, ())
    out = {
        "jit only": launcher.disabled,
        "direct": tl.direct_launch_enabled(),
        "stored": tl.stored_binaries_enabled(),
        "paths": [entry[0] for entry in kernel.log],
        "warnings": [str(w.message) for w in caught if w.category is compat.UntestedTritonWarning],
    }
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", ["3.6.0", "3.9.0", "3.10.0", "3.5.0"])
def test_outside_the_tested_range_launches_go_through_the_jit(tmp_path, version) -> None:
    # A fresh process per version (the gate is a process constant); the kernel is the
    # direct-launch tests' stand-in JITFunction (a real one needs a GPU: tests/gpu).
    script = tmp_path / "gate.py"
    script.write_text(GATE_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="0")
    env.pop("TUNEDSL_SAFE", None)  # the direct launch and stored binaries on
    out = subprocess.run(
        [sys.executable, str(script), version, str(REPO / "tests" / "integration")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if version in ("3.6.0", "3.9.0"):
        assert not result["jit only"] and result["direct"] and result["stored"]
        assert result["paths"] == ["jit", "direct"]  # the second call skips the JIT
        assert result["warnings"] == []
    else:
        assert result["jit only"]
        assert not result["direct"] and not result["stored"]
        assert result["paths"] == ["jit", "jit"]
        assert len(result["warnings"]) == 1 and version in result["warnings"][0]


# -- interpreting -------------------------------------------------------------------------

# What Triton's getenv_bool answers (libtriton: 1, y, yes, on, true in any case; anything
# else set is false; unset is the default).
VALUES = ["1", "true", "TRUE", "True", "on", "ON", "yes", "y", "Y"]
VALUES += ["0", "false", "off", "no", "n", "", " 1", "1 ", "2", "t", "enabled"]


@pytest.mark.parametrize("value", VALUES)
def test_one_reading_agrees_with_tritons_knob(monkeypatch, value) -> None:
    from triton import knobs as tknobs

    from tunedsl.backends import compat
    from tunedsl.backends import triton as bt
    from tunedsl.backends import triton_compile as tc

    monkeypatch.setenv("TRITON_INTERPRET", value)
    expected = bool(tknobs.runtime.interpret)
    assert expected is (value.lower() in {"1", "y", "yes", "on", "true"})
    assert knobs.triton_interpret_env() is expected
    assert compat.interpreting() is expected
    assert bt.interpreting is compat.interpreting is tc.interpreting  # one function


TRUE_SCRIPT = r"""
import json
import torch
from shared_kernels import vadd
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import triton as bt, triton_launch as tl

n = 300
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.zeros(n)
result = autotune_launch(
    vadd, space={"tile": [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="interp-true",
)
print(json.dumps({
    "correct": bool(torch.equal(c, a + 1)),
    "backend": result.record.versions["triton_backend"],
    "device": bt.device_facts()["type"],
    "locked": tl.Launcher(vadd, {}).lock is tl.INTERPRETER_LOCK and tl.Launcher(vadd, {}).disabled,
    "interpreting": bt.interpreting(),
}))
"""


@pytest.mark.parametrize("value", ["true", "on", "1"])
def test_triton_interpret_true_is_the_interpreter_everywhere(tmp_path, value) -> None:
    script = tmp_path / "interp.py"
    script.write_text(TRUE_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET=value, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "correct": True,
        "backend": "interpreter",  # not "unavailable: ..."
        "device": "interpreter",
        "locked": True,
        "interpreting": True,
    }


def test_the_installed_launcher_is_called_below_its_python_frame() -> None:
    """The direct launch calls the C ``launch`` that Triton's ``CudaLauncher.__call__`` ends
    in, on the installed Triton (a tested version) and never on a launcher it does not know."""
    from triton.backends.nvidia.driver import CudaLauncher

    from tunedsl.backends import compat

    assert compat._launcher_form(CudaLauncher) in {"star", "tuple"}

    class Newer(CudaLauncher):  # a later Triton that computes something more per launch
        def __call__(self, gridX, gridY, gridZ, stream, function, *args):  # type: ignore[override]
            self.launch(gridX, gridY, gridZ, stream, function, self.something_new, *args)

    class Inherited(CudaLauncher):  # its __call__ is not its own: not read as known
        pass

    assert compat._launcher_form(Newer) is None
    assert compat._launcher_form(Inherited) is None


def test_a_kernel_with_scratch_memory_keeps_tritons_launcher() -> None:
    """Scratch memory is allocated per launch by ``__call__``: such a kernel is launched
    through it, and so is one whose launcher does not say how much it needs."""
    from types import SimpleNamespace

    from triton.backends.nvidia.driver import CudaLauncher

    from tunedsl.backends import compat

    def compiled(**sizes: int) -> SimpleNamespace:
        launcher = object.__new__(CudaLauncher)  # the real class, its fields set by hand
        launcher.__dict__.update(
            launch=print, launch_cooperative_grid=False, launch_pdl=False, gsan_enabled=False,
            arg_annotations=(), kernel_signature=b"", **sizes,
        )  # fmt: skip
        return SimpleNamespace(run=launcher, function=7, packed_metadata=(1,))

    plain = compat.direct_launch_parts(compiled(global_scratch_size=0, profile_scratch_size=0))
    assert plain is not None and plain.run is print and plain.middle[:2] == (7, False)
    for sizes in ({"global_scratch_size": 64, "profile_scratch_size": 0}, {}):
        parts = compat.direct_launch_parts(compiled(**sizes))
        assert parts is not None and isinstance(parts.run, CudaLauncher)
        assert parts.middle == (7, (1,), None, None, None) and not parts.packs_args


# Deterministic on any machine: Triton's hash, on whatever thread runs it, waits at its
# first line until the main thread joins the warming thread (seen by trace functions, not
# by timing). So the thread is alive when it is looked for, and a warm-up that hashed
# again instead of waiting would count a second miss (and never release the gate).
WARMING_SCRIPT = r"""
import json, os, sys, threading
import triton
from triton.backends.compiler import GPUTarget
from tunedsl.backends import compat

hashing = triton.runtime.cache.triton_key  # Triton's own, lru-cached
entered, gate = threading.Event(), threading.Event()
hashed_on = []


def is_hash(frame):
    code = frame.f_code
    return code.co_name == "triton_key" and code.co_filename.endswith(
        os.path.join("runtime", "cache.py"))


def in_thread(frame, event, arg):  # every thread started from here on
    if event == "call" and is_hash(frame):
        hashed_on.append(threading.current_thread().name)
        entered.set()
        if not gate.wait(120):
            hashed_on.append("gate never opened: nothing joined the warming thread")


def in_main(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "join" and frame.f_globals is vars(threading):
        if getattr(frame.f_locals.get("self"), "name", "") == "tunedsl-triton-key":
            gate.set()  # the compile waits for the thread: let the hash finish
    elif event == "call" and is_hash(frame):
        hashed_on.append("MainThread")


threading.settrace(in_thread)
compat.start_warming()  # returns at once, the hash runs on a thread
assert entered.wait(120), "no thread started Triton's hash"
threads = sorted(t.name for t in threading.enumerate() if t.name.startswith("tunedsl-"))
compat.start_warming()  # once per process
threading.settrace(None)
sys.settrace(in_main)
compat.warm_compile_caches(GPUTarget("cuda", 90, 32))  # waits for it, hashes nothing again
sys.settrace(None)
print(json.dumps({"threads": threads, "misses": hashing.cache_info().misses,
                  "hashed_on": hashed_on, "key": compat.triton_key() == hashing()}))
"""


def test_tritons_hash_runs_once_on_a_thread_and_the_warm_up_waits_for_it() -> None:
    # No GPU here: no driver to warm, only Triton's hash of itself (a GPU test checks the
    # driver's C utilities: tests/gpu/test_compat_gpu.py).
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # on a GPU machine too: the hash alone
    out = subprocess.run(
        [sys.executable, "-c", WARMING_SCRIPT], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["threads"] == ["tunedsl-triton-key"]
    assert report["hashed_on"] == ["tunedsl-triton-key"]  # once, on the warming thread
    assert report["misses"] == 1 and report["key"]
