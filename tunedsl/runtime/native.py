"""The C fused launch (``native_fused.c``), built when the package is installed.

``pip install`` builds the C file into the extension ``tunedsl.runtime._native_fused``
(``setup.py``; the wheel is a platform wheel). It is the site's fast path for a repeated
argument layout (``runtime/fused.py``): for a kernel of a dozen int arguments, the generic
path's Python frames cost more than Triton's launch does beyond the driver call; the C call
costs a fraction of that. The build is optional: without a C compiler or Python's headers
the package installs without it, and every call takes the generic path (same decisions,
its repeat check still skipping the call key; slower). Nothing is compiled or loaded from
the user's cache at run time.

``TUNEDSL_SAFE=fused`` turns the fused launch off even where the extension is installed.
``tunedsl env`` says whether it runs, and why not.
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
    """For ``tunedsl env``: whether the C fused launch runs, and why not."""
    from tunedsl import knobs
    from tunedsl.errors import UsageError

    try:
        if not knobs.fused_launch():
            return "off: TUNEDSL_SAFE=fused (the generic path runs)"
    except UsageError as err:  # env reports the setting as invalid beside this
        return f"unknown: {err}"
    if fused_type() is not None:
        return f"C ({MODULE_NAME}, built at install)"
    return (
        f"off: the C extension is not installed ({_failure}; the generic path runs); "
        "reinstall tunedsl with a C compiler and Python's headers (python3-dev) to build it"
    )
