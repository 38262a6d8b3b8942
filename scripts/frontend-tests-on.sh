#!/usr/bin/env bash
# Run the pure (torch-free, triton-free) tests on another Python: scripts/frontend-tests-on.sh 3.12
# The venv has neither torch nor triton, which also proves the core imports without them.
set -euo pipefail
cd "$(dirname "$0")/.."
ver=$1
py=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver"*/bin/python 2>/dev/null | head -n1)
[ -n "$py" ] || { echo "python $ver not found under pyenv" >&2; exit 1; }
venv=".venv-$ver"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q pytest hypothesis lark platformdirs cloudpickle filelock ipython
"$venv/bin/python" -m pip install -q --no-deps -e .
"$venv/bin/python" - <<'PY'
import importlib.util, sys
for mod in ("torch", "triton"):
    assert importlib.util.find_spec(mod) is None, f"{mod} must not be installed in this venv"
import tunedsl, tunedsl.frontend.compile, tunedsl.bytecode  # the core imports without them
print("core imports without torch/triton on", sys.version.split()[0])
PY
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
