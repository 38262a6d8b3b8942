"""``isolate=True`` on a real GPU with kernels the worker cannot import: defined in a
function body, so sent by value (their function, ``triton.jit`` options and source) and made
Triton kernels again in the worker, a ``@triton.constexpr_function`` they call included.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
The CPU side (the worker's kernel compiles to the caller's binary for ``cuda:90``) is
tests/integration/test_ported_autotuners_seventeenth.py.
"""

from __future__ import annotations

import pytest

from tunedsl import knobs

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if knobs.triton_interpret_env() or not torch.cuda.is_available():
    # Skip before importing triton: importing it here would fix Triton's interpreter
    # setting for the whole test process (see tests/conftest.py).
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from tunedsl import autotune_launch, cdiv  # noqa: E402
from tunedsl.backends import isolated  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_workers():
    isolated.shutdown_workers()
    yield
    isolated.shutdown_workers()


SCRIPT = """
import triton
import triton.language as tl


@triton.constexpr_function
def times(v):
    return v * 3


@triton.jit(do_not_specialize_on_alignment=["x"])
def tripled(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * times(1), mask=offs < n)
"""


@pytest.mark.parametrize("offset", [0, 1])
def test_a_kernel_of_a_script_is_tuned_in_a_worker(tmp_path, offset: int) -> None:
    # A script's kernel (run as a module no worker can import, as `tunedsl run` runs one):
    # with cloudpickle 3.1 and later the worker got its code as from <dynamic-code>, Triton
    # could not read its source, and every tuning failed ("@jit functions should be defined
    # in a Python file"); the constexpr function could not be sent at all (a lock inside),
    # and do_not_specialize_on_alignment was dropped. The script is edited after it runs.
    path = tmp_path / f"by_value_{offset}.py"
    path.write_text(SCRIPT)
    namespace = {"__name__": f"by_value_{offset}", "__file__": str(path)}
    exec(compile(SCRIPT, str(path), "exec"), namespace)
    path.write_text("# edited since\n")
    n = 1 << 16
    x = torch.randn(n + offset, device="cuda")[offset:]  # offset 1: not 16-byte aligned
    y = torch.zeros(n, device="cuda")
    res = autotune_launch(
        namespace["tripled"],
        space={"BLOCK": [256, 1024]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(x, y, n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        isolate=True,
        name=f"gpu-isolated-by-value-{offset}",
    )
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    torch.testing.assert_close(y, x * 3)
