#!/usr/bin/env bash
# The Triton-facing tests (the private-API layer, direct launches, compiles in workers, cache
# keys, stored binaries) against each Triton release tunedsl supports besides the one in .venv:
#   bash scripts/triton-versions.sh               # 3.6.0 3.7.1 3.8.0
#   bash scripts/triton-versions.sh 3.8.0
# Each release is installed on its own into a scratch directory that goes first on PYTHONPATH;
# .venv's torch and tunedsl stay as they are. Kernels run under the interpreter and compile for
# cuda:90 without a GPU, as in the main suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "run bash scripts/setup.sh --dev first" >&2; exit 1; }
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.6.0 3.7.1 3.8.0)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for v in "${versions[@]}"; do
    .venv/bin/python -m pip install -q --no-deps --target "$scratch/triton-$v" "triton==$v"
    got=$(PYTHONPATH="$scratch/triton-$v" .venv/bin/python -c "import triton; print(triton.__version__)")
    [ "$got" = "$v" ] || { echo "asked for triton $v, imported $got" >&2; exit 1; }
    echo "-- triton $v"
    PYTHONPATH="$scratch/triton-$v" TUNEDSL_CACHE_DIR="$scratch/cache-$v" \
        .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/integration/test_triton_compat.py tests/integration/test_runtime_direct_launch.py \
        tests/integration/test_process_compile.py tests/integration/test_compile_keys.py \
        tests/integration/test_runtime_binaries.py tests/unit/runtime
done
