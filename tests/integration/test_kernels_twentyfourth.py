"""Kernels of the twenty-fourth set (kernels_twentyfourth.py), written as an ML-systems
engineer new to tunedsl writes them from the docs: a training script whose top level loops
over sizes, settings held in dicts and objects, run through ``tunedsl run`` with Triton's
interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_helpers import run_script

pytestmark = pytest.mark.needs_triton


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
    done = run_script(tmp_path, "settings_fn.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "settings_fn.py:11:5 (topk_two_outputs)" in done.stderr
    assert f"reads `{label}` (50) from the function that calls the site" in done.stderr
    assert 'Read it as args["N"]' in done.stderr and f"put `{label}` in key=" in done.stderr
    assert "ok" not in done.stdout
    fixed = SETTINGS_IN_A_FUNCTION.replace("READ", 'args["N"]').replace("HP", hp)
    done = run_script(tmp_path, "settings_fn_args.py", fixed)
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
    done = run_script(tmp_path, "settings_top.py", script)
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
    refused as rebound, though every call reads one value; it is read freely now, and so is
    one bound again after the loop, which the site, written in that loop, never runs again
    to see (test_kernels_twentyfifth.py: a site a later phase calls again is still named)."""
    done = run_script(
        tmp_path, "setup.py", CONSTANT_SET_UP_TWICE.replace("SETUP", setup).replace("AFTER", "")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    later = CONSTANT_SET_UP_TWICE.replace("SETUP", setup).replace("AFTER", "SMALLEST = 64")
    done = run_script(tmp_path, "setup_later.py", later)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


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
    done = run_script(tmp_path, "made.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "made.py:19:5 (topk_two_outputs)" in done.stderr
    assert f"{label} reads `n` (50) from the function that calls the site" in done.stderr
    assert "the prune= expression makes the prune from it" in done.stderr
    assert "ok" not in done.stdout
    done = run_script(
        tmp_path, "made_keyed.py", MADE_PER_CALL.replace("PRUNE", prune).replace("KEY", "n")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    constant = MADE_PER_CALL.replace("PRUNE", "covering(64)").replace("KEY", "n // 512")
    constant = constant.replace("for n in (50, 200):", "for n in (50, 60):")
    done = run_script(tmp_path, "made_constant.py", constant)
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
    done = run_script(tmp_path, "plain.py", script.replace("KEY", "n // 512"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "(autotune_launch)" in done.stderr
    assert f"reads `n` (50) {where} (the prune= expression makes" in done.stderr
    assert "ok" not in done.stdout
    done = run_script(tmp_path, "plain_keyed.py", script.replace("KEY", "n"))
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
    done = run_script(tmp_path, "np_len.py", NUMPY_LENGTH.replace("KEY", "int(n) // 512"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "np_len.py:12:5 (topk_two_outputs)" in done.stderr
    assert "reads `n` (np.int64(50)) from the function that calls the site" in done.stderr
    assert "ok" not in done.stdout
    done = run_script(tmp_path, "np_len_keyed.py", NUMPY_LENGTH.replace("KEY", "int(n)"))
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
    done = run_script(tmp_path, "shape_key.py", KEYED_ON_THE_SHAPE.replace("READ", read))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "no longer groups" not in done.stderr, done.stderr


TRAINING = """\
import threading

import torch
import triton.language as tl
from torch import nn
from tunedsl import autotune, cdiv
from kernels_twentyfourth import (
    axpy_unspecialized, bias_act, block_sums, cast_scale, cross_entropy_sum, depthwise_conv1d,
    fp8_dot_rows, quantize_rows_int8, scan_with_offsets, scatter_add_rows, topk_two_outputs,
)

IGNORE = -100
SOURCES = []


def topk(x, k):
    rows, n = x.shape
    vals = torch.empty(rows, k, dtype=x.dtype)
    idxs = torch.empty(rows, k, dtype=torch.int64)
    r = autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=n,
                 prune=lambda configs, args: [c for c in configs if c.BLOCK >= args["N"]],
                 topk_two_outputs(x, vals, idxs, n, x.stride(0), K=k, BLOCK=$BLOCK))
    SOURCES.append(r.source)
    return vals, idxs


def cross_entropy(logits, target):
    B, V = logits.shape
    loss = torch.zeros((), dtype=torch.float32)
    count = torch.zeros((), dtype=torch.int32)
    r = autotune(space=dict(BLOCK=[16, 32, 64]), blocks=B, key=(V, str(logits.dtype)),
                 reset_to_zero=["loss", "count"],
                 cross_entropy_sum(logits, target, loss, count, V, logits.stride(0), IGNORE,
                                   BLOCK=$BLOCK))
    SOURCES.append(r.source)
    return loss / count


class DWConv(nn.Module):
    def __init__(self, C, KW):
        super().__init__()
        self.w = nn.Parameter(torch.randn(C, KW))
        self.KW = KW

    def forward(self, x):
        B, C, L = x.shape
        out = torch.empty(B, C, L)
        r = autotune(space=dict(BLOCK=[16, 32, 64], num_warps=[1, 2]),
                     blocks=(B * C, cdiv(L, $BLOCK)), rtol=1e-4, atol=1e-4,
                     verify=lambda a: {"out": nn.functional.conv1d(
                         a["x"], a["w"].unsqueeze(1), padding=self.KW // 2, groups=C)},
                     depthwise_conv1d(x, self.w, out, C, L, KW=self.KW, BLOCK=$BLOCK))
        SOURCES.append(r.source)
        return out


def quantize(x):
    rows, n = x.shape
    q = torch.empty(rows, n, dtype=torch.int8)
    s = torch.empty(rows)
    r = autotune(space=dict(BLOCK=[16, 64]), blocks=rows, verify=True,
                 quantize_rows_int8(x, q, s, n, x.stride(0), BLOCK=$BLOCK))
    SOURCES.append(r.source)
    return q, s


def scatter_add(src, index, out):
    n, D = src.shape
    r = autotune(space=dict(BLOCK=[16, 32]), blocks=cdiv(n, $BLOCK), restore_value=["out"],
                 scatter_add_rows(src, index, out, n, D=D, BLOCK=$BLOCK))
    SOURCES.append(r.source)


def prefix_sum(x):
    n = x.numel()
    sums = torch.empty(cdiv(n, 64))
    autotune(space=dict(num_warps=[1, 2]), blocks=cdiv(n, 64), block_sums(x, sums, n, BLOCK=64))
    offsets = torch.cat([torch.zeros(1), sums.cumsum(0)[:-1]])
    out = torch.empty_like(x)
    r = autotune(space=dict(num_warps=[1, 2]), blocks=cdiv(n, 64),
                 scan_with_offsets(x, offsets, out, n, BLOCK=64))
    SOURCES.append(r.source)
    return out


def cast(x, alpha, dt, out):
    n = x.numel()
    r = autotune(space=dict(BLOCK=[64, 128]), blocks=cdiv(n, $BLOCK), key=(n // 512,),
                 cast_scale(x, out, n, alpha, OUT_DTYPE=dt, BLOCK=$BLOCK))
    SOURCES.append(r.source)


def axpy(x, y, a):
    n = x.numel()
    r = autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(n, $BLOCK), restore_value=["y"],
                 axpy_unspecialized(x, y, n, a, BLOCK=$BLOCK))
    SOURCES.append(r.source)


def fp8_dot(a, b):
    out = torch.empty(a.shape[0])
    r = autotune(space=dict(BLOCK=[16, 32]), blocks=a.shape[0],
                 fp8_dot_rows(a, b, out, a.shape[1], a.stride(0), BLOCK=$BLOCK))
    SOURCES.append(r.source)
    return out


def bias_relu(x, bias=None):
    out = torch.empty_like(x)
    r = autotune(space=dict(BLOCK=[32, 64]), blocks=cdiv(x.numel(), $BLOCK),
                 bias_act(x, bias, out, x.numel(), x.shape[-1], HAS_BIAS=bias is not None,
                          BLOCK=$BLOCK))
    SOURCES.append(r.source)
    return out


torch.manual_seed(0)
conv = DWConv(4, 3)
for step, (B, V, L) in enumerate([(8, 100, 40), (6, 250, 100), (8, 100, 40)]):
    logits = torch.randn(B, V)
    target = torch.randint(0, V, (B,))
    target[::3] = IGNORE
    ref = nn.functional.cross_entropy(logits, target, ignore_index=IGNORE)
    torch.testing.assert_close(cross_entropy(logits, target), ref, rtol=1e-4, atol=1e-4)
    half = logits.half()
    ref = nn.functional.cross_entropy(half.float(), target, ignore_index=IGNORE)
    torch.testing.assert_close(cross_entropy(half, target), ref, rtol=1e-3, atol=1e-3)
    vals, idxs = topk(logits, 3)
    torch.testing.assert_close(vals, logits.topk(3, dim=1).values)
    assert torch.equal(idxs, logits.topk(3, dim=1).indices)
    x = torch.randn(2, 4, L)
    ref = nn.functional.conv1d(x, conv.w.detach().unsqueeze(1), padding=1, groups=4)
    torch.testing.assert_close(conv(x), ref, rtol=1e-4, atol=1e-4)
    q, s = quantize(logits)
    torch.testing.assert_close(s, logits.abs().amax(1) / 127)
    assert (q.float() - logits / s[:, None]).abs().max() <= 0.5 + 1e-3
    src, index, out = torch.randn(50, 4), torch.randint(0, 5, (50,)), torch.ones(5, 4)
    ref = out.clone().index_add_(0, index, src)
    scatter_add(src, index, out)
    torch.testing.assert_close(out, ref)
    flat = torch.randn(V * 4)
    torch.testing.assert_close(prefix_sum(flat), flat.cumsum(0), rtol=1e-4, atol=1e-3)
    for dt, tdt in [(tl.float16, torch.float16), (tl.bfloat16, torch.bfloat16)]:
        out = torch.empty(V, dtype=tdt)
        cast(logits[0], 0.5, dt, out)
        torch.testing.assert_close(out, (logits[0] * 0.5).to(tdt))
    y = torch.randn(L)
    ref = y + 0.5 * flat[:L]
    axpy(flat[:L], y, 0.5)
    torch.testing.assert_close(y, ref)
    a8 = torch.randn(4, L).to(torch.float8_e4m3fn)
    torch.testing.assert_close(fp8_dot(a8, flat[:L]), (a8.float() * flat[:L]).sum(1),
                               rtol=1e-4, atol=1e-4)
    bias = torch.randn(L) if step % 2 else None
    torch.testing.assert_close(bias_relu(x[0], bias), torch.relu(x[0] + (0 if bias is None else bias)))

errors = []


def worker(seed):
    try:
        g = torch.Generator().manual_seed(seed)
        for n in (64, 100, 200):
            x = torch.randn(3, n, generator=g)
            torch.testing.assert_close(topk(x, 2)[0], x.topk(2, dim=1).values)
    except BaseException as err:
        errors.append(err)


threads = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
print(sorted(set(SOURCES)))
"""


def test_a_training_script_is_right_cold_and_decided_from_records_warm(tmp_path: Path) -> None:
    """The set's kernels in a training script's top-level loop (a top-k of two outputs, a
    cross-entropy into two atomic scalars with ignore_index, a depthwise convolution in an
    ``nn.Module`` with ``verify=``, an int8 quantizer with per-row scales, a scatter-add with
    repeated indices, a prefix sum across blocks, a dtype constexpr, a ``do_not_specialize``
    scalar, fp8 e4m3 inputs, an optional bias) and from threads: right against torch when
    tuned, and every key decided from memory or records in a second process."""
    cold = run_script(tmp_path, "train.py", TRAINING)
    assert cold.returncode == 0, cold.stderr
    assert "tuned" in cold.stdout
    warm = run_script(tmp_path, "train.py", TRAINING)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.strip() == "['default', 'disk', 'memory']", warm.stdout


GLOBAL_WRITER = """\
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs

LIVE = 0


def grow(n):
    global LIVE
    LIVE = n


torch.manual_seed(0)
SETUP
for n in (50, 200):
    CALL
    x = torch.randn(4, n)
    vals = torch.empty(4, 3)
    idxs = torch.empty(4, 3, dtype=torch.int64)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=4, key=n // 512,
             prune=lambda configs, args: [c for c in configs if READ],
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    torch.testing.assert_close(vals, x.topk(3, dim=1).values)
print("ok")
"""


def test_a_global_a_function_rebinds_in_the_loop_is_named(tmp_path: Path) -> None:
    """``grow(n)`` in the loop rebinds the global ``LIVE`` (``global LIVE; LIVE = n``) that
    the prune reads: no statement of the top level bound it, so it was read as a constant,
    and the decision made at LIVE=50 was launched at 200, wrong. It is named now, with the
    line of the call; the same function called once before the loop is read freely."""
    script = GLOBAL_WRITER.replace("SETUP\n", "").replace("CALL", "grow(n)")
    done = run_script(tmp_path, "writer.py", script.replace("READ", "LIVE <= c.BLOCK < 2 * LIVE"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "writer.py:19:5 (topk_two_outputs)" in done.stderr
    assert "reads `LIVE` (50) from the module, which rebinds it as it runs (line 15)" in (
        done.stderr
    )
    assert "ok" not in done.stdout
    once = GLOBAL_WRITER.replace("SETUP", "grow(32)").replace("    CALL\n", "")
    done = run_script(
        tmp_path, "writer_once.py", once.replace("READ", 'c.BLOCK >= max(LIVE, args["N"])')
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


PRUNES_IN_A_TUPLE = """\
import torch
from tunedsl import autotune
from kernels_twentyfourth import topk_two_outputs


def covering(low):
    return lambda configs, args: [c for c in configs if low <= c.BLOCK < 2 * low]


def topk(x, mode):
    rows, n = x.shape
    vals = torch.empty(rows, 3)
    idxs = torch.empty(rows, 3, dtype=torch.int64)
    prunes = (covering(64), covering(256))
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, key=KEY,
             prune=PRUNE,
             topk_two_outputs(x, vals, idxs, n, x.stride(0), K=3, BLOCK=$BLOCK))
    return vals


torch.manual_seed(0)
for n, mode in ((50, 0), (60, 0), (200, 1)):
    x = torch.randn(4, n)
    torch.testing.assert_close(topk(x, mode), x.topk(3, dim=1).values)
print("ok")
"""


@pytest.mark.parametrize(
    ("prune", "key"),
    [("prunes[mode]", "(n // 512, mode)"), ("prunes[0] if mode == 0 else prunes[1]", "mode")],
    ids=["indexed-by-a-keyed-local", "constant-items"],
)
def test_a_local_tuple_of_prunes_is_code_not_data(tmp_path: Path, prune: str, key: str) -> None:
    """A prune picked from a tuple of prunes the caller builds (``prunes[mode]``, the key
    holding ``mode``) is a fixed prune per key: the tuple holds functions, not a value of
    the call, and the script runs."""
    script = PRUNES_IN_A_TUPLE.replace("PRUNE", prune).replace("KEY", key)
    done = run_script(tmp_path, "tuple.py", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
