"""A twentieth batch of other autotuners' test suites, ported to tunedsl: Triton's
``key=`` naming an argument the kernel does not have (python/test/unit/runtime/
test_autotuner.py; ``Autotuner.run`` keys on the names it finds among the arguments and
leaves the others out), as Unsloth's and Liger-Kernel's row kernels are keyed on
``n_cols``; AMD's Triton configurations with ``waves_per_eu`` and
``matrix_instr_nonkdim`` (third_party/amd tests, ``triton.Config({..., "waves_per_eu":
2})``), cross-compiled here for ``hip:gfx942`` and for ``cuda:90``.

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter through ``autotune_launch``, and real cross-compiles
through ``tunedsl precompile --target`` in a subprocess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tunedsl import autotune_launch
from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _scale(x: torch.Tensor, out: torch.Tensor, key: Any, name: str) -> Any:
    from ported_kernels_twentieth import scale_rows

    rows, cols = x.shape
    return autotune_launch(scale_rows, space={"BLOCK": [16, 64]}, grid=(rows,),
                           args=(x, out, rows, cols, 2.0),
                           kwargs=lambda c: {"BLOCK": c.BLOCK}, key=key, name=name)  # fmt: skip


@pytest.mark.parametrize("key", [["n_rows", "N_COLS"], ("n_cols", "dtype")])
def test_a_key_of_names_one_of_them_absent_is_named_not_shared(key: Any) -> None:
    """Triton keys on the names of ``key=`` it finds among the kernel's arguments and
    leaves out a name it does not find (``N_COLS`` for ``n_cols``, or a ``"dtype"`` no
    argument is called), so ``key=["n_rows", "N_COLS"]`` still tunes per ``n_rows``.
    tunedsl's ``key=`` is a value: such a list is the same on every call, and so every
    shape shared the first call's decision, without a word, unless every name was a
    parameter. A list or tuple of strings naming any parameter is now named with the fix,
    the names the kernel lacks said to be left out by Triton."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py (Autotuner.run's key)
    # ported from: unslothai/unsloth unsloth/kernels (row kernels keyed on n_cols)
    x, out = torch.randn(4, 40), torch.zeros(4, 40)
    with pytest.raises(UsageError) as info:
        _scale(x, out, key, f"absent-{key[1]}")
    said = str(info.value)
    present = [k for k in key if k in ("n_rows", "n_cols")]
    absent = [k for k in key if k not in present]
    assert f"key={key!r} names parameters" in said, said
    assert f"`{absent[0]}` is not a parameter" in said and "triton.autotune leaves" in said, said
    assert said.endswith(f"key={present[0]}"), said
    assert not out.any()  # nothing launched


def test_a_key_of_strings_naming_no_parameter_is_a_value() -> None:
    """A tuple of strings none of which is a parameter is a value like any other (labels
    such as ``("fp16", "rowmajor")``): each distinct value is its own decision. Triton,
    finding none of such names, keys on the dtypes alone; so does this constant key."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py (Autotuner.run's key)
    x, out = torch.randn(4, 40), torch.zeros(4, 40)
    first = _scale(x, out, ("fp32", "rows"), "labels")
    assert first.source == "tuned" and torch.equal(out, x * 2.0)
    other = _scale(x, out, ("fp32", "cols"), "labels")
    assert other.source == "tuned" and other.key != first.key
    out.zero_()
    again = _scale(torch.randn(8, 100), torch.zeros(8, 100), ("fp32", "rows"), "labels")
    assert again.source == "memory" and again.key == first.key
