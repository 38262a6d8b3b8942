"""A ``verify=`` that may give another check on another call of one key (a parameter, a
module global the script rebinds, ``autotune_launch(verify=...)``), in one process.

The key's first call gives no check (or another check), and tunes a configuration the
later call's reference rejects: ``BLOCK=16`` on rows of 100 columns, the fastest under the
interpreter as each program repeats its work ``BLOCK // 4`` times. A later call giving
``verify=ref`` hit the key's decision in memory and launched it unverified: wrong rows,
no warning. It is now checked as a record from disk is, and the key tuned again under the
check (one ``CacheWarning`` naming the record); a constant check reads nothing more on a hit.
Real kernels under Triton's interpreter, each script in its own process (``tunedsl run``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import runtime_helpers

import tunedsl
from tunedsl.frontend.compile import expand_source

pytestmark = pytest.mark.needs_triton

KERNEL = """\
import torch, triton, triton.language as tl
from tunedsl import autotune, autotune_launch


@triton.jit
def rowmax(x, out, N, sx, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x + r * sx + c, mask=c < N, other=-float("inf"))
    m = tl.max(v, axis=0)
    for _ in range(BLOCK // 4):  # bigger blocks are slower: the wrong BLOCK=16 wins
        m = tl.maximum(m, tl.max(v, axis=0))
    tl.store(out + r, m)


def ref(inputs):
    return {"out": inputs["x"].amax(1)}


def first16(inputs):  # a reference of the first 16 columns: passes BLOCK=16 alone
    return {"out": inputs["x"][:, :16].amax(1)}


CHECK = None
"""

RUNS = """
x = torch.randn(64, 100)
for check in [CHECKS]:
    CHECK = check
    out, r = run(x, check)
    ok = torch.equal(out, x.amax(1))
    print(check.__name__ if check else "none", r.config.BLOCK, r.source, "OK" if ok else "WRONG")
"""

# The three shapes of one site whose verify= is computed per call.
SITES = {
    "dsl-parameter": """
def run(x, check):
    out = torch.empty(x.shape[0])
    r = autotune(space=dict(BLOCK=[16, 128]), blocks=x.shape[0], verify=check,
                 rowmax(x, out, x.shape[1], x.stride(0), BLOCK=$BLOCK))
    return out, r
""",
    "dsl-module-global": """
def run(x, check):
    out = torch.empty(x.shape[0])
    r = autotune(space=dict(BLOCK=[16, 128]), blocks=x.shape[0], verify=CHECK,
                 rowmax(x, out, x.shape[1], x.stride(0), BLOCK=$BLOCK))
    return out, r
""",
    "plain-api": """
def run(x, check):
    out = torch.empty(x.shape[0])
    r = autotune_launch(rowmax, space={"BLOCK": [16, 128]}, grid=(x.shape[0],),
                        args=(x, out, x.shape[1], x.stride(0)),
                        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK}, verify=check)
    return out, r
""",
}


def run_script(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    """``runtime_helpers.run_script``, importing the tunedsl these tests import."""
    paths = [str(tmp_path), str(Path(runtime_helpers.__file__).parent)]
    paths.append(str(Path(tunedsl.__file__).resolve().parents[1]))
    return runtime_helpers.run_script(tmp_path, name, text, PYTHONPATH=os.pathsep.join(paths))


def _run(tmp_path: Path, site: str, checks: str) -> tuple[list[str], str]:
    script = KERNEL + SITES[site] + RUNS.replace("CHECKS", checks)
    done = run_script(tmp_path, "verify_switch.py", script)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[:-1], done.stderr


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_check_given_after_the_key_was_decided_without_one_checks_the_decision(
    tmp_path: Path, site: str
) -> None:
    """First call without verify= (tunes the wrong BLOCK=16), then verify=ref twice: the
    second call checks the decision, warns and tunes again under the check; the third hits."""
    lines, stderr = _run(tmp_path, site, "None, ref, ref")
    assert lines == ["none 16 tuned WRONG", "ref 128 tuned OK", "ref 128 memory OK"], stderr
    assert stderr.count("which fails verify= here") == 1, stderr


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_decision_verified_by_another_reference_is_checked_by_this_one(
    tmp_path: Path, site: str
) -> None:
    """Tuned under a reference that only BLOCK=16 passes, then called with ``ref``: the
    decision passed another check, not this one, so it is checked and tuned again; going
    back to the first reference, BLOCK=128 fails it and is tuned again too."""
    lines, stderr = _run(tmp_path, site, "first16, ref, ref, first16")
    assert lines == [
        "first16 16 tuned WRONG",
        "ref 128 tuned OK",
        "ref 128 memory OK",
        "first16 16 tuned WRONG",
    ], stderr


def test_a_decision_that_passes_the_new_check_is_kept(tmp_path: Path) -> None:
    """Decided without verify= where the fastest is right (rows of 16 columns), then called
    with ``ref``: the decision is checked, passes, and is kept (its record, no tuning)."""
    script = KERNEL + SITES["dsl-parameter"] + RUNS.replace("CHECKS", "None, ref, ref")
    script = script.replace("torch.randn(64, 100)", "torch.randn(64, 16)")
    done = run_script(tmp_path, "verify_passes.py", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == [
        "none 16 tuned OK",
        "ref 16 disk OK",
        "ref 16 memory OK",
    ]
    assert "fails verify=" not in done.stderr


@pytest.mark.parametrize(
    ("verify", "per_call"),
    [
        ("ref", False),  # a module function: one check for the process
        ("True", False),
        ('lambda inputs: {"out": inputs["x"].amax(1)}', False),  # one code: one check
        ("check", True),  # a parameter
        ("CHECK", True),  # a global the module binds twice
        ('lambda inputs, s=check: {"out": s(inputs)["out"]}', True),  # holds the call's value
        ('lambda inputs: {"out": inputs["x"].amax(1) * scale}', True),  # a parameter inside
    ],
)
def test_only_a_check_that_may_change_is_read_on_every_call(verify: str, per_call: bool) -> None:
    """The expansion tells the site to read ``verify=`` per call only where it may give
    another check; a site with a constant one keeps its repeat check and fused launch."""
    source = (
        KERNEL
        + "CHECK = ref\n"
        + (
            "def run(x, check, scale):\n"
            "    out = torch.empty(x.shape[0])\n"
            f"    autotune(space=dict(BLOCK=[16, 128]), blocks=x.shape[0], verify={verify},\n"
            "             rowmax(x, out, x.shape[1], x.stride(0), BLOCK=$BLOCK))\n"
        )
    )
    assert ("verify_per_call=True" in expand_source(source, "checks.py")) is per_call


def test_a_constant_check_takes_the_repeat_check_on_a_hit(tmp_path: Path) -> None:
    """``verify=ref`` of a module function: hits read nothing more (the site reads no option
    per call); an ``autotune_launch`` call place giving a lambda of one code on every call
    neither."""
    script = (
        KERNEL
        + """
