"""What ``@triton.jit(...)`` declares is part of a compiled kernel's identity: ``debug=True``
compiles device asserts and debug code, ``do_not_specialize=`` and
``do_not_specialize_on_alignment=`` compile one kernel for every value or alignment of a
parameter. Triton's source hash starts at ``def`` and leaves the decorator out, so on a GPU
a decision tuned for the kernel as declared before was used for the other code. Each hash is
worked out in a real process of its own, with Triton's compiler (not its interpreter).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

KERNEL = """\
import triton
import triton.language as tl


DECORATOR
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    print(bt.kernel_info(vadd).source_hash)
"""

PLAIN = "@triton.jit"
DECLARED = [
    "@triton.jit(debug=True)",
    "@triton.jit(do_not_specialize=['n'])",
    "@triton.jit(do_not_specialize=[3])",
    "@triton.jit(do_not_specialize_on_alignment=['a'])",
]


def _source_hash(where: Path, decorator: str) -> str:
    where.mkdir()
    (where / "jo_kernel.py").write_text(KERNEL.replace("DECORATOR", decorator), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton's own hash
    done = subprocess.run(
        [sys.executable, "jo_kernel.py"], env=env, cwd=where, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_what_the_jit_decorator_declares_is_part_of_a_compiled_kernel(tmp_path: Path) -> None:
    plain = _source_hash(tmp_path / "plain", PLAIN)
    declared = [_source_hash(tmp_path / f"d{i}", d) for i, d in enumerate(DECLARED)]
    assert plain not in declared
    # By name or by position, a parameter left unspecialized is the same kernel.
    assert declared[1] == declared[2]
    assert len({declared[0], declared[1], declared[3]}) == 3
    # A plain decorator written another way is the same kernel (its records hold).
    assert _source_hash(tmp_path / "again", "@triton.jit()") == plain


PLAIN_GLOBAL = """\
from collections import namedtuple

import triton
import triton.language as tl

Scale = namedtuple("Scale", ["factor"])
S = Scale(FACTOR)
W = WIDTH


@triton.jit
def scale(dst, src, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n) * S.factor * W, mask=i < n)


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    print(bt.kernel_info(scale).source_hash, scale.cache_key)
"""


def test_a_plain_global_triton_compiles_in_is_part_of_a_compiled_kernel(tmp_path: Path) -> None:
    """Triton compiles a namedtuple global (always allowed) and, with
    ``TRITON_ALLOW_NON_CONSTEXPR_GLOBALS=1``, any plain global into the kernel as constants,
    and its hash leaves their values out: on a GPU a decision tuned under one value was used
    under another (the interpreter's hash had them)."""

    def hashes(factor: int, width: int) -> list[str]:
        where = tmp_path / f"f{factor}_w{width}_{len(list(tmp_path.iterdir()))}"
        where.mkdir()
        text = PLAIN_GLOBAL.replace("FACTOR", str(factor)).replace("WIDTH", str(width))
        (where / "jo_plain.py").write_text(text, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_ALLOW_NON_CONSTEXPR_GLOBALS"] = "1"
        done = subprocess.run(
            [sys.executable, "jo_plain.py"], env=env, cwd=where, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first, first_triton = hashes(2, 3)
    factor, factor_triton = hashes(4, 3)
    width, width_triton = hashes(2, 5)
    assert len({first, factor, width}) == 3
    # Triton's cache key of the compiled code tells them apart too (its hash is salted).
    assert len({first_triton, factor_triton, width_triton}) == 3
    assert hashes(2, 3)[0] == first  # the same values: the same kernel in every process
