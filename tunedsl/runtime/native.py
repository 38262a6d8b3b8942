"""The C form of the fused launch (``native_fused.c``), built when the package is installed.

The fused launch of ``runtime/fused.py`` is generated Python: for a kernel of a dozen int
arguments its bytecodes cost more than Triton's launch does beyond the driver call. The same
steps in C cost a fraction of that. ``pip install`` builds the C file into the extension
``tunedsl.runtime._native_fused`` (``setup.py``; the wheel is a platform wheel). The build is
optional: without a C compiler or Python's headers the package installs without it, and the
fused launch stays Python (same decisions, slower). Nothing is compiled or loaded from the
user's cache at run time.

``TUNEDSL_SAFE=native`` keeps the Python form even where the extension is installed.
``tunedsl env`` says which one runs and why.
"""

from __future__ import annotations

from typing import Any

MODULE_NAME = "tunedsl.runtime._native_fused"

_loaded: Any = None  # the Fused type once imported
_failure: str | None = None  # why it could not be imported (once per process)


def fused_type() -> Any:
    """The C ``Fused`` type; None where the extension is not installed (the reason is in
    :func:`status`)."""
    global _loaded, _failure
    if _loaded is None and _failure is None:
        try:
            from tunedsl.runtime import _native_fused  # type: ignore[attr-defined]

            _loaded = _native_fused.Fused
        except ImportError as err:
            _failure = str(err) or type(err).__name__
    return _loaded


def status() -> str:
    """For ``tunedsl env``: which fused launch runs, and why."""
    from tunedsl import knobs
    from tunedsl.errors import UsageError

    try:
        if not knobs.native_launch():
            return "Python (TUNEDSL_SAFE=native)"
    except UsageError as err:  # env reports the setting as invalid beside this
        return f"unknown: {err}"
    if fused_type() is not None:
        return f"C ({MODULE_NAME}, built at install)"
    return (
        f"Python: the C extension is not installed ({_failure}); reinstall tunedsl with a C "
        "compiler and Python's headers (python3-dev) to build it"
    )
