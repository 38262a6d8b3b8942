"""On a GPU: an untested Triton version tunes, compiles and launches through Triton's
public JIT path (no direct launcher, no stored binaries, no async compile split)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys, warnings
import triton
real = triton.__version__
triton.__version__ = sys.argv[1]  # simulate another installed Triton
import torch
from shared_kernels import vadd
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import compat, triton_binaries, triton_launch as tl

n = 1 << 20
a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
c = torch.zeros_like(a)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        autotune_launch(
            vadd, space={"tile": [256, 1024], "num_warps": [2, 4]},
            grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.tile}, name="gate-gpu",
        )
torch.cuda.synchronize()
print(json.dumps({
    "correct": bool(torch.equal(c, a + b)),
    "direct": tl.direct_launch_enabled(),
    "stored": triton_binaries.stats["stored"],
    "warnings": sum(w.category is compat.UntestedTritonWarning for w in caught),
}))
"""


@pytest.mark.parametrize("version", ["3.10.0", "3.6.0"])
def test_an_untested_triton_runs_through_the_public_jit(tmp_path, version) -> None:
    script = tmp_path / "gate_gpu.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, str(script), version], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["correct"]
    if version == "3.10.0":
        assert result == {"correct": True, "direct": False, "stored": 0, "warnings": 1}
    else:
        assert result["direct"] and result["warnings"] == 0


PREBUILD = r"""
import json, sys
import torch
import triton
from shared_kernels import vadd
from tunedsl.backends import process_compile, triton_compile
from tunedsl.backends import compile_pool

n = 4096
a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
c = torch.empty_like(a)
args, kwargs, options = (a, b, c, n), {"TILE": 256}, {"num_warps": 4}
process_compile.prebuild_launcher(vadd, args, kwargs, options)
for t in [t for t in compile_pool._live if t.name == "tunedsl-launcher-build"]:
    t.join(120)
root = triton.knobs.cache.dir
before = sorted(p.name for p in __import__("pathlib").Path(root).rglob("__triton_launcher*"))
triton_compile.compile_variant(vadd, args, kwargs, options)  # compiles and loads the module
vadd[(n // 256,)](a, b, c, n, TILE=256, num_warps=4)
torch.cuda.synchronize()
after = sorted(p.name for p in __import__("pathlib").Path(root).rglob("__triton_launcher*"))
print(json.dumps({"version": triton.__version__, "before": before, "after": after,
                  "correct": bool(torch.equal(c, a + b))}))
"""


def test_the_launcher_built_ahead_is_the_one_the_first_load_uses(tmp_path) -> None:
    """Triton 3.6 builds a C launcher per kernel signature on the first load; built ahead
    (``process_compile.prebuild_launcher``), the load finds it in Triton's cache and builds
    no other. On a Triton with a generic launcher there is none, before or after."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"),
               TUNEDSL_CACHE_DIR=str(tmp_path / "tunedsl-cache"),
               PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]))  # fmt: skip
    out = subprocess.run([sys.executable, "-c", PREBUILD], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["correct"]
    assert report["after"] == report["before"]  # the load built no launcher of its own
    if report["version"].startswith("3.6"):  # a per-signature launcher: built ahead
        assert len(report["before"]) == 1, report


TARGET_SCRIPT = r"""
import json
import torch
import triton
from triton.runtime import driver
from tunedsl.backends import compat

