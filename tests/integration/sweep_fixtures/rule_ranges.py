"""Rules fixture: a kernel with an int flag (``HAS_BIAS=0/1``, a constexpr), a kernel over
two sizes (M by N) in any dtype, a strided gather whose stride and seed are int arguments,
and one over the first N elements of a static buffer whose ``prune=`` reads N.
``python rule_ranges.py CALL...`` runs each call (``flag:N:BIAS``, ``mn:M:N[:DTYPE]``,
``live:N``, ``stride:N:STRIDE:SEED``, a ``!`` suffix for ``mode="cached"``) in this process
and prints each result's source."""

import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def biased(a, c, n, HAS_BIAS: tl.constexpr, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    x = tl.load(a + offs, mask=m)
    if HAS_BIAS:
        x = x + 1.0
    tl.store(c + offs, x, mask=m)


def flag(n: int, bias: int, mode: str = "on"):
    a, c = torch.randn(n), torch.empty(n)
    res = autotune_launch(
        biased,
        space={"tile": [32, 64, 128, 256]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, c, n),
        kwargs=lambda cfg: {"HAS_BIAS": bias, "TILE": cfg.tile},
        name="rule-flag",
        mode=mode,
    )
    assert torch.equal(c, a + 1.0 if bias else a)
    return res


@triton.jit
def add_one(a, c, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    off = rm[:, None] * N + rn[None, :]
    tl.store(c + off, tl.load(a + off, mask=m) + 1, mask=m)


def mn(m: int, n: int, dtype: str = "float32", mode: str = "on"):
    a = torch.randn(m, n).to(getattr(torch, dtype))
    c = torch.empty_like(a)
    res = autotune_launch(
        add_one,
        space={"bm": [16, 64], "bn": [16, 64]},
        grid=lambda cfg: (cdiv(m, cfg.bm), cdiv(n, cfg.bn)),
        args=(a, c, m, n),
        kwargs=lambda cfg: {"BM": cfg.bm, "BN": cfg.bn},
        name="rule-mn",
        mode=mode,
    )
    assert torch.equal(c, a + 1)
    return res


@triton.jit
def strided(a, c, n, stride, seed, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs * stride, mask=m) + seed % 7, mask=m)


def gather(n: int, stride: int, seed: int, mode: str = "on"):
    """c = a[::stride][:n] + seed % 7: ``stride`` and ``seed`` are int arguments, whose
    classes Triton compiles apart (equal to 1, 32- or 64-bit); ``a`` is one size for every
    stride (up to 16), so they change no shape."""
    a, c = torch.randn(n * 16), torch.empty(n)
    res = autotune_launch(
        strided,
        space={"tile": [32, 64, 128, 256]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, c, n, stride, seed),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        name="rule-stride",
        mode=mode,
    )
    assert torch.equal(c, a[::stride][:n] + seed % 7)
    return res


# Static buffers, as a server under CUDA graphs keeps them: only the first n elements are
# live, so n is in no tensor's shape; prune= reads it, which puts its value in the key.
STATIC_A, STATIC_C = torch.randn(8192), torch.zeros(8192)


def live(n: int, mode: str = "on"):
    res = autotune_launch(
        biased,
        space={"tile": [32, 64, 128, 256]},
        prune=lambda configs, args: [c for c in configs if c.tile <= args["n"]],
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(STATIC_A, STATIC_C, n),
        kwargs=lambda cfg: {"HAS_BIAS": 0, "TILE": cfg.tile},
        name="rule-live",
        mode=mode,
    )
    assert torch.equal(STATIC_C[:n], STATIC_A[:n])
    return res


@workload
def case(n=256, bias=0, m=0, live_n=0, stride=0, seed=3):
    """``m`` given: the M by N kernel; ``live_n``: the static buffer's; ``stride``: the
    strided gather's; else the flag kernel."""
    if m:
        mn(m, n)
    elif live_n:
        live(live_n)
    elif stride:
        gather(n, stride, seed)
    else:
        flag(n, bias)


if __name__ == "__main__":
    for call in sys.argv[1:]:
        what, *parts = call.rstrip("!").split(":")
        mode = "cached" if call.endswith("!") else "on"
        if what == "flag":
            res = flag(int(parts[0]), int(parts[1]), mode)
        elif what == "live":
            res = live(int(parts[0]), mode)
        elif what == "stride":
            res = gather(*map(int, parts), mode=mode)
        else:
            res = mn(int(parts[0]), int(parts[1]), *parts[2:], mode=mode)
        print(f"{call} {res.source}", flush=True)
