#!/usr/bin/env bash
# Set up a development environment in .venv: tunedsl (editable) with its test and gallery tools.
# Torch is pinned to the CPU build unless TUNEDSL_TORCH names another spec (on a GPU machine,
# TUNEDSL_TORCH=torch keeps whatever CUDA build is already there).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q "${TUNEDSL_TORCH:-torch==2.13.0}" -e ".[dev]"
.venv/bin/python -c "import tunedsl, torch, triton; print('tunedsl', tunedsl.__version__, '| torch', torch.__version__, '| triton', triton.__version__)"
