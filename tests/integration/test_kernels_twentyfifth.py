"""Kernels of the twenty-fifth set (kernels_twentyfifth.py), written as an ML-systems
engineer new to tunedsl writes them from the docs: a training script whose top level runs in
phases (a setting bound again between them), run through ``tunedsl run`` with Triton's
interpreter, each result checked against torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).resolve().parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HERE)])
    env["TUNEDSL_QUIET"] = "1"
    env.update(extra)
    return env


def _run(
    tmp_path: Path, name: str, text: str, *argv: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path), *argv],
        env=_env(tmp_path, **extra), cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


# Two phases of one script, each with its own macro written at the top level: the first
# runs with LIMIT=256, the second after LIMIT is bound again to 1024. The first macro runs
# only in the first loop, so no call of it ever sees 1024.
PHASES = """\
import torch
from tunedsl import autotune, cdiv
from kernels_twentyfifth import gelu_into

LIMIT = 256
for n in (100, 3000):
    x = torch.randn(n)
    out = torch.empty(n)
    r = autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK), key=n,
                 prune=lambda configs, args: [c for c in configs if c.BLOCK <= LIMIT],
                 gelu_into(x, out, n, BLOCK=$BLOCK))
    assert r.config.BLOCK <= 256, r.config
    torch.testing.assert_close(out, torch.nn.functional.gelu(x, approximate="tanh"))

LIMIT = 1024
for n in (100, 3000):
    x = torch.randn(n)
    out = torch.empty(n)
    r = autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK), key=n,
                 prune=lambda configs, args: [c for c in configs if c.BLOCK <= LIMIT],
                 gelu_into(x, out, n, BLOCK=$BLOCK))
    torch.testing.assert_close(out, torch.nn.functional.gelu(x, approximate="tanh"))
print("ok")
"""


def test_a_top_level_site_reads_a_setting_the_next_phase_binds_again(tmp_path: Path) -> None:
    """A macro written in a script's top-level loop runs again only as that loop does: a
    name bound again after the loop (a second phase's setting) never reaches its calls. Such
    a prune was refused as reading a rebound name, though every call of the site reads one
    value; it runs now."""
    done = _run(tmp_path, "phases.py", PHASES)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# The same phases, each calling one function that holds the site: its second phase's calls
# would launch decisions the first phase made under the old LIMIT.
PHASES_THROUGH_A_FUNCTION = """\
import torch
from tunedsl import autotune, cdiv
from kernels_twentyfifth import gelu_into


def gelu(x, out, keep):
    n = x.numel()
    return autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK), key=n,
                    prune=keep, gelu_into(x, out, n, BLOCK=$BLOCK))


keep = lambda configs, args: [c for c in configs if c.BLOCK <= LIMIT]
LIMIT = 256
for n in (100, 3000):
    x = torch.randn(n)
    gelu(x, torch.empty(n), keep)
LIMIT = 1024
for n in (100, 3000):
    x = torch.randn(n)
    gelu(x, torch.empty(n), keep)
print("ok")
"""

# Two top-level autotune_launch calls of one name= are one site: the second phase's calls
# would launch the first phase's decisions.
PHASES_OF_ONE_NAME = """\
import torch
from tunedsl import autotune_launch, cdiv
from kernels_twentyfifth import gelu_into

LIMIT = 256
for n in (100, 3000):
    x, out = torch.randn(n), torch.empty(n)
    autotune_launch(gelu_into, space={"BLOCK": [64, 128, 256, 512, 1024]}, name="gelu",
                    grid=lambda cfg: (cdiv(n, cfg.BLOCK),), args=(x, out, n), key=n,
                    kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
                    prune=lambda configs, args: [c for c in configs if c.BLOCK <= LIMIT])
LIMIT = 1024
for n in (100, 3000):
    x, out = torch.randn(n), torch.empty(n)
    autotune_launch(gelu_into, space={"BLOCK": [64, 128, 256, 512, 1024]}, name="gelu",
                    grid=lambda cfg: (cdiv(n, cfg.BLOCK),), args=(x, out, n), key=n,
                    kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
                    prune=lambda configs, args: [c for c in configs if c.BLOCK <= LIMIT])
