"""Starting a child Python process whose imports come only from this process's path.

``python -c`` and ``python -m`` put the working directory first on the child's import path:
run from a shared directory (``/tmp``, a project scratch directory), the child imports
whatever another user planted there (a ``tunedsl/`` or ``torch/`` package) before the real
one. A child started by :func:`python_argv` first replaces its path with this process's
(the working directory included only where this process has it too, by its absolute
name), before anything is imported. Pure Python.
"""

from __future__ import annotations

import os
import sys

# The child's first statement: argv[1] says how many path entries follow; they replace
# sys.path, and are removed from argv before the code runs.
_SET_PATH = (
    "import sys; n = int(sys.argv[1]); sys.path[:] = sys.argv[2:2 + n]; "
    "del sys.argv[1:2 + n]; del n\n"
)


def python_argv(code: str, *args: str) -> list[str]:
    """The command running ``code`` (as ``python -c``) with ``args`` in ``sys.argv[1:]``,
    in a child whose import path is this process's."""
    path = [os.getcwd() if p == "" else p for p in sys.path]
    return [sys.executable, "-c", _SET_PATH + code, str(len(path)), *path, *args]


def module_argv(module: str, *args: str) -> list[str]:
    """``python -m module args...`` with this process's import path (:func:`python_argv`)."""
    return python_argv(
        f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)",
        *args,
    )
