"""More kernels the gallery does not have, tuned by DSL sites on a CUDA GPU, each checked
against torch or a plain Triton launch, in a cold process and again in a warm one (the
second run must decide every key from the first run's records): a seeded dropout whose
seed is a runtime argument (Triton keys 1 and multiples of 16 apart), a string
``tl.constexpr``, an optional pointer passed as ``None`` and as a tensor, float, int and
bool scalars, a grouped GEMM reading a table of pointers, host tensor descriptors whose
block shape is a ``$`` field, device-side descriptors (``triton.set_allocator``), strided
views of one storage, empty and one-element calls, five dtypes at one site, a decided key
captured in a CUDA graph, two sites of one kernel with different spaces, and a side stream
(and the second GPU, where there is one).

One script holds them all and runs under ``tunedsl run`` (as a user runs a kernel script),
printing one JSON line per case. Skipped without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

SCRIPT = r"""
import json

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tunedsl import autotune, cdiv

dev = "cuda"


def report(case, ok, sources):
    print("CASE " + json.dumps(dict(case=case, ok=bool(ok), sources=sources)), flush=True)


@triton.jit
def drop(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def dropout_seed():
    n = 100003
    x = torch.randn(n, device=dev)
    sources, ok = [], True
    for seed in [1, 16, 123, 1, 7]:
        out, ref = torch.empty_like(x), torch.empty_like(x)
        r = autotune(space=dict(BLOCK=[256, 1024], num_warps=[2, 4]), blocks=cdiv(n, $BLOCK),
                     drop(x, out, n, 0.5, seed, BLOCK=$BLOCK))
        drop[(triton.cdiv(n, 512),)](x, ref, n, 0.5, seed, BLOCK=512)
        sources.append(r.source)
        ok &= torch.equal(out, ref)
    report("dropout_seed", ok, sources)


@triton.jit
def act(x_ptr, y_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if ACT == "relu":
        y = tl.maximum(x, 0.0)
    elif ACT == "leaky":
        y = tl.where(x > 0, x, 0.01 * x)
    else:
        y = x * 3.0
    tl.store(y_ptr + offs, y, mask=m)


def string_constexpr():
    n = 5000
    x = torch.randn(n, device=dev)
    refs = {"relu": torch.relu(x), "leaky": torch.nn.functional.leaky_relu(x, 0.01),
            "other": x * 3}
    sources, ok = [], True
    for a in ["relu", "leaky", "other", "relu", "leaky"]:
        y = torch.empty_like(x)
        r = autotune(space=dict(BLOCK=[128, 512]), blocks=cdiv(n, $BLOCK),
                     act(x, y, n, ACT=a, BLOCK=$BLOCK))
        sources.append(r.source)
        ok &= torch.allclose(y, refs[a])
    report("string_constexpr", ok, sources)


@triton.jit
def add_bias(x_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if b_ptr is not None:
        x += tl.load(b_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x, mask=m)


def optional_none():
    n = 4096
    x, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
    sources, ok = [], True
    for bias in [None, b, None, b]:
        y = torch.empty_like(x)
        r = autotune(space=dict(BLOCK=[128, 1024]), blocks=cdiv(n, $BLOCK),
                     add_bias(x, bias, y, n, BLOCK=$BLOCK))
        sources.append(r.source)
        ok &= torch.allclose(y, x if bias is None else x + b)
    report("optional_none", ok, sources)


@triton.jit
def axpy(x_ptr, y_ptr, n, alpha, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if flag:
        x = -x
    tl.store(y_ptr + offs, alpha * x, mask=m)


def scalars():
    sources, ok = [], True
    for n, alpha, flag in [(1000, 1.0, False), (1000, 2.0, False), (1000, 1.0, True),
                           (1, 2.5, True), (16, 1, False), (16, 3, True)]:
        x = torch.randn(n, device=dev)
        y = torch.empty_like(x)
        r = autotune(space=dict(BLOCK=[128, 1024]), blocks=cdiv(n, $BLOCK),
                     axpy(x, y, n, alpha, flag, BLOCK=$BLOCK))
        sources.append(r.source)
        ok &= torch.allclose(y, alpha * (-x if flag else x))
    report("scalars", ok, sources)


@triton.jit
def grouped(a_ptrs, b_ptrs, c_ptrs, sizes, BM: tl.constexpr, BN: tl.constexpr,
            BK: tl.constexpr):
    g = tl.program_id(1)
    M = tl.load(sizes + g * 3)
    N = tl.load(sizes + g * 3 + 1)
    K = tl.load(sizes + g * 3 + 2)
    tiles_n = tl.cdiv(N, BN)
    pid = tl.program_id(0)
    if pid >= tl.cdiv(M, BM) * tiles_n:
        return
    a = tl.load(a_ptrs + g).to(tl.pointer_type(tl.float16))
    b = tl.load(b_ptrs + g).to(tl.pointer_type(tl.float16))
    c = tl.load(c_ptrs + g).to(tl.pointer_type(tl.float16))
    rm = (pid // tiles_n) * BM + tl.arange(0, BM)
    rn = (pid % tiles_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def pointer_table():
    shapes = [(100, 70, 64), (33, 128, 96), (256, 40, 32)]
    A = [torch.randn(m, k, device=dev, dtype=torch.float16) for m, n, k in shapes]
    B = [torch.randn(k, n, device=dev, dtype=torch.float16) for m, n, k in shapes]
    C = [torch.zeros(m, n, device=dev, dtype=torch.float16) for m, n, k in shapes]

    def table(ts):
        return torch.tensor([t.data_ptr() for t in ts], device=dev, dtype=torch.int64)

    def tiles(bm, bn):
        return max(triton.cdiv(m, bm) * triton.cdiv(n, bn) for m, n, k in shapes)

    sizes = torch.tensor([v for s in shapes for v in s], device=dev, dtype=torch.int32)
    r = autotune(space=dict(BM=[32, 64], BN=[32, 64], BK=[32]),
                 blocks=(tiles($BM, $BN), len(shapes)), key=tuple(shapes),
                 grouped(table(A), table(B), table(C), sizes, BM=$BM, BN=$BN, BK=$BK))
    ok = all(torch.allclose(c.float(), a.float() @ b.float(), atol=1e-1, rtol=1e-2)
             for a, b, c in zip(A, B, C))
    report("pointer_table", ok, [r.source])


@triton.jit
def twice_desc(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    x = in_desc.load([pm * BM, pn * BN])
    out_desc.store([pm * BM, pn * BN], x * 2)


def host_descriptor():
    sources, ok = [], True
    for M, N in [(300, 512), (1024, 256), (300, 512)]:
        x = torch.randn(M, N, device=dev, dtype=torch.float16)
        y = torch.empty_like(x)
        r = autotune(space=dict(BM=[32, 64], BN=[64, 128]),
                     blocks=(cdiv(M, $BM), cdiv(N, $BN)), key=(M, N),
                     twice_desc(TensorDescriptor.from_tensor(x, [$BM, $BN]),
                                TensorDescriptor.from_tensor(y, [$BM, $BN]), BM=$BM, BN=$BN))
        sources.append(r.source)
        ok &= torch.equal(y, x * 2)
    report("host_descriptor", ok, sources)


@triton.jit
def twice_made(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    din = tl.make_tensor_descriptor(x, [M, N], [N, 1], [BM, BN])
    dout = tl.make_tensor_descriptor(y, [M, N], [N, 1], [BM, BN])
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    dout.store([pm * BM, pn * BN], din.load([pm * BM, pn * BN]) * 2)


def device_descriptor():
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device=dev,
                                                                     dtype=torch.int8))
    sources, ok = [], True
    for M, N in [(320, 512), (1024, 256), (320, 512)]:
        x = torch.randn(M, N, device=dev, dtype=torch.float16)
        y = torch.empty_like(x)
        r = autotune(space=dict(BM=[32, 64], BN=[64, 128]),
                     blocks=(cdiv(M, $BM), cdiv(N, $BN)),
                     twice_made(x, y, M, N, BM=$BM, BN=$BN))
        sources.append(r.source)
        ok &= torch.equal(y, x * 2)
    report("device_descriptor", ok, sources)


@triton.jit
def add2d(x, y, o, M, N, sxm, sxn, sym, syn, som, son, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    a = tl.load(x + rm[:, None] * sxm + rn[None, :] * sxn, mask=m)
    b = tl.load(y + rm[:, None] * sym + rn[None, :] * syn, mask=m)
    tl.store(o + rm[:, None] * som + rn[None, :] * son, a + b, mask=m)


def strided_views():
    base, other = torch.randn(300, 200, device=dev), torch.randn(200, 300, device=dev)
    sources, ok = [], True
    for x, y in [(base, other.t()), (base[:, 1:], other.t()[:, 1:]), (base.t(), other),
                 (base[::2], other.t()[::2])]:
        o = torch.empty(x.shape, device=dev)
        M, N = x.shape
        r = autotune(space=dict(BM=[16, 64], BN=[16, 64]), blocks=(cdiv(M, $BM), cdiv(N, $BN)),
                     add2d(x, y, o, M, N, *x.stride(), *y.stride(), *o.stride(), BM=$BM, BN=$BN))
        sources.append(r.source)
        ok &= torch.allclose(o, x + y)
    report("strided_views", ok, sources)


@triton.jit
def double(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def empty_and_tiny():
    sources, ok = [], True
    for n in [0, 1, 17, 0, 100000]:
        x = torch.randn(n, device=dev)
        y = torch.zeros_like(x)
        r = autotune(space=dict(BLOCK=[64, 256]), blocks=cdiv(n, $BLOCK), double(x, y, n, BLOCK=$BLOCK))
        sources.append(r.source)
        ok &= torch.equal(y, x * 2)
    report("empty_and_tiny", ok, sources)


@triton.jit
def fma(x, y, z, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m) * tl.load(y + offs, mask=m) + tl.load(z + offs, mask=m)
    tl.store(o + offs, v, mask=m)


def dtypes():
    sources, ok = [], True
    for dt in [torch.float64, torch.int8, torch.bfloat16, torch.float16, torch.int32,
               torch.float64]:
        if dt.is_floating_point:
            x, y, z = (torch.randn(3001, device=dev, dtype=dt) for _ in range(3))
        else:
            x, y, z = (torch.randint(-5, 5, (3001,), device=dev, dtype=dt) for _ in range(3))
        o = torch.empty_like(x)
        n = x.numel()
        r = autotune(space=dict(BLOCK=[128, 512], num_warps=[1, 4]), blocks=cdiv(n, $BLOCK),
                     fma(x, y, z, o, n, BLOCK=$BLOCK))
        sources.append(r.source)
        want = x.double() * y.double() + z.double()
        ok &= torch.allclose(o.double(), want, atol=0.1 if dt == torch.bfloat16 else 1e-2)
    report("dtypes", ok, sources)


@triton.jit
def scale(x, y, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * s, mask=offs < n)


def scaled(x, y, s):
    n = x.numel()
    return autotune(space=dict(BLOCK=[64, 256, 1024]), blocks=cdiv(n, $BLOCK),
                    scale(x, y, n, s, BLOCK=$BLOCK))


def cuda_graph():
    x = torch.randn(77777, device=dev)
    y = torch.zeros_like(x)
    first = scaled(x, y, 3.0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = scaled(x, y, 3.0)
    y.zero_()
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    report("cuda_graph", torch.allclose(y, x * 3.0), [first.source, captured.source])


def small_space(x, y, n):
    return autotune(space=dict(BLOCK=[64, 128]), blocks=cdiv(n, $BLOCK),
                    double(x, y, n, BLOCK=$BLOCK))


def large_space(x, y, n):
    return autotune(space=dict(BLOCK=[512, 1024], num_warps=[4, 8]), blocks=cdiv(n, $BLOCK),
                    double(x, y, n, BLOCK=$BLOCK))


def two_sites_one_kernel():
    x = torch.randn(5000, device=dev)
    sources, ok = [], True
    for site in [small_space, large_space, small_space, large_space]:
        y = torch.zeros_like(x)
        r = site(x, y, 5000)
        sources.append(r.source)
        ok &= torch.equal(y, 2 * x) and r.config.BLOCK in ((64, 128) if site is small_space
                                                           else (512, 1024))
    report("two_sites_one_kernel", ok, sources)


def streams_and_devices():
    sources, ok = [], True
    side = torch.cuda.Stream()
    x = torch.randn(1 << 20, device=dev)
    with torch.cuda.stream(side):
        y = torch.empty_like(x)
        sources.append(scaled(x, y, 1.5).source)
    side.synchronize()
    ok &= torch.equal(y, x * 1.5)
    if torch.cuda.device_count() > 1:  # the same key on the second GPU: its own binary
        with torch.cuda.device(1):
            x1 = torch.randn(1 << 20, device="cuda:1")
            y1 = torch.empty_like(x1)
            sources.append(scaled(x1, y1, 1.5).source)
            torch.cuda.synchronize(1)
            ok &= torch.equal(y1, x1 * 1.5)
    report("streams_and_devices", ok, sources)


for case in [dropout_seed, string_constexpr, optional_none, scalars, pointer_table,
             host_descriptor, device_descriptor, strided_views, empty_and_tiny, dtypes,
             cuda_graph, two_sites_one_kernel, streams_and_devices]:
    case()
"""

CASES = ("dropout_seed", "string_constexpr", "optional_none", "scalars", "pointer_table",
         "host_descriptor", "device_descriptor", "strided_views", "empty_and_tiny", "dtypes",
         "cuda_graph", "two_sites_one_kernel", "streams_and_devices")  # fmt: skip


def run_script(script: Path, cache: Path) -> dict[str, dict[str, Any]]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(cache))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "tunedsl", "run", str(script)], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("CASE "):
            case = json.loads(line[5:])
            found[case["case"]] = case
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The script's cases in a cold process, then in a warm one with the same cache."""
    root = tmp_path_factory.mktemp("kernels_second")
    script = root / "more_kernels_not_in_gallery.py"
    script.write_text(SCRIPT)
    return run_script(script, root / "cache"), run_script(script, root / "cache")


@pytest.mark.parametrize("case", CASES)
def test_a_kernel_tunes_computes_right_and_the_next_process_decides_it_from_records(
    runs: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]], case: str
) -> None:
    cold, warm = runs[0][case], runs[1][case]
    assert cold["ok"] and warm["ok"], (cold, warm)
    assert len(cold["sources"]) == len(warm["sources"]), (cold, warm)
    for first, second in zip(cold["sources"], warm["sources"], strict=True):
        # What the first process tuned, the second reads from its record; what the first
        # decided from memory (a key met before) or found empty, the second does the same.
        assert second == {"tuned": "disk"}.get(first, first), (cold, warm)
    assert "tuned" in cold["sources"], cold
