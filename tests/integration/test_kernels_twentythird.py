"""Kernels of the twenty-third set (kernels_twentythird.py), written as an ML-systems
engineer new to tunedsl writes them from the docs, in an application's classes and
``nn.Module`` methods, run through ``tunedsl run`` with Triton's interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from runtime_helpers import run_script, script_env

pytestmark = pytest.mark.needs_triton


LIVE_TOPK = """\
import torch
from torch import nn
from tunedsl import autotune
from kernels_twentythird import topk_live


class ScoreCache(nn.Module):
    \"\"\"A static buffer of scores, max_len columns, of which the first `live` are filled.\"\"\"

    def __init__(self, rows, max_len):
        super().__init__()
        self.buf = torch.full((rows, max_len), float("-inf"))
        self.live = 0

    def append(self, scores):
        n = scores.shape[1]
        self.buf[:, self.live:self.live + n] = scores
        self.live += n

    def keep(self, configs, args):
        return [c for c in configs if c.BLOCK >= self.live]

    def forward(self, k):
        rows = self.buf.shape[0]
        out = torch.empty(rows, k)
        autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=rows, KEY
                 prune=PRUNE,
                 topk_live(self.buf, out, self.buf.stride(0), self.live, K=k, BLOCK=$BLOCK))
        return out


torch.manual_seed(0)
cache = ScoreCache(4, 256)
for step in range(3):  # live = 50, 100, 150: one buffer, one key without the prune's read
    cache.append(torch.randn(4, 50))
    torch.testing.assert_close(cache(3), cache.buf[:, :cache.live].topk(3, dim=1).values)
print("ok")
"""

LAMBDA_READING_SELF = "lambda configs, args: [c for c in configs if c.BLOCK >= self.live]"


@pytest.mark.parametrize(
    ("prune", "label"),
    [
        (LAMBDA_READING_SELF, "prune=<lambda at live_topk.py:27>"),
        ("self.keep", "prune=ScoreCache.keep"),
    ],
    ids=["lambda", "method"],
)
def test_prune_reading_an_attribute_of_self_in_forward_is_named_not_launched_where_it_drops(
    tmp_path: Path, prune: str, label: str
) -> None:
    """In an ``nn.Module``'s ``forward`` a ``prune=`` reading ``self.live`` (a lambda written
    in the call, or a method, ``prune=self.keep``) read a value no key held: the decision
    made at live=50 (BLOCK=64 or 128) was launched at live=150, whose prune keeps only
    BLOCK=256, and the top-k of each row came out wrong, silently. The first call now names
    the site, the attribute and the fix; the fixed prune (``args["N"]``) and one that
    ``key=`` covers (``key=self.live``) give the right result at every length."""
    script = LIVE_TOPK.replace("PRUNE", prune).replace(" KEY", "")
    done = run_script(tmp_path, "live_topk.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UsageError: " in done.stderr and "live_topk.py:26:9 (topk_live)" in done.stderr
    assert f"{label} reads `self.live` (50) from the function that calls the site" in done.stderr
    assert 'Read it as args["N"]' in done.stderr and "put `self.live` in key=" in done.stderr
    assert "ok" not in done.stdout
    fixed = LIVE_TOPK.replace("PRUNE", prune.replace("self.live", 'args["N"]')).replace(" KEY", "")
    if prune == "self.keep":
        fixed = LIVE_TOPK.replace("PRUNE", "self.keep").replace(" KEY", "")
        fixed = fixed.replace("c.BLOCK >= self.live]", 'c.BLOCK >= args["N"]]')
    done = run_script(tmp_path, "live_topk_args.py", fixed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    keyed = LIVE_TOPK.replace("PRUNE", prune).replace(" KEY", " key=self.live,")
    done = run_script(tmp_path, "live_topk_keyed.py", keyed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


PRUNER_MADE_ONCE = """\
import torch
from tunedsl import autotune
from kernels_twentythird import topk_live


class AtLeast:
    def __init__(self, low):
        self.low = low
        self.name = "at-least"

    def keep(self, configs, args):
        return [c for c in configs if c.BLOCK >= max(self.low, args["N"])]


PRUNER = AtLeast(32)


class Scores:
    def topk_by_method(self, x, k):
        out = torch.empty(x.shape[0], k)
        autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=x.shape[0], key=x.shape[1] // 512,
                 prune=PRUNER.keep,
                 topk_live(x, out, x.stride(0), x.shape[1], K=k, BLOCK=$BLOCK))
        return out


torch.manual_seed(0)
s = Scores()
for n in (100, 200):
    x = torch.randn(4, n)
    torch.testing.assert_close(s.topk_by_method(x, 3), x.topk(3, dim=1).values)
