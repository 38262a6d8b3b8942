"""What names a site and its records: each call of a line its own site, and the launch's
per-configuration text in the record digest. Real kernels (Triton's interpreter)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_kernels import vadd

from tunedsl import autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton

N = 256


def _tensors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b = torch.randn(N), torch.randn(N)
    return a, b, torch.empty(N), torch.empty(N)


def _grid(cfg):
    return (cdiv(N, cfg.tile),)


# -- two autotune_launch calls on one line -------------------------------------------------


def two_on_one_line(name: str | None = None):
    a, b, c1, c2 = _tensors()
    first = autotune_launch(vadd, space={"tile": [64, 128]}, grid=_grid, args=lambda cfg: (a, b, c1, N, cfg.tile), name=name); second = autotune_launch(vadd, space={"tile": [32, 256]}, grid=_grid, args=lambda cfg: (a, b, c2, N, cfg.tile), name=name)  # noqa: E702  # fmt: skip
    alone = autotune_launch(
        vadd,
        space={"tile": [32, 64]},
        grid=_grid,
        args=lambda cfg: (a, b, c1, N, cfg.tile),
        name=name,
    )
    torch.testing.assert_close(c1, a + b)
    torch.testing.assert_close(c2, a + b)
    return first, second, alone


def test_two_calls_on_one_line_are_two_sites() -> None:
    first, second, alone = two_on_one_line()
    mod = "test_site_launch_identity.py:two_on_one_line:autotune_launch"
    # Each call is its own site: the second is tuned over its own space, never handed the
    # first's decision (a configuration its space does not even hold).
    assert (first.site, second.site) == (mod, mod + "#1")
    assert second.source == "tuned" and second.config.tile in (32, 256)
    # A call alone on its line keeps the identity it always had (existing records match):
    # its ordinal counts the calls of the function on earlier lines.
    assert alone.site == mod + "#2"
    # Each keeps its own decision on later calls.
    again = two_on_one_line()
    assert [r.source for r in again] == ["memory"] * 3
    assert [r.config for r in again] == [first.config, second.config, alone.config]


def test_calls_of_one_name_on_one_line_stay_one_site() -> None:
    first, second, _ = two_on_one_line(name="shared-name")
    assert first.site == second.site == "shared-name"


# -- the launch's per-configuration text is in the record digest ------------------------------

LAUNCH = """
import sys
sys.path.insert(0, {tests!r})
from runtime_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    return autotune(space={{"tile": [32, 64]}},
                    blocks={blocks},
                    vadd(a, b, c, n, TILE={tile}))
