#!/usr/bin/env bash
# Build the sdist and the wheel, install the wheel in a clean venv with the CPU build of torch
# and no dev extras, and from a directory outside the checkout run a user's DSL script under
# `tunedsl run` and `tunedsl gallery --only vector_add` (the examples shipped in the wheel).
# The wheel is a platform wheel (the C fused launch, built by setup.py): it is built with
# .venv's Python, and the clean venv uses the same interpreter (PYTHON, as scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

.venv/bin/python - "$work/dist" <<'PY'
import sys
from setuptools import build_meta
out = sys.argv[1]
print("built", build_meta.build_sdist(out), build_meta.build_wheel(out))
PY
rm -rf build tunedsl.egg-info  # the in-tree build's leftovers (git-ignored)

"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$work/venv/bin/python" -m pip install -q "${TUNEDSL_TORCH:-torch==2.13.0}" "$work"/dist/tunedsl-*.whl

mkdir "$work/user"
cd "$work/user"
cat > add.py <<'PY'
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(c + i, tl.load(a + i, mask=m) + tl.load(b + i, mask=m), mask=m)


def add(a, b):
    c = torch.empty_like(a)
    n = a.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=$tile))
    return c


a, b = torch.randn(1000), torch.randn(1000)
assert torch.allclose(add(a, b), a + b)
print("user script ok")
PY
export TUNEDSL_CACHE_DIR="$work/cache"
"$work/venv/bin/tunedsl" run add.py
"$work/venv/bin/tunedsl" gallery --only vector_add --out "$work/report"
test -f "$work/report/report.md"
"$work/venv/bin/python" - "$repo" <<'PY'
import sys, tunedsl
from tunedsl.runtime import native
assert not tunedsl.__file__.startswith(sys.argv[1]), f"imported the checkout: {tunedsl.__file__}"
assert native.fused_type() is not None, native.status()  # the platform wheel's C extension
print("wheel ok:", tunedsl.__file__, "| fused launch:", native.status())
PY