print("ok")
"""


def test_a_pruner_made_once_at_the_top_level_runs(tmp_path: Path) -> None:
    """A method of an object made once at a module's top level (``prune=PRUNER.keep``)
    reads state fixed for the process, as a prune a factory made does: it runs as before."""
    done = run_script(tmp_path, "pruner_once.py", PRUNER_MADE_ONCE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


HISTOGRAMS = """\
import sys
import torch
from torch import nn
from tunedsl import autotune, autotune_launch, cdiv
from kernels_twentythird import histogram_into


class Histogram(nn.Module):
    \"\"\"Counts afresh on each call, or (accumulate) adds each call's counts to the last's.\"\"\"

    def __init__(self, accumulate):
        super().__init__()
        self.accumulate = accumulate

    def forward(self, x, hist):
        n = x.numel()
        autotune(space=dict(BLOCK=[32, 64, 128]), blocks=cdiv(n, $BLOCK),
                 reset_to_zero=[] if self.accumulate else ["hist"],
                 histogram_into(x, n, hist, BLOCK=$BLOCK))
        return hist


def plain(x, hist, accumulate):
    n = x.numel()
    autotune_launch(histogram_into, space=dict(BLOCK=[32, 64, 128]),
                    grid=lambda cfg: (cdiv(n, cfg.BLOCK),), args=(x, n, hist),
                    kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
                    reset_to_zero=None if accumulate else ["hist"])
    return hist


torch.manual_seed(0)
x = torch.randint(0, 8, (300,), dtype=torch.int32)  # one shape: one key of the site
once = torch.bincount(x, minlength=8).int()
modules = {True: Histogram(True), False: Histogram(False)}
for accumulate in [sys.argv[1] == "accumulate-first", sys.argv[1] != "accumulate-first"]:
    for call in (modules[accumulate], lambda x, h: plain(x, h, accumulate)):
        hist = torch.zeros(8, dtype=torch.int32)
        for _ in range(3):
            call(x, hist)
        torch.testing.assert_close(hist, once * (3 if accumulate else 1))
print("ok")
"""


@pytest.mark.parametrize("order", ["accumulate-first", "fresh-first"])
def test_a_computed_reset_to_zero_zeroes_what_each_call_names(tmp_path: Path, order: str) -> None:
    """Two modules share one site and one key, one counting afresh on each call
    (``reset_to_zero=["hist"]``), one accumulating over calls (``reset_to_zero=[]``), as
    ``self.accumulate`` computes it; the same with ``autotune_launch``. The key's first
    call's ``reset_to_zero=`` was kept with its decision: the accumulating module had its
    counts zeroed on every call (fresh-first), or the fresh one added into the last call's
    counts (accumulate-first), wrong results either way, silently. Each call now zeroes
    what its own ``reset_to_zero=`` names."""
    done = run_script(tmp_path, "histograms.py", HISTOGRAMS, order)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


TOPK_DEFAULT_BOUND = """\
import torch
from tunedsl import autotune
from kernels_twentythird import topk_live


def topk(buf, live, k):
    out = torch.empty(buf.shape[0], k)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=buf.shape[0],
             prune=lambda configs, args, live=live: [c for c in configs if c.BLOCK >= live],
             topk_live(buf, out, buf.stride(0), live, K=k, BLOCK=$BLOCK))
    return out


torch.manual_seed(0)
buf = torch.randn(4, 256)
for live in (50, 100, 150):  # one buffer: one key without the prune's read
    torch.testing.assert_close(topk(buf, live, 3), buf[:, :live].topk(3, dim=1).values)
print("ok")
"""

TOPK_DEFAULT_BOUND_AT_TOP_LEVEL = """\
import torch
from tunedsl import autotune
from kernels_twentythird import topk_live

LOW = 32  # a module constant: read freely
torch.manual_seed(0)
buf = torch.randn(4, 256)
for live in (50, 100, 150):
    out = torch.empty(4, 3)
    autotune(space=dict(BLOCK=[32, 64, 128, 256]), blocks=4,
             prune=lambda configs, args, live=live, low=LOW: [c for c in configs if c.BLOCK >= max(live, low)],
             topk_live(buf, out, buf.stride(0), live, K=3, BLOCK=$BLOCK))
    torch.testing.assert_close(out, buf[:, :live].topk(3, dim=1).values)
