"""Kernels of the twenty-fourth set (kernels_twentyfourth.py), written as an ML-systems
engineer new to tunedsl writes them from the docs: a training script whose top level loops
over sizes, settings held in dicts and objects, run through ``tunedsl run`` with Triton's
interpreter."""

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


# The prune keeps one BLOCK per length: at n=50 only 64, at n=200 only 256. A decision made
# at n=50 and launched at n=200 leaves most of each row out of the top-k.
SETTINGS_IN_A_FUNCTION = """\
import torch
from types import SimpleNamespace
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def topk(x, hp):
    rows, n = x.shape
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=n // 512,
             prune=lambda configs, args: [c for c in configs if READ <= c.BLOCK < 2 * READ],
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    return vals, idxs


torch.manual_seed(0)
for n in (50, 200):
    x = torch.randn(4, n)
    vals, idxs = topk(x, HP)
    torch.testing.assert_close(vals, x.topk(3, dim=1).values)
    assert torch.equal(idxs, x.topk(3, dim=1).indices)
print("ok")
"""


@pytest.mark.parametrize(
    ("read", "hp", "label"),
    [
        ('hp["n"]', '{"n": n}', "hp['n']"),
        ('hp.get("n", 32)', '{"n": n}', "hp['n']"),
        ("hp[0]", "[n]", "hp[0]"),
        ('hp.sizes["n"]', 'SimpleNamespace(sizes={"n": n})', "hp.sizes['n']"),
    ],
    ids=["item", "get", "list", "attribute-then-item"],
)
def test_prune_reading_an_item_of_a_settings_dict_the_caller_holds_is_named(
    tmp_path: Path, read: str, hp: str, label: str
) -> None:
    """A prune reading an item of a dict (or list) of settings that the calling function
    holds (``hp["n"]``, ``hp.get("n", 32)``) read a value no key held: the decision made at
    n=50 (BLOCK=64, the only one its prune keeps) was launched at n=200, and the top-k of
    each row came out wrong, silently. The first call now names the item and the fix."""
    script = SETTINGS_IN_A_FUNCTION.replace("READ", read).replace("HP", hp)
    done = _run(tmp_path, "settings_fn.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "settings_fn.py:11:5 (topk_two_outputs)" in done.stderr
    assert f"reads `{label}` (50) from the function that calls the site" in done.stderr
    assert 'Read it as args["N"]' in done.stderr and f"put `{label}` in key=" in done.stderr
    assert "ok" not in done.stdout
    fixed = SETTINGS_IN_A_FUNCTION.replace("READ", 'args["N"]').replace("HP", hp)
    done = _run(tmp_path, "settings_fn_args.py", fixed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


SETTINGS_AT_TOP_LEVEL = """\
import torch
from types import SimpleNamespace
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs

torch.manual_seed(0)
for n in (50, 200):
    hp = HP
    x = torch.randn(4, n)
    vals = torch.empty(4, 3)
    idxs = torch.empty(4, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=4, key=n // 512,
             prune=lambda configs, args: [c for c in configs if READ <= c.BLOCK < 2 * READ],
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    torch.testing.assert_close(vals, x.topk(3, dim=1).values)
print("ok")
"""


@pytest.mark.parametrize(
    ("read", "hp", "label"),
    [('hp["n"]', '{"n": n}', "hp['n']"), ("hp.n", "SimpleNamespace(n=n)", "hp.n")],
    ids=["dict", "object"],
)
def test_prune_at_the_top_level_reading_a_loops_settings_object_is_named(
    tmp_path: Path, read: str, hp: str, label: str
) -> None:
    """At a script's top level, a loop that binds a dict or an object of settings per step
    (``hp = {"n": n}``) and a prune reading its item or attribute: the name holds no number
    itself, so it was passed over, and the decision made at n=50 was launched at n=200,
    wrong. The first call now names the item, the line that rebinds it and the fix."""
    script = SETTINGS_AT_TOP_LEVEL.replace("READ", read).replace("HP", hp)
    done = _run(tmp_path, "settings_top.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "UsageError: " in done.stderr and "settings_top.py:12:5 (topk_two_outputs)" in done.stderr
    )
    assert f"reads `{label}` (50) from the module, which rebinds it as it runs (line 8)" in (
        done.stderr
    )
    assert "ok" not in done.stdout


CONSTANT_SET_UP_TWICE = """\
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs

SETUP
torch.manual_seed(0)
for n in (50, 200):
    x = torch.randn(4, n)
    vals = torch.empty(4, 3)
    idxs = torch.empty(4, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[16, 32, 64, 128, 256]), blocks=4, key=n,
             prune=lambda configs, args: [c for c in configs if c.BLOCK >= max(SMALLEST, args["N"])],
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    torch.testing.assert_close(vals, x.topk(3, dim=1).values)
print("ok")
AFTER
"""


@pytest.mark.parametrize(
    "setup",
    [
        "SMALLEST = 16\nSMALLEST = max(SMALLEST, 32)",
        "SMALLEST = 16\nSMALLEST *= 2",
        "for _warmup in range(2):\n    SMALLEST = 32",
    ],
    ids=["assigned-twice", "augmented", "earlier-loop"],
)
def test_a_constant_set_up_before_the_loop_is_read_freely(tmp_path: Path, setup: str) -> None:
    """A name the script binds twice while setting up (``SMALLEST = max(SMALLEST, 32)``,
    ``*=``, an earlier loop) and never again once the loop that calls the site runs was
    refused as rebound, though every call reads one value; it is read freely now. A name
    bound again after the site's first calls is still named, with the line that rebinds it."""
    done = _run(
        tmp_path, "setup.py", CONSTANT_SET_UP_TWICE.replace("SETUP", setup).replace("AFTER", "")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    later = CONSTANT_SET_UP_TWICE.replace("SETUP", setup).replace("AFTER", "SMALLEST = 64")
    done = _run(tmp_path, "setup_later.py", later)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reads `SMALLEST` (32) from the module, which rebinds it as it runs (line 17)" in (
        done.stderr
    )


MADE_PER_CALL = """\
import functools
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def covering(low):
    return lambda configs, args: [c for c in configs if low <= c.BLOCK < 2 * low]


def keep(configs, args, low):
    return [c for c in configs if low <= c.BLOCK < 2 * low]


def topk(x):
    rows, n = x.shape
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=KEY,
             prune=PRUNE,
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    return vals


torch.manual_seed(0)
for n in (50, 200):
    x = torch.randn(4, n)
    torch.testing.assert_close(topk(x), x.topk(3, dim=1).values)
print("ok")
"""


@pytest.mark.parametrize(
    ("prune", "label"),
    [
        ("covering(n)", "prune=<lambda at made.py:8>"),
        ("functools.partial(keep, low=n)", "prune=partial"),
    ],
    ids=["factory", "partial"],
)
def test_a_prune_made_per_call_from_a_local_is_named(
    tmp_path: Path, prune: str, label: str
) -> None:
    """A prune made per call from the caller's local (``prune=covering(n)``, a factory;
    ``functools.partial(keep, low=n)``) holds this call's value as a closure does, but was
    passed over (the factory had returned): the decision made at n=50 was launched at n=200,
    wrong. The first call now names the local; ``key=n``, and a factory given a constant
    (``covering(64)``), run as before."""
    script = MADE_PER_CALL.replace("PRUNE", prune).replace("KEY", "n // 512")
    done = _run(tmp_path, "made.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "made.py:19:5 (topk_two_outputs)" in done.stderr
    assert f"{label} reads `n` (50) from the function that calls the site" in done.stderr
    assert "the prune= expression makes the prune from it" in done.stderr
    assert "ok" not in done.stdout
    done = _run(
        tmp_path, "made_keyed.py", MADE_PER_CALL.replace("PRUNE", prune).replace("KEY", "n")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    constant = MADE_PER_CALL.replace("PRUNE", "covering(64)").replace("KEY", "n // 512")
    constant = constant.replace("for n in (50, 200):", "for n in (50, 60):")
    done = _run(tmp_path, "made_constant.py", constant)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


PLAIN_API = """\
import torch
from tunedsl import autotune_launch
from kernels_twentyfourth import topk_two_outputs


def covering(low):
    return lambda configs, args: [c for c in configs if low <= c.BLOCK < 2 * low]


def topk(x):
    rows, n = x.shape
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    autotune_launch(topk_two_outputs, space={"BLOCK": [32, 64, 128, 256]}, grid=(rows,),
                    args=(x, vals, idxs, n, x.stride(0)),
                    kwargs=lambda cfg: {"K": 3, "BLOCK": cfg.BLOCK}, key=KEY, prune=covering(n))
    return vals


torch.manual_seed(0)
for n in (50, 200):
    x = torch.randn(4, n)
    vals = torch.empty(4, 3)
    idxs = torch.empty(4, 3, dtype=torch.int64)
    CALL
    torch.testing.assert_close(vals, x.topk(3, dim=1).values)
print("ok")
"""

TOP_LEVEL_CALL = """autotune_launch(topk_two_outputs, space={"BLOCK": [32, 64, 128, 256]}, grid=(4,),
                    args=(x, vals, idxs, n, x.stride(0)),
                    kwargs=lambda cfg: {"K": 3, "BLOCK": cfg.BLOCK}, key=KEY, prune=covering(n))"""


@pytest.mark.parametrize(
    ("call", "where"),
    [
        ("vals = topk(x)", "from the function that calls the site"),
        (TOP_LEVEL_CALL, "from the module, which rebinds it as it runs (line 21)"),
    ],
    ids=["function", "top-level"],
)
def test_autotune_launch_given_a_prune_made_per_call_from_a_local_names_it(
    tmp_path: Path, call: str, where: str
) -> None:
    """``autotune_launch(..., prune=covering(n))``: the prune made per call from the
    caller's ``n`` was taken for fixed, and the decision made at n=50 was launched at n=200,
    wrong. The call's ``prune=`` expression is read as a DSL site's is: the first call names
    ``n``; with ``key=n`` the script runs."""
    script = PLAIN_API.replace("CALL", call)
    done = _run(tmp_path, "plain.py", script.replace("KEY", "n // 512"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "(autotune_launch)" in done.stderr
    assert f"reads `n` (50) {where} (the prune= expression makes" in done.stderr
    assert "ok" not in done.stdout
    done = _run(tmp_path, "plain_keyed.py", script.replace("KEY", "n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


NUMPY_LENGTH = """\
import numpy as np
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def topk(x):
    rows = x.shape[0]
    n = np.prod(x.shape[1:])
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=KEY,
             prune=lambda configs, args: [c for c in configs if n <= c.BLOCK < 2 * n],
             topk_two_outputs(x, vals, idxs, int(n), x.stride(0), K=3, BLOCK=$BLOCK))
    return vals


torch.manual_seed(0)
for n in (50, 200):
    x = torch.randn(4, n)
    torch.testing.assert_close(topk(x), x.topk(3, dim=1).values)
print("ok")
"""


def test_prune_reading_a_numpy_number_of_the_caller_is_named(tmp_path: Path) -> None:
    """A length computed with numpy (``n = np.prod(x.shape[1:])``, a ``numpy.int64``) read
    by the prune was taken for no data at all: the decision made at n=50 was launched at
    n=200, wrong. It is named now; ``key=int(n)`` holds it (as the number it is), and runs."""
    done = _run(tmp_path, "np_len.py", NUMPY_LENGTH.replace("KEY", "int(n) // 512"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "np_len.py:12:5 (topk_two_outputs)" in done.stderr
    assert "reads `n` (np.int64(50)) from the function that calls the site" in done.stderr
    assert "ok" not in done.stdout
    done = _run(tmp_path, "np_len_keyed.py", NUMPY_LENGTH.replace("KEY", "int(n)"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


KEYED_ON_THE_SHAPE = """\
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def topk(x):
    rows, n = x.shape
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=(x.shape, str(x.dtype)),
             prune=lambda configs, args: [c for c in configs if READ <= c.BLOCK < 2 * READ],
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    return vals


torch.manual_seed(0)
for n in (50, 200, 50):
    x = torch.randn(4, n)
    torch.testing.assert_close(topk(x), x.topk(3, dim=1).values)
print("ok")
"""


@pytest.mark.parametrize("read", ["n", 'args["N"]'], ids=["local", "args"])
def test_a_key_holding_the_length_inside_a_shape_splits_nothing(tmp_path: Path, read: str) -> None:
    """``key=(x.shape, str(x.dtype))``, the form the docs give for what a decision depends
    on, holds the row length inside the shape. A prune reading that length (the caller's
    ``n``, or ``args["N"]``) was refused as reading a value no key holds, or warned that it
    split the key= buckets; only items of the key itself were looked at. Both run now, with
    no warning."""
    done = _run(tmp_path, "shape_key.py", KEYED_ON_THE_SHAPE.replace("READ", read))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "no longer groups" not in done.stderr, done.stderr