"""


def launch_once(tmp_path: Path, blocks: str, tile: str = "$tile") -> Any:
    """A new process's first call of the site `add` written with this blocks= and TILE=."""
    import runtime_kernels
    from runtime_helpers import new_process

    from tunedsl.frontend.compile import compile_source

    path = tmp_path / "edited.py"
    tests = str(Path(runtime_kernels.__file__).parent)
    path.write_text(LAUNCH.format(tests=tests, blocks=blocks, tile=tile), encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "edited", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    new_process()
    a, b, c, _ = _tensors()
    result = namespace["add"](a, b, c, N)
    torch.testing.assert_close(c, a + b)
    return result


def test_editing_blocks_or_a_dollar_argument_is_a_new_key(tmp_path: Path) -> None:
    first = launch_once(tmp_path, "cdiv(n, $tile)")
    assert first.source == "tuned"
    assert launch_once(tmp_path, "cdiv(n, $tile)").source == "disk"
    # Spacing is not an edit of what is launched: the same record.
    assert launch_once(tmp_path, "cdiv( n,$tile )").source == "disk"
    # Another grid, or another value for TILE, launches other programs: the record measured
    # on the old launch must not decide it, so each is a new key, tuned once.
    grid = launch_once(tmp_path, "cdiv(n, $tile) + 1")
    assert grid.source == "tuned" and grid.digest != first.digest
    both = launch_once(tmp_path, "cdiv(n, 2 * $tile)", "2 * $tile")
    assert both.source == "tuned" and both.digest not in (first.digest, grid.digest)
    assert launch_once(tmp_path, "cdiv(n, 2 * $tile)", "2 * $tile").source == "disk"
    # The old text keeps its own record.
    assert launch_once(tmp_path, "cdiv(n, $tile)").digest == first.digest


KEYED = """
import sys
sys.path.insert(0, {tests!r})
from runtime_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, c, n):
    return autotune(space={{"tile": [32, 64]}}, blocks=cdiv(n, $tile), key={key},
                    vadd(a, b, c, n, TILE=$tile))
"""


def keyed_once(tmp_path: Path, key: str) -> Any:
    """A new process's first call of the site `add` written with this key=."""
    import runtime_kernels
    from runtime_helpers import new_process

    from tunedsl.frontend.compile import compile_source

    path = tmp_path / "keyed.py"
    tests = str(Path(runtime_kernels.__file__).parent)
    path.write_text(KEYED.format(tests=tests, key=key), encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "keyed", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    new_process()
    a, b, c, _ = _tensors()
    result = namespace["add"](a, b, c, N)
    torch.testing.assert_close(c, a + b)
    return result


def test_editing_key_is_a_new_key_even_where_it_gives_the_same_value(tmp_path: Path) -> None:
    # key= names the bucket a record was measured for: `n // 128` gives 2 for n in
    # [256, 384), `n // 100` gives 2 for n in [200, 300). A record of the one must not
    # decide the other because the numbers agree (nor `(m, n)` decide `(n, m)`).
    first = keyed_once(tmp_path, "n // 128")
    assert first.source == "tuned" and first.key["user_key"] == 2
    assert keyed_once(tmp_path, "n//128").source == "disk"  # spacing is no edit
    edited = keyed_once(tmp_path, "n // 100")
    assert edited.key["user_key"] == 2
    assert edited.source == "tuned" and edited.digest != first.digest
    assert keyed_once(tmp_path, "n // 128").digest == first.digest


# -- a `$` argument that gives a tensor --------------------------------------------------------

HOLE_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from runtime_kernels import vadd
from tunedsl import autotune, cdiv


def add(a, b, outs, n):
    # The output buffer is picked per configuration (one per tile), from `outs`, which the
    # key does not see: only the tensor it gives tells float32 from float16 buffers.
    return autotune(space={{"tile": [32, 64]}}, blocks=cdiv(n, $tile),
                    vadd(a, b, outs[$tile], n, TILE=$tile))
"""


def hole_site(tmp_path: Path) -> Any:
    import runtime_kernels

    from tunedsl.frontend.compile import compile_source

    path = tmp_path / "holes.py"
    path.write_text(HOLE_SCRIPT.format(tests=str(Path(runtime_kernels.__file__).parent)))
    namespace: dict[str, Any] = {"__name__": "holes", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace["add"]


def test_a_dollar_tensor_is_keyed_by_the_tensor_it_gives(tmp_path: Path) -> None:
    from runtime_helpers import new_process

    a, b = torch.randn(N), torch.randn(N)
    wide = {t: torch.empty(N) for t in (32, 64)}
    half = {t: torch.empty(N, dtype=torch.float16) for t in (32, 64)}
    first = hole_site(tmp_path)(a, b, wide, N)
    assert first.source == "tuned"
    assert first.key["args"]["c"] == {"dtype": "float32", "shape": [N], "stride": "1"}
    # A new process whose buffers are float16: another kernel for Triton, so another key,
    # never the float32 buffers' decision.
    new_process()
    other = hole_site(tmp_path)(a, b, half, N)
    assert other.source == "tuned" and other.digest != first.digest
    assert other.key["args"]["c"]["dtype"] == "float16"
    new_process()
    assert hole_site(tmp_path)(a, b, wide, N).source == "disk"


def test_a_dollar_tensor_that_changes_under_one_key_is_named(tmp_path: Path) -> None:
    from tunedsl.errors import UsageError

    add = hole_site(tmp_path)
    a, b = torch.randn(N), torch.randn(N)
    wide = {t: torch.empty(N) for t in (32, 64)}
    add(a, b, wide, N)
    # The same arguments and key, but buffers of another dtype: this process decided the
    # key for float32 buffers, so the call is refused with the fix rather than launched
    # with a decision measured on other tensors.
    with pytest.raises(UsageError, match=r"gave a float16 tensor .* but a float32 tensor"):
        add(a, b, {t: torch.empty(N, dtype=torch.float16) for t in (32, 64)}, N)
    assert add(a, b, wide, N).source == "memory"