print("ok")
"""


@pytest.mark.parametrize(
    ("script", "site", "source"),
    [
        (TOPK_DEFAULT_BOUND, "default_bound.py:8:5", "the function that calls the site"),
        (
            TOPK_DEFAULT_BOUND_AT_TOP_LEVEL,
            "default_bound.py:10:5",
            "the module, which rebinds it as it runs (line 8)",
        ),
    ],
    ids=["in-a-function", "at-top-level"],
)
def test_prune_binding_a_local_as_a_default_is_named_not_launched_where_it_drops(
    tmp_path: Path, script: str, site: str, source: str
) -> None:
    """``prune=lambda configs, args, live=live: ...``, Python's idiom against late binding,
    holds the caller's ``live`` of this call as a default, where no key holds it: the
    decision made at live=50 was launched at live=150, whose prune keeps only BLOCK=256,
    and the top-k came out wrong, silently. It is now named as a closure's read is, in a
    function and at a script's top level; a default bound from a module constant is not."""
    done = run_script(tmp_path, "default_bound.py", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "default_bound.py" in done.stderr and f"{site} (topk_live)" in done.stderr
    assert f"reads `live` (50) from {source}" in done.stderr
    assert 'Read it as args["N"]' in done.stderr
    assert "ok" not in done.stdout
    fixed = script.replace("c.BLOCK >= live", 'c.BLOCK >= args["N"]')
    fixed = fixed.replace("max(live, low)", 'max(args["N"], low)')
    fixed = fixed.replace("args, live=live", "args")
    done = run_script(tmp_path, "default_fixed.py", fixed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


MASKED_SOFTMAX = """\
import sys
import torch
from tunedsl import autotune, workload
from kernels_twentythird import softmax_maybe_masked


def softmax(x, mask=None):
    M, N = x.shape
    out = torch.empty(M, N)
    autotune(space=dict(BLOCK=[32, 64]), blocks=M,
             softmax_maybe_masked(x, mask, out, N, BLOCK=$BLOCK))
    return out


@workload
def unmasked():
    for n in (48, 96):
        softmax(torch.randn(4, n))


if __name__ == "__main__":
    x = torch.randn(4, 72)
    mask = (torch.rand(4, 72) > 0.3).to(torch.int8)
    want = torch.softmax(x.masked_fill(mask == 0, float("-inf")), -1)
    torch.testing.assert_close(softmax(x, mask), want)
    print("ok")
"""


def test_a_rule_swept_without_a_mask_names_a_mask_passed_as_a_tensor(tmp_path: Path) -> None:
    """A rule swept with ``mask=None`` deciding, with tuning off, a call that passes a mask
    warned "args.mask is absent (swept: null), args.mask.dtype is "int8" (swept: absent),
    ...": the mask was there, and the sweep's None read as JSON. The warning now says
    ``args.mask is a tensor (swept: None)``, once."""
    script = tmp_path / "masked.py"
    script.write_text(MASKED_SOFTMAX, encoding="utf-8")
    env = script_env(tmp_path)
    sweep = [sys.executable, "-m", "tunedsl", "sweep", "--no-ray", str(script)]
    done = subprocess.run(sweep, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules"
    build = [sys.executable, "-m", "tunedsl", "rules", "build", "--out", str(rules)]
    done = subprocess.run(build, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    done = run_script(
        tmp_path, "masked.py", MASKED_SOFTMAX,
        TUNEDSL_CACHE_DIR=str(tmp_path / "fresh"), TUNEDSL_RECORDS_PATH=str(rules),
        TUNEDSL_AUTOTUNE="cached",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "its family was never swept: args.mask is a tensor (swept: None));" in done.stderr
    assert "absent" not in done.stderr and "null" not in done.stderr


SCALE_BY_TENSOR = """\
import torch
from tunedsl import autotune, cdiv
from kernels_twentythird import scale_rows


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = torch.tensor(2.0)  # a 0-d tensor, as a learned scale often is

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        autotune(space=dict(BLOCK=[64, 128]), blocks=cdiv(n, $BLOCK),
                 scale_rows(x, out, n, ALPHA, BLOCK=$BLOCK))
        return out


x = torch.randn(300)
torch.testing.assert_close(Scale()(x), x * 2)
print("ok")
"""


def test_a_0d_tensor_given_for_a_number_is_named_with_the_fix(tmp_path: Path) -> None:
    """A 0-d tensor passed where the kernel multiplies by a number failed every
    configuration with Triton's "invalid operands of type pointer<fp32> and
    triton.language.float32" alone. The error now names the argument as a 0-d tensor, which
    Triton passes as a pointer, and the fix (a Python number); with it the module runs."""
    done = run_script(tmp_path, "scale_tensor.py", SCALE_BY_TENSOR.replace("ALPHA", "self.alpha"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "TuningError: " in done.stderr and "scale_tensor.py:14:9 (scale_rows)" in done.stderr
    assert "`alpha` is a 0-d tensor, which Triton passes as a pointer" in done.stderr
    assert "pass a Python number (the tensor's .item())" in done.stderr
    fixed = SCALE_BY_TENSOR.replace("ALPHA", "self.alpha.item()")
    done = run_script(tmp_path, "scale_number.py", fixed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
