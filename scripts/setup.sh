#!/usr/bin/env bash
# Set up .venv with tunedsl (editable) and what the gallery needs:
#   bash scripts/setup.sh          # the gallery: tunedsl, torch, matplotlib
#   bash scripts/setup.sh --dev    # also the test and development tools (pytest, ruff, mypy, Redis
#                                  # and Ray clients, the search models' libraries)
# Torch is pinned to the CPU build unless TUNEDSL_TORCH names another spec (on a GPU machine,
# TUNEDSL_TORCH=torch keeps whatever CUDA build is already there). Running it again is harmless.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=gallery
case "${1:-}" in
    "") ;;
    --dev) extras=dev ;;
    *) echo "usage: bash scripts/setup.sh [--dev]" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q "${TUNEDSL_TORCH:-torch==2.13.0}" -e ".[$extras]"
.venv/bin/python -c "import tunedsl, torch, triton; print('tunedsl', tunedsl.__version__, '| torch', torch.__version__, '| triton', triton.__version__)"