print("ok")
"""


@pytest.mark.parametrize(
    ("script", "place"),
    [(PHASES_THROUGH_A_FUNCTION, "phases.py:8:12"), (PHASES_OF_ONE_NAME, "phases.py:8:")],
    ids=["function", "one-name"],
)
def test_a_site_a_later_phase_calls_again_still_names_the_rebound_setting(
    tmp_path: Path, script: str, place: str
) -> None:
    """Where the second phase reaches the same site (a function holding the macro, or
    ``autotune_launch`` calls sharing one ``name=``), the setting bound again between the
    phases is still named on the first call, with the line that binds it again."""
    done = _run(tmp_path, "phases.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"UsageError: {tmp_path / place}" in done.stderr, done.stderr
    assert "reads `LIMIT` (256) from the module, which rebinds it as it runs" in done.stderr
    assert "ok" not in done.stdout


KEYED_BY_A_SET = """\
import sys
import torch
from tunedsl import autotune, autotune_launch, cdiv
from kernels_twentyfifth import gelu_into

n = 300
x, out = torch.randn(n), torch.empty(n)
active = {"q", "k"}
for key in (active, (n, active), [n, {"v"}], {"heads": {"q", "k"}}):
    for _ in range(2):
        r = autotune(space=dict(BLOCK=[64, 128]), blocks=cdiv(n, $BLOCK), key=key,
                     gelu_into(x, out, n, BLOCK=$BLOCK))
        torch.testing.assert_close(out, torch.nn.functional.gelu(x, approximate="tanh"))
        print("macro", r.source, r.key["user_key"])
    r = autotune_launch(gelu_into, space={"BLOCK": [64, 128]}, grid=lambda c: (cdiv(n, c.BLOCK),),
                        args=(x, out, n), kwargs=lambda c: {"BLOCK": c.BLOCK}, key=key)
    print("launch", r.source, r.key["user_key"])
autotune(space=dict(BLOCK=[64, 128]), blocks=cdiv(n, $BLOCK), key=(n, slice(0, n)),
         gelu_into(x, out, n, BLOCK=$BLOCK))
"""


def test_a_key_holding_a_set_is_keyed_and_an_unhashable_one_named(tmp_path: Path) -> None:
    """``key=`` holding a set (the active heads, a set of flags), itself or inside a tuple,
    list or dict, is keyed by its members in sorted order, as the docs say; it raised
    Python's bare ``TypeError: unhashable type: 'set'`` from tunedsl's site. A value no key
    can hold (a ``slice``) is a ``UsageError`` at the site's line naming it and the fix."""
    done = _run(tmp_path, "keyed.py", KEYED_BY_A_SET)
    lines = done.stdout.splitlines()
    assert lines[0] == "macro tuned {'set': ['k', 'q']}", done.stdout + done.stderr
    assert lines[1] == "macro memory {'set': ['k', 'q']}"
    assert lines[3] == "macro tuned [300, {'set': ['k', 'q']}]"
    assert lines[4] == "macro memory [300, {'set': ['k', 'q']}]"
    assert lines[7] == "macro memory [300, {'set': ['v']}]"
    assert lines[9] == "macro tuned [['heads', {'set': ['k', 'q']}]]"
    assert [line.split()[0] for line in lines] == ["macro", "macro", "launch"] * 4
    assert done.returncode == 1, done.stderr
    assert f"UsageError: {tmp_path / 'keyed.py'}:18:1 (gelu_into): `key=[1]` is a slice" in (
        done.stderr
    )
    assert "which no key can hold; key on sizes" in done.stderr
    assert "TypeError" not in done.stderr


