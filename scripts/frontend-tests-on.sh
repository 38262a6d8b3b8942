#!/usr/bin/env bash
# Run the pure (torch-free, triton-free) tests on another Python: scripts/frontend-tests-on.sh 3.12
#   bash scripts/frontend-tests-on.sh --install 3.12   # only make its venv and install the test
#                                                      # tools (CI downloads them while other steps run)
# The venv has neither torch nor triton, which also proves the core imports without them.
set -euo pipefail
cd "$(dirname "$0")/.."
install_only=0
if [ "${1:-}" = "--install" ]; then install_only=1; shift; fi
ver=$1
py=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver"*/bin/python 2>/dev/null | head -n1)
[ -n "$py" ] || { echo "python $ver not found under pyenv" >&2; exit 1; }
venv=".venv-$ver"
tools=(pytest pytest-xdist hypothesis lark platformdirs cloudpickle filelock ipython)
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
# New, or cut short: install what is missing.
if ! "$venv/bin/python" -c "import pytest, xdist, hypothesis, lark, platformdirs, cloudpickle, filelock, IPython" 2>/dev/null; then
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$venv/bin/python" -m pip install -q "${tools[@]}"
fi
[ "$install_only" = 0 ] || exit 0
"$venv/bin/python" -m pip install -q --no-deps -e .
"$venv/bin/python" - <<'PY'
import importlib.util, sys
for mod in ("torch", "triton"):
    assert importlib.util.find_spec(mod) is None, f"{mod} must not be installed in this venv"
import tunedsl, tunedsl.frontend.compile, tunedsl.bytecode  # the core imports without them
print("core imports without torch/triton on", sys.version.split()[0])
PY
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
