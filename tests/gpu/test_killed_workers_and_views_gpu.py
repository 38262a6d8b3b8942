"""On a real GPU: an ``isolate=True`` worker killed for a hanging configuration leaves no
directory of compile temporaries in a ``TMPDIR`` open to all
(``backends/compile_temporaries.py``), and a configuration that writes past a view's
extent leaves the data around the view as it was, views of two storages over one memory
included (``backends/view_spans.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tunedsl import autotune_launch, cdiv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

# MODE 1 runs about 4 * 10^12 steps (a hang to the tuner: the worker is killed).
HANGS = r"""
import os, sys, tempfile
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def double_or_hang(x, y, n, TILE: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    if MODE == 1:
        acc = tl.zeros([TILE], dtype=tl.float32)
        for _ in range(0, n.to(tl.int64) * 1000000000):  # bounded at run time only
            acc += tl.load(x + offs, mask=mask, volatile=True)
        tl.store(y + offs, acc, mask=mask)
    else:
        tl.store(y + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)


n = 4096
x = torch.randn(n, device="cuda")
y = torch.empty_like(x)
result = autotune_launch(
    double_or_hang, space={"mode": [0, 1]}, grid=(cdiv(n, 256),), args=(x, y, n),
    kwargs=lambda cfg: {"TILE": 256, "MODE": cfg.mode}, isolate=True, name="hangs",
)
print("STATUSES", sorted((c.mode, r.status) for c, r in result.timings.items()))
from tunedsl.store.scratch import remove_abandoned_scratch

print("ABANDONED", remove_abandoned_scratch("tunedsl-process-"))
"""


def test_a_worker_killed_for_a_hang_on_the_gpu_leaves_no_temporary_directory(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: compile temporaries go to private directories in it
    env = dict(os.environ, TMPDIR=str(shared), TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), TUNEDSL_CONFIG_TIMEOUT="20")
    env["PYTHONPATH"] = str(REPO)
    script = tmp_path / "hangs.py"  # Triton's jit reads a kernel's source from its file
    script.write_text(HANGS)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "STATUSES [(0, 'ok'), (1, 'failed')]" in out.stdout, out.stdout + out.stderr
    assert "ABANDONED 0" in out.stdout, out.stdout  # the killed worker's was left there
    assert os.listdir(shared) == []


@triton.jit
def fill_ones(out, n, BLOCK: tl.constexpr, PADDED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if PADDED:  # a configuration's bug: masked to the padded size, and a wrong value
        end = tl.cdiv(n, BLOCK) * BLOCK
        tl.store(out + offs, tl.full([BLOCK], 2.0, tl.float32), mask=offs < end)
    else:
        tl.store(out + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < n)


def test_a_configuration_writing_past_a_slice_on_the_gpu_leaves_the_data_around_it() -> None:
    storage = torch.full((4096,), 9.0, device="cuda")
    view = storage[1024:2024]  # 1000 elements: a BLOCK of 256 pads to 1024
    n = view.numel()
    expected = storage.clone()
    expected[1024:2024] = 1.0
    autotune_launch(
        fill_ones,
        space={"BLOCK": [8, 256], "PADDED": [False, True]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(view, n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": cfg.PADDED},
        verify=lambda args: {"out": torch.ones(n, device="cuda")},
        name="fill-slice-gpu",
    )
    torch.cuda.synchronize()
    assert torch.equal(storage, expected)


@triton.jit
def copy_block(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def test_views_of_two_storages_over_one_memory_tune_and_keep_the_data_around() -> None:
    """``head`` is a second storage over the first 1200 bytes of ``whole``'s memory
    (``torch.from_dlpack``, as a CuPy or Numba array handed to torch is): one address, two
    sizes. A view of each is an argument; the tuning finishes (the window of ``whole``'s view
    had been taken from ``head``'s storage, where it does not fit: a RuntimeError from
    inside the tuning) and the memory around both is as it was."""
    whole = torch.full((1000,), 9.0, device="cuda")
    head = torch.from_dlpack(whole[:300])
    src, dst = head[0:100], whole[200:300]
    src.copy_(torch.arange(100.0, device="cuda"))
    expected = whole.clone()
    expected[200:300] = expected[0:100]
    res = autotune_launch(
        copy_block,
        space={"BLOCK": [32, 128]},
        grid=lambda cfg: (cdiv(100, cfg.BLOCK),),
        args=(src, dst, 100),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        name="two-storages-gpu",
    )
    torch.cuda.synchronize()
    assert res.source == "tuned"
    assert torch.equal(whole, expected)


@triton.jit
def add_ones(out, n, BLOCK: tl.constexpr, PADDED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if PADDED:  # a configuration's bug: masked to the padded size, and a wrong value
        end = tl.cdiv(n, BLOCK) * BLOCK
        tl.store(out + offs, tl.load(out + offs, mask=offs < end) + 2.0, mask=offs < end)
    else:
        tl.store(out + offs, tl.load(out + offs, mask=offs < n) + 1.0, mask=offs < n)


@pytest.mark.parametrize("second_storage", [False, True], ids=["one-storage", "two-storages"])
def test_a_configuration_writing_into_the_next_ones_slot_on_the_gpu(second_storage: bool) -> None:
    """The first configuration adds into 56 values past its slot, the start of the next
    configuration's slot (in ``whole``, or in ``head``, a second storage over that memory),
    and is rejected; the next one runs on the caller's values and is chosen, and the
    workspace is the caller's values plus one in its slot alone (the next configuration ran
    on the first's writes, which were put back into its slot after the tuning)."""
    n = 200
    whole = torch.full((1 << 20,), 9.0, device="cuda")
    head = torch.from_dlpack(whole[:4096]) if second_storage else whole
    slots = {0: whole[:n], 1: head[n : 2 * n]}
    expected = whole.clone()
    expected[n : 2 * n] = 10.0
    res = autotune_launch(
        add_ones,
        space=[{"slot": 0, "BLOCK": 64, "PADDED": True}, {"slot": 1, "BLOCK": 8, "PADDED": False}],
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=lambda cfg: (slots[cfg.slot], n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": cfg.PADDED},
        restore_value=["out"],
        verify=lambda args: {"out": torch.full((n,), 10.0, device="cuda")},
        name=f"add-into-the-next-slot-gpu-{second_storage}",
    )
    torch.cuda.synchronize()
    assert res.config.slot == 1
    assert torch.equal(whole, expected)


TWO_STORAGES = r"""
import sys
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def add(a, b, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


whole = torch.arange(1000, dtype=torch.float32, device="cuda")
head = torch.from_dlpack(whole[:300])  # a second storage over whole's first 1200 bytes
a, b = head[0:100], whole[600:700]
out = torch.empty(100, device="cuda")
seen = sys.argv[1]


def hook(args):  # runs in the worker, on its copies
    with open(seen, "a") as f:
        f.write(f"{args['b'].sum().item()}\n")


autotune_launch(
    add, space={"BLOCK": [32, 128]}, grid=lambda cfg: (cdiv(100, cfg.BLOCK),),
    args=(a, b, out, 100), kwargs=lambda cfg: {"BLOCK": cfg.BLOCK}, pre_hook=hook,
    isolate=True, name="two-storages-isolated",
)
torch.cuda.synchronize()
print("OUT", torch.equal(out, a + b))
"""


def test_views_of_two_storages_over_one_memory_reach_an_isolated_worker_whole(
    tmp_path: Path,
) -> None:
    """``a`` is a view of a second storage over the first 1200 bytes of ``whole``'s memory,
    ``b`` a view of ``whole`` past them: the worker measures on ``b``'s values (its
    ``pre_hook`` sees their sum, 64950), not on memory nobody wrote (only the smaller
    storage had been copied, and ``b`` rebuilt past its end)."""
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), PYTHONPATH=str(REPO))
    script, seen = tmp_path / "two_storages.py", tmp_path / "seen"
    script.write_text(TWO_STORAGES)
    out = subprocess.run(
        [sys.executable, str(script), str(seen)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OUT True" in out.stdout, out.stdout + out.stderr
    sums = set(seen.read_text().split())
    assert sums == {str(float(sum(range(600, 700))))}, sums