OPTIONAL_OUTPUT_VERIFIED = """\
import torch
import triton
from tunedsl import autotune, cdiv
from kernels_twentyfifth import add_bias_rows


def linear_bias(x, bias=None):
    R, C = x.shape
    out = torch.empty(R, C, dtype=x.dtype)
    r = autotune(space=dict(BR=[4, 8, 16]), blocks=cdiv(R, $BR), verify=["out", "bias"],
                 restore_value=["bias"],
                 add_bias_rows(x, bias, out, R, C, x.stride(0), HAS_BIAS=bias is not None,
                               BR=$BR, BC=triton.next_power_of_2(C)))
    return out, r


torch.manual_seed(0)
for bias in (None, torch.randn(24), None):
    x = torch.randn(10, 24)
    out, r = linear_bias(x, bias)
    torch.testing.assert_close(out, x + (0 if bias is None else bias))
    print(r.source, sorted(str(c) for c, t in r.timings.items() if t.status == "ok") if r.timings else [])
"""


def test_verify_names_an_optional_buffer_a_call_passes_as_none(tmp_path: Path) -> None:
    """``verify=["out", "bias"]`` where this call passes ``bias=None`` (an optional buffer,
    as ``restore_value=`` and ``reset_to_zero=`` may name one): the call verifies ``out``
    and tunes. It was a ``UsageError`` saying ``bias`` is not a tensor parameter of the
    kernel, which it is."""
    done = _run(tmp_path, "optional.py", OPTIONAL_OUTPUT_VERIFIED)
    assert done.returncode == 0, done.stderr
    every = str(["Config(BR=16)", "Config(BR=4)", "Config(BR=8)"])
    assert done.stdout.splitlines() == [f"tuned {every}", f"tuned {every}", f"memory {every}"]


# The widest block a dtype may take: 1024 bytes of it. A bf16 call may run BLOCK=512, a
# float32 one no more than 256.
DTYPE_IN_KEY = """\
import torch
from tunedsl import autotune, cdiv
from kernels_twentyfifth import gelu_into


def gelu(x, out):
    n, dt = x.numel(), x.dtype
    return autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK),
                    key=(n, x.dtype),
                    prune=lambda configs, args: [c for c in configs if c.BLOCK * dt.itemsize <= 1024],
                    gelu_into(x, out, n, BLOCK=$BLOCK))


for dt in (torch.float32, torch.bfloat16):
    for n in (100, 3000):
        x = torch.randn(n).to(dt)
        out = torch.empty_like(x)
        r = autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK),
                     key=(n, dt),
                     prune=lambda configs, args: [c for c in configs if c.BLOCK * dt.itemsize <= 1024],
                     gelu_into(x, out, n, BLOCK=$BLOCK))
        assert r.config.BLOCK * dt.itemsize <= 1024, (dt, r.config)
        r = gelu(x, out)
        assert r.config.BLOCK * dt.itemsize <= 1024, (dt, r.config)
for hp in ({"n": 100, "widest": 128}, {"n": 300, "widest": 512}, {"n": 100, "widest": 64}):
    n = hp["n"]
    x = torch.randn(n)
    out = torch.empty_like(x)
    r = autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK), key=hp,
                 prune=lambda configs, args: [c for c in configs if c.BLOCK <= hp["widest"]],
                 gelu_into(x, out, n, BLOCK=$BLOCK))
    assert r.config.BLOCK <= hp["widest"], (hp, r.config)
print("ok")
"""


def test_a_prune_reading_an_attribute_of_a_dtype_the_key_holds_runs(tmp_path: Path) -> None:
    """``key=(n, dt)`` with a prune reading ``dt.itemsize`` (a loop's dtype at a script's top
    level, or a function's ``dt = x.dtype``), and ``key=hp`` with a prune reading
    ``hp["widest"]`` of that settings dict: the key holds the dtype (which fixes its size)
    or the dict's items, so calls of one key agree on what prune reads. Both were refused as
    reading a value no key holds (``dt.itemsize`` (4), ``hp['widest']`` (128))."""
    done = _run(tmp_path, "dtypes.py", DTYPE_IN_KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
