"""Kernels of the twenty-fifth set (kernels_twentyfifth.py), written as an ML-systems
engineer new to tunedsl writes them from the docs: a training script whose top level runs in
phases (a setting bound again between them), run through ``tunedsl run`` with Triton's
interpreter, each result checked against torch."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_helpers import run_script

pytestmark = pytest.mark.needs_triton


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
    done = run_script(tmp_path, "phases.py", PHASES)
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
    done = run_script(tmp_path, "phases.py", script)
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
    done = run_script(tmp_path, "keyed.py", KEYED_BY_A_SET)
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
    done = run_script(tmp_path, "optional.py", OPTIONAL_OUTPUT_VERIFIED)
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
    done = run_script(tmp_path, "dtypes.py", DTYPE_IN_KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


TRAINING = """\
import torch
import triton
from tunedsl import autotune, cdiv
from kernels_twentyfifth import (rope_qk, adamw_step, histogram, segment_sum, maxpool2d,
                                 scale_2d, gelu_into, bf16_matvec, paged_gather)

torch.manual_seed(0)
NB = 16
LR = 1e-2


def rope(q, k, cos, sin):
    T, H, D = q.shape
    return autotune(space=dict(BH=[1, 2, 4]), restore_value=["q", "k"],
                    blocks=(T, cdiv(H, $BH)), key=(T, H, D),
                    rope_qk(q, k, cos, sin, T, H, q.stride(0), k.stride(0), HALF=D // 2, BH=$BH))


def adamw(p, g, m, v, step):
    n = p.numel()
    b1, b2 = 0.9, 0.999
    return autotune(space=dict(BLOCK=[64, 128, 256]), restore_value=["p", "g", "m", "v"],
                    blocks=cdiv(n, $BLOCK),
                    adamw_step(p, g, m, v, n, LR, b1, b2, 1e-8, 0.01, 1 - b1 ** step, 1 - b2 ** step,
                               BLOCK=$BLOCK))


def hist(x):
    bins = torch.empty(NB, dtype=torch.int32)
    n = x.numel()
    autotune(space=dict(BLOCK=[64, 256]), reset_to_zero=["bins"], blocks=cdiv(n, $BLOCK),
             histogram(x, bins, n, NB=NB, BLOCK=$BLOCK))
    return bins


def segsum(x, offsets):
    S = offsets.numel() - 1
    D = x.shape[1]
    out = torch.empty(S, D, dtype=torch.float32)
    autotune(space=dict(BLOCK=[2, 4, 8]), blocks=S, verify=True, rtol=1e-4, atol=1e-4,
             segment_sum(x, offsets, out, D, BLOCK=$BLOCK, BD=triton.next_power_of_2(D)))
    return out


def pool(x, K):
    N, C, H, W = x.shape
    OH, OW = H // K, W // K
    out = torch.empty(N, C, OH, OW, dtype=torch.float32)
    autotune(space=dict(BW=[4, 8, 16]), blocks=(N * C * OH, cdiv(OW, $BW)),
             maxpool2d(x, out, H, W, OH, OW, K=K, BW=$BW))
    return out


def scale(x, alpha):
    out = torch.empty(x.shape, dtype=x.dtype)
    R, C = x.shape
    autotune(space=dict(BR=[8, 16], BC=[8, 16]), blocks=(cdiv(R, $BR), cdiv(C, $BC)),
             scale_2d(x, out, R, C, x.stride(0), x.stride(1), out.stride(0), out.stride(1), alpha,
                      BR=$BR, BC=$BC))
    return out


def gelu_(x, out=None):
    out = x if out is None else out
    n = x.numel()
    autotune(space=dict(BLOCK=[128, 256]), blocks=cdiv(n, $BLOCK), gelu_into(x, out, n, BLOCK=$BLOCK))
    return out


def matvec(a, x):
    M, K = a.shape
    out = torch.empty(M, dtype=torch.float32)
    autotune(space=dict(BM=[8, 16], BK=[16, 32]), blocks=cdiv(M, $BM), key=(M, K),
             prune=lambda cs, args: [c for c in cs if c.BK <= max(16, args["K"])],
             bf16_matvec(a, x, out, M, K, a.stride(0), BM=$BM, BK=$BK))
    return out


def ref_gelu(x):
    return torch.nn.functional.gelu(x.float(), approximate="tanh")


results = []
for step, n in enumerate([300, 700, 300, 1000], start=1):
    T, H, D = 4, 3, 8
    q, k = torch.randn(T, H, D), torch.randn(T, H, D)
    ang = torch.randn(T, D // 2)
    cos, sin = ang.cos().contiguous(), ang.sin().contiguous()
    q0, k0 = q.clone(), k.clone()
    r = rope(q, k, cos, sin)
    def ref(x):
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        c, s = cos[:, None], sin[:, None]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    assert torch.allclose(q, ref(q0), atol=1e-5), "rope q"
    assert torch.allclose(k, ref(k0), atol=1e-5), "rope k"

    p, g = torch.randn(n), torch.randn(n)
    m, v = torch.zeros(n), torch.zeros(n)
    pr = p.clone(); gr = g.clone()
    opt = torch.optim.AdamW([torch.nn.Parameter(pr)], lr=LR, weight_decay=0.01, eps=1e-8)
    opt.param_groups[0]["params"][0].grad = gr
    # reference one step
    pref = pr.clone()
    mm = 0.1 * gr; vv = 0.001 * gr * gr
    pref = pref * (1 - LR * 0.01) - LR * (mm / (1 - 0.9 ** step)) / ((vv / (1 - 0.999 ** step)).sqrt() + 1e-8)
    adamw(p, g, m, v, step)
    assert torch.allclose(p, pref, atol=1e-5), ("adamw", (p - pref).abs().max())
    assert torch.allclose(m, mm, atol=1e-6) and torch.allclose(v, vv, atol=1e-6), "adamw mv"
    assert (g == 0).all(), "g zero"

    x = torch.randint(-2, NB + 2, (n,), dtype=torch.int32)
    bins = hist(x)
    assert torch.equal(bins, torch.bincount(x.clamp(0, NB - 1), minlength=NB).int()), ("hist", bins)

    lens = torch.randint(0, 9, (5,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32)
    xs = torch.randn(int(offsets[-1]), 20)
    out = segsum(xs, offsets)
    refs = torch.stack([xs[offsets[i]:offsets[i + 1]].sum(0) for i in range(5)])
    assert torch.allclose(out, refs, atol=1e-4), "segsum"

    xi = torch.randn(2, 3, 8, 12)
    assert torch.equal(pool(xi, 2), torch.nn.functional.max_pool2d(xi, 2)), "pool"

    base = torch.randn(24, 40)
    for view in (base.t(), base[:, 3:30], base[::2]):
        assert torch.allclose(scale(view, 2.0), view * 2.0), "scale view"

    y = torch.randn(n)
    ry = ref_gelu(y)
    gelu_(y)
    assert torch.allclose(y, ry, atol=1e-5), ("gelu alias", (y - ry).abs().max())
    yb = torch.randn(n).bfloat16()
    ob = torch.empty(n, dtype=torch.float32)
    gelu_(yb, ob)
    assert torch.allclose(ob, ref_gelu(yb), atol=1e-2), "gelu bf16"

    a = torch.randn(20, n // 50, dtype=torch.bfloat16)
    xv = torch.randn(n // 50, dtype=torch.bfloat16)
    assert torch.allclose(matvec(a, xv), a.float() @ xv.float(), atol=1e-3, rtol=1e-3), "matvec"
    cache = torch.randn(10, 4, 16)
    table = torch.randint(0, 10, (3, 5), dtype=torch.int32)
    L = 3 + step * 4
    kv = torch.empty(3, L, 16)
    autotune(space=dict(BT=[2, 8]), blocks=(3, cdiv(L, $BT)), key=(L,),
             paged_gather(cache, table, kv, L, 5, D=16, PAGE=4, BT=$BT))
    t = torch.arange(L)
    assert torch.equal(kv, cache[table[:, t // 4].long(), t % 4]), "paged gather"
    results.append(r.source)
print("OK", results)
"""


def test_a_training_script_runs_cold_then_warm(tmp_path: Path) -> None:
    """The set's kernels as a training script calls them at its top level over changing
    sizes (rotary in place on q and k, a fused AdamW step on four tensors, a histogram
    into zeroed bins, a ragged segment sum, a 2-D max pool, strided and sliced views, an
    output that is its input, bf16 data into fp32 accumulators), each checked against
    torch: tuned cold, then every key decided from its record in the next process."""
    cold = run_script(tmp_path, "train.py", TRAINING)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout.strip() == "OK ['tuned', 'memory', 'memory', 'memory']", cold.stdout
    warm = run_script(tmp_path, "train.py", TRAINING)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.strip() == "OK ['disk', 'memory', 'memory', 'memory']", warm.stdout


# A settings dict (or object) bound once before the loop, whose item the loop sets: the
# first step keeps every BLOCK up to 1024, the second only up to 128.
SETTINGS_CHANGED_IN_PLACE = """\
import torch
from types import SimpleNamespace
from tunedsl import autotune, cdiv
from kernels_twentyfifth import gelu_into

hp = MADE
for widest in (1024, 128):
    CHANGE
    n = 3000
    x, out = torch.randn(n), torch.empty(n)
    r = autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK), key=n,
                 prune=lambda configs, args: [c for c in configs if c.BLOCK <= READ],
                 gelu_into(x, out, n, BLOCK=$BLOCK))
    assert r.config.BLOCK <= READ, (widest, r.config, r.source)
print("ok")
"""


@pytest.mark.parametrize(
    ("made", "change", "read", "label"),
    [
        ('{"widest": 1024}', 'hp["widest"] = widest', 'hp["widest"]', "hp['widest']"),
        ('{"widest": 1024}', "hp.update(widest=widest)", 'hp["widest"]', "hp['widest']"),
        ("SimpleNamespace(widest=1024)", "hp.widest = widest", "hp.widest", "hp.widest"),
    ],
    ids=["item", "update", "attribute"],
)
def test_a_setting_the_loop_changes_in_place_is_named(
    tmp_path: Path, made: str, change: str, read: str, label: str
) -> None:
    """A dict or object bound once before a script's top-level loop, whose item or attribute
    the loop sets (``hp["widest"] = widest``, ``hp.update(...)``, ``hp.widest = ...``), read
    by a prune: no statement rebound ``hp``, so it was read as a constant, and the decision
    made while it allowed BLOCK=1024 was launched at the next step, whose prune drops it.
    It is named now, with the line that changes it."""
    script = SETTINGS_CHANGED_IN_PLACE.replace("MADE", made).replace("CHANGE", change)
    done = run_script(tmp_path, "settings.py", script.replace("READ", read))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"UsageError: {tmp_path / 'settings.py'}:11:9 (gelu_into)" in done.stderr
    assert f"reads `{label}` (1024) from the module, which rebinds it as it runs (line 8)" in (
        done.stderr
    )
    assert "AssertionError" not in done.stderr


SETTINGS_CHANGED_BY_A_FUNCTION = """\
import torch
from tunedsl import autotune, cdiv
from kernels_twentyfifth import gelu_into

HP = {"widest": 1024}


def set_widest(w):
    HP["widest"] = w


def scratch(w):
    hp = {}
    hp["widest"] = w
    return hp


for widest in (1024, 128):
    set_widest(widest)
    scratch(widest)
    n = 3000
    x, out = torch.randn(n), torch.empty(n)
    r = autotune(space=dict(BLOCK=[64, 128, 256, 512, 1024]), blocks=cdiv(n, $BLOCK), key=n,
                 prune=lambda configs, args: [c for c in configs if c.BLOCK <= HP["widest"]],
                 gelu_into(x, out, n, BLOCK=$BLOCK))
    assert r.config.BLOCK <= HP["widest"], (widest, r.config, r.source)
print("ok")
"""


def test_a_setting_a_function_changes_in_place_in_the_loop_is_named(tmp_path: Path) -> None:
    """``set_widest(w)`` in the loop sets ``HP["widest"]`` of the module's settings dict (no
    ``global`` statement is needed to change it in place), read by a prune: it was read as
    a constant, and the decision made at 1024 was launched at 128. It is named now, with the
    line of the call; a function changing a dict of its own (``scratch``) is no such call."""
    done = run_script(tmp_path, "writer.py", SETTINGS_CHANGED_BY_A_FUNCTION)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"UsageError: {tmp_path / 'writer.py'}:23:9 (gelu_into)" in done.stderr
    assert "reads `HP['widest']` (1024) from the module, which rebinds it as it runs (line 19)" in (
        done.stderr
    )
    assert "AssertionError" not in done.stderr
    kept = SETTINGS_CHANGED_BY_A_FUNCTION.replace("    set_widest(widest)\n", "")
    done = run_script(tmp_path, "scratch.py", kept.replace("(1024, 128)", "(1024, 1024)"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
