"""Triton's cache directory is checked before Triton's driver starts. Starting the driver
builds its C utilities (``cuda_utils``) into Triton's cache directory and loads them from
there, and each kernel's first launch does the same with its launcher: a directory another
user can write would have them loaded as this user. Without a GPU the driver cannot start,
so each way tunedsl reaches the driver is run for real with the real driver's entry
points recorded (the driver fails there with "0 active drivers": the record shows whether
tunedsl reached it before checking). tests/gpu/test_runtime_gpu.py runs the first call on
a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]

# Each way in to the driver, in a process of its own state, the driver's `active` and
# `default` (the properties every use of it goes through) and tunedsl's trust check of a
# directory recorded as they are called. Prints, for each way, what was called in order
# and the error it ended with.
ORDER = r"""
import json, os
import torch, triton, triton.language as tl
from triton.runtime.driver import DriverConfig
from tunedsl.store import paths

events = []
for name in ("active", "default"):
    prop = getattr(DriverConfig, name)
    def get(self, _fget=prop.fget):
        events.append("driver")
        return _fget(self)
    setattr(DriverConfig, name, property(get))
checked = paths.untrusted_place
def untrusted_place(place, *args, **kwargs):
    if str(place) == os.environ["TRITON_CACHE_DIR"]:
        events.append("check")
    return checked(place, *args, **kwargs)
paths.untrusted_place = untrusted_place

import tunedsl
from tunedsl.backends import compat

@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

def load_a_compiled_kernel():
    # Cross-compiled into a Triton cache of this user's own (as a stored binary is kept in
    # tunedsl's cache), then loaded: the load is the first use of the driver.
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    theirs = os.environ["TRITON_CACHE_DIR"]
    os.environ["TRITON_CACHE_DIR"] = os.environ["OWN_TRITON_CACHE"]
    try:
        sig = {"a": "*fp32", "b": "*fp32", "c": "*fp32", "n": "i32", "TILE": "constexpr"}
        src = ASTSource(vadd, sig, {(4,): 64})
        compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32))
    finally:
        os.environ["TRITON_CACHE_DIR"] = theirs
    del events[:]
    compat.load_module(compiled)

a, b, c = torch.ones(64), torch.ones(64), torch.empty(64)
ways = {
    "loading a compiled kernel": load_a_compiled_kernel,
    "the target": compat.current_target,
    "the device and stream": compat.device_and_stream,
    "the shared memory": lambda: compat.max_shared_memory(None),
    "a JIT launch": lambda: compat.jit_run(vadd, (1,), (a, b, c, 64), {"TILE": 64}),
    "a JIT compile": lambda: compat.jit_warmup(vadd, (a, b, c, 64), {"TILE": 64}, {}),
    "a site's first call": lambda: tunedsl.autotune_launch(
        vadd, space={"tile": [32, 64]}, grid=lambda cfg: (2,), args=(a, b, c, 64),
        kwargs=lambda cfg: {"TILE": cfg.tile}, name="driver-order"),
}
out = {}
for name, way in ways.items():
    del events[:]
    try:
        way()
        error = None
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
    out[name] = {"events": list(events), "error": error}
print(json.dumps(out))
"""


def _ways(triton_cache: Path, tmp_path: Path, interpret: bool = False) -> dict:
    tmp_path.mkdir()
    cache = tmp_path / "cache"
    env = dict(os.environ, TRITON_CACHE_DIR=str(triton_cache), TUNEDSL_CACHE_DIR=str(cache))
    env["OWN_TRITON_CACHE"] = str(tmp_path / "own-triton-cache")
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env["TUNEDSL_NO_AUTO_INTERPRET"] = "1"
    script = tmp_path / "driver_order.py"  # Triton reads a kernel's source from its file
    script.write_text(ORDER)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=REPO,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_triton_cache_is_checked_before_tritons_driver_starts(tmp_path: Path) -> None:
    # Each way reached the driver first (on a GPU: its C utilities built in and loaded from
    # the other user's directory, before any check); the first call's compile was checked
    # only after. Now each checks first and stops with the UsageError naming the directory.
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        theirs = base / "triton-cache"
        swap_attack.attacker_step(
            "import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777)", str(theirs)
        )
        ways = _ways(theirs, tmp_path / "one")
        for name, seen in ways.items():
            assert seen["events"][:1] == ["check"], (name, seen)
            assert "driver" not in seen["events"], (name, seen)
            assert seen["error"].startswith("UsageError"), (name, seen)
            assert (
                f"Triton's cache directory {theirs}: {theirs} is owned by another user"
                in (seen["error"])
            ), (name, seen)
        # Under Triton's interpreter nothing goes to that directory: the first call runs.
        interpreted = _ways(theirs, tmp_path / "two", interpret=True)
        assert interpreted["a site's first call"]["error"] is None, interpreted
        assert interpreted["a JIT launch"]["error"] is None, interpreted
        assert os.listdir(theirs) == []


def test_a_triton_cache_of_ones_own_lets_the_driver_start_as_before(tmp_path: Path) -> None:
    # The check passes and the driver is reached (here, with no GPU, its own error).
    own = tmp_path / "triton-cache"
    own.mkdir(mode=0o700)
    for name, seen in _ways(own, tmp_path / "one").items():
        assert "driver" in seen["events"], (name, seen)
        assert seen["error"] is None or "UsageError" not in seen["error"], (name, seen)