from tunedsl.runtime import api

x = torch.randn(64, 100)
out = torch.empty(64)
for _ in range(3):
    autotune(space=dict(BLOCK=[16, 128]), blocks=64, verify=ref,
             rowmax(x, out, 100, x.stride(0), BLOCK=$BLOCK))
    autotune_launch(rowmax, space={"BLOCK": [16, 128]}, grid=(64,), args=(x, out, 100, 100),
                    kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
                    verify=lambda inputs: {"out": inputs["x"].amax(1)})
import gc
from tunedsl.runtime.site import Site
sites = [s for s in gc.get_objects() if isinstance(s, Site)]
print(sorted((s.kernel_text, s.verify_computed, s.reads_per_call) for s in sites))
"""
    )
    done = run_script(tmp_path, "constant.py", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('autotune_launch', False, False), ('rowmax', False, False)]"


PER_CALL_REFERENCE = """
import gc, weakref
from tunedsl.runtime import verified

REFS, RUNS_OF_REF, SPACES = [], [0], [0]


def spaces():  # an option expression: counted
    SPACES[0] += 1
    return dict(BLOCK=[16, 128])


def run_dsl(x):
    out = torch.empty(x.shape[0])
    expected = x.amax(1)  # the reference, computed per call
    REFS.append(weakref.ref(expected))
    r = autotune(space=spaces(), blocks=x.shape[0],
                 verify=lambda inputs: RUNS_OF_REF.__setitem__(0, RUNS_OF_REF[0] + 1) or {"out": expected},
                 rowmax(x, out, x.shape[1], x.stride(0), BLOCK=$BLOCK))
    return r


def run_api(x):
    out = torch.empty(x.shape[0])
    expected = x.amax(1)
    REFS.append(weakref.ref(expected))

    def check(inputs):
        RUNS_OF_REF[0] += 1
        return {"out": expected}

    return autotune_launch(rowmax, space={"BLOCK": [128, 256]}, grid=(x.shape[0],),
                           args=(x, out, x.shape[1], x.stride(0)),
                           kwargs=lambda cfg: {"BLOCK": cfg.BLOCK}, verify=check)


x = torch.randn(64, 100)
for run in (run_dsl, run_api):
    RUNS_OF_REF[0] = SPACES[0] = 0
    del REFS[:]
    sources = [run(x).source for _ in range(6)]
    gc.collect()
    print(run.__name__, sources, RUNS_OF_REF[0], SPACES[0] if run is run_dsl else "-",
          sum(w() is not None for w in REFS[1:]))
print(all(type(v).__name__ not in ("function", "Tensor")
          for kept in verified.PASSED.values() for _, v in kept))
"""


def test_a_check_closing_over_a_per_call_reference_is_one_check(tmp_path: Path) -> None:
    """A reference computed from each call's inputs, closed over by a lambda or nested def
    made afresh on every call, is one check (its code): six calls are a tuning then five
    hits in memory, the reference run once (the tuning compares against its first run), the
    option expressions run once per call, and no hit's reference outlives its call
    (``verified.PASSED`` keeps fingerprints, never a check or its closure)."""
    done = run_script(tmp_path, "per_call_ref.py", KERNEL + PER_CALL_REFERENCE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == [
        "run_dsl ['tuned', 'memory', 'memory', 'memory', 'memory', 'memory'] 1 6 0",
        "run_api ['tuned', 'memory', 'memory', 'memory', 'memory', 'memory'] 1 - 0",
        "True",
    ], done.stderr
