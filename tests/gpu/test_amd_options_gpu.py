"""AMD's Triton configurations (``triton.Config({..., "waves_per_eu": 2})``) ported to
tunedsl and run on a CUDA GPU: the option reaches the kernel's launch, which Triton's CUDA
backend rejects; every configuration fails with the option's backend and the fix named,
not Triton's bare ``KeyError``. Skipped without a GPU (the cross-compiled counterpart runs
everywhere: tests/integration/test_ported_autotuners_twentieth.py)."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


def test_waves_per_eu_in_the_launch_is_named_as_amds_on_a_cuda_gpu() -> None:
    # ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
    import triton
    import triton.language as tl

    from tunedsl import autotune_launch, cdiv
    from tunedsl.errors import TuningError

    @triton.jit
    def add_one(x, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(1000, device="cuda")
    with pytest.raises(TuningError) as info:
        autotune_launch(add_one, space={"BLOCK": [64, 128], "waves_per_eu": [1, 2]},
                        grid=lambda c: (cdiv(1000, c.BLOCK),), args=(x, 1000),
                        kwargs=lambda c: {"BLOCK": c.BLOCK, "waves_per_eu": c.waves_per_eu},
                        name="amd-waves-on-cuda")  # fmt: skip
    said = str(info.value)
    assert "`waves_per_eu=` is an option of Triton's AMD (hip) backend" in said, said
    assert "this launch compiles for cuda:" in said and "occupancy=" in said, said
    assert not x.any()
