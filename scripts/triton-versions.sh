#!/usr/bin/env bash
# The Triton-facing tests (the private-API layer, direct launches, compiles in workers, cache
# keys, stored binaries, the C fused launch) against each Triton release tunedsl supports
# besides the one in .venv:
#   bash scripts/triton-versions.sh                     # 3.6.0 3.7.1 3.8.0
#   bash scripts/triton-versions.sh 3.8.0
#   bash scripts/triton-versions.sh --install [3.8.0]   # only install them (CI downloads them
#                                                       # while other steps run)
# Each release is installed on its own into .venv-triton/<version> (kept, so a second run
# skips the download), which goes first on PYTHONPATH; .venv's torch and tunedsl stay as they
# are. Kernels run under the interpreter and compile for cuda:90 without a GPU, as in the
# main suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "run bash scripts/setup.sh --dev first" >&2; exit 1; }
install_only=0
if [ "${1:-}" = "--install" ]; then install_only=1; shift; fi
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.6.0 3.7.1 3.8.0)

installed() {  # the release imported from $1, or nothing
    PYTHONPATH="$1" .venv/bin/python -c "import triton; print(triton.__version__)" 2>/dev/null || true
}

install() {  # into a scratch directory first, renamed into place whole: never a half install
    local v=$1 dir=$PWD/.venv-triton/$1
    [ "$(installed "$dir")" = "$v" ] && return 0
    rm -rf "$dir" "$dir".partial.*
    mkdir -p "$PWD/.venv-triton"
    .venv/bin/python -m pip install -q --no-deps --target "$dir.partial.$$" "triton==$v"
    mv "$dir.partial.$$" "$dir"
    local got
    got=$(installed "$dir")
    [ "$got" = "$v" ] || { echo "asked for triton $v, imported '$got'" >&2; exit 1; }
}

for v in "${versions[@]}"; do install "$v"; done
[ "$install_only" = 0 ] || exit 0

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for v in "${versions[@]}"; do
    echo "-- triton $v"
    # The other tests of tests/unit/runtime are pure (no triton): the front-end runs have them.
    PYTHONPATH="$PWD/.venv-triton/$v" TUNEDSL_CACHE_DIR="$scratch/cache-$v" \
        .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/integration/test_triton_compat.py tests/integration/test_runtime_direct_launch.py \
        tests/integration/test_process_compile.py tests/integration/test_compile_keys.py \
        tests/integration/test_runtime_binaries.py tests/unit/runtime/test_native_fused.py
done