torch.zeros(1, device="cuda")  # PyTorch's CUDA is up, Triton's driver is not
early = compat.target_before_driver()
hash_early = compat.backend_hash()
started_early = driver._default is not None
late = compat.current_target()
print("REPORT " + json.dumps({
    "early": repr(early), "late": repr(late), "started_early": started_early,
    "started_late": driver._default is not None, "hash_early": hash_early,
    "hash_late": compat.backend_hash(),
}))
"""


def test_the_target_known_before_tritons_driver_starts_is_the_drivers(tmp_path) -> None:
    """The record key's backend hash is taken before Triton's driver starts (its start
    then overlaps hashing Triton); the target PyTorch gives must be the one the driver
    gives, or records and compiles would be keyed for another GPU."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"))
    script = tmp_path / "target.py"
    script.write_text(TARGET_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    lines = [line for line in out.stdout.splitlines() if line.startswith("REPORT ")]
    assert out.returncode == 0 and lines, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads(lines[-1][len("REPORT ") :])
    assert report["started_early"] is False and report["started_late"] is True
    assert report["early"] == report["late"]
    assert report["hash_early"] == report["hash_late"]


WARMING_SCRIPT = r"""
import json, pathlib, threading
import torch
import triton
from triton.runtime import driver
from tunedsl.backends import compat

torch.zeros(1, device="cuda")  # PyTorch's CUDA is up, Triton's driver is not
compat.start_warming()  # the hash and the C utilities on threads
threads = sorted(t.name for t in threading.enumerate() if t.name.startswith("tunedsl-"))
for t in threading.enumerate():
    if t.name.startswith("tunedsl-"):
        t.join(300)
started_by_warming = driver._default is not None
built = sorted(p.name for p in pathlib.Path(triton.knobs.cache.dir).rglob("cuda_utils*"))
compat.warm_compile_caches(None)  # starts the driver: its utilities are built already
x = torch.arange(8, device="cuda")
print("REPORT " + json.dumps({
    "threads": threads, "started_by_warming": started_by_warming, "built": built,
    "after": sorted(p.name for p in pathlib.Path(triton.knobs.cache.dir).rglob("cuda_utils*")),
    "started": driver._default is not None or driver._active is not None,
    "device": driver.active.get_current_device(),
}))
"""


def test_tritons_c_utilities_are_built_on_a_thread_without_starting_its_driver(tmp_path) -> None:
    """``compat.start_warming`` (begun by the compile warm-up) builds Triton's CUDA C
    utilities on a thread without starting Triton's driver; the driver's start then finds
    them built."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"))
    script = tmp_path / "warming.py"
    script.write_text(WARMING_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    lines = [line for line in out.stdout.splitlines() if line.startswith("REPORT ")]
    assert out.returncode == 0 and lines, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads(lines[-1][len("REPORT ") :])
    assert report["threads"] == ["tunedsl-cuda-utils", "tunedsl-triton-key"]
    assert report["started_by_warming"] is False
    assert report["built"] and report["after"] == report["built"]  # built once, early
    assert report["started"] and report["device"] == 0


EDITED_LIB = """\
import triton.language as tl

WIDTH = tl.constexpr({width})
ACC = tl.{acc}
"""

EDITED_SCRIPT = r"""
import json
import torch
import triton
import triton.language as tl

import edited_lib as lib
from edited_lib import ACC
from tunedsl import autotune_launch, cdiv


@triton.jit
def widen(x, y, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(y + offs, (tl.load(x + offs, mask=m) * lib.WIDTH).to(ACC).to(tl.float32), mask=m)


x = torch.full((4096,), 1.0001, device="cuda")
y = torch.empty_like(x)
got = autotune_launch(widen, space={"TILE": [128, 256], "num_warps": [2, 4]},
                      grid=lambda c: (cdiv(4096, c.TILE),), args=(x, y, 4096),
                      kwargs=lambda c: {"TILE": c.TILE}, name="edited-lib")
torch.cuda.synchronize()
print("REPORT " + json.dumps({"value": float(y[0]), "source": got.source}))
"""


def test_a_kernel_whose_library_was_edited_runs_the_new_values(tmp_path) -> None:
    """A kernel reads ``lib.WIDTH`` through a module and ``ACC``, a ``tl.dtype`` global;
    Triton's cache key covers neither. After an edit of the library the next process tuned
    again (tunedsl's identity covers them) but was served the old binary from Triton's
    cache: the old factor and rounding. Each process here shares one Triton cache."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"),
               TUNEDSL_CACHE_DIR=str(tmp_path / "tunedsl-cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    (tmp_path / "edited.py").write_text(EDITED_SCRIPT)

    def run(width: int, acc: str) -> dict:
        (tmp_path / "edited_lib.py").write_text(EDITED_LIB.format(width=width, acc=acc))
        out = subprocess.run([sys.executable, str(tmp_path / "edited.py")], env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        lines = [line for line in out.stdout.splitlines() if line.startswith("REPORT ")]
        assert out.returncode == 0 and lines, out.stdout[-2000:] + out.stderr[-2000:]
        return json.loads(lines[-1][len("REPORT ") :])

    import torch

    def expect(width: int, dtype: str) -> float:
        value = torch.tensor(1.0001, dtype=torch.float32) * width
        return float(value.to(getattr(torch, dtype)).float())

    assert run(3, "float16") == {"value": expect(3, "float16"), "source": "tuned"}
    assert run(5, "float16") == {"value": expect(5, "float16"), "source": "tuned"}
    assert run(5, "float32") == {"value": expect(5, "float32"), "source": "tuned"}
    assert run(5, "float32")["source"] == "disk"  # the same values: the record decides
