"""The C fused launch (``native_fused.c``), built when the package is installed.

``pip install`` builds the C file into the extension ``tunedsl.runtime._native_fused``
(``setup.py``; the wheel is a platform wheel). It is the site's fast path for a repeated
argument layout (``runtime/fused.py``): for a kernel of a dozen int arguments, the generic
path's Python frames cost more than Triton's launch does beyond the driver call; the C call
costs a fraction of that. The build is optional: without a C compiler or Python's headers
the package installs without it, and every call takes the generic path (same decisions,
its repeat check still skipping the call key; slower). Nothing is compiled or loaded from
the user's cache at run time.

An extension built from another copy of ``native_fused.c`` than the one beside it (a checkout
whose C file changed after its last build) is not loaded: the generic path runs, with one
warning naming the rebuild, rather than C code that no longer matches the Python beside it.

``TUNEDSL_SAFE=fused`` turns the fused launch off even where the extension is installed.
``tunedsl env`` says whether it runs, and why not.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
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

        except ImportError as err:
            _failure = str(err) or type(err).__name__
            return None
        _failure = stale_build(_native_fused)
        if _failure is None:
            _loaded = _native_fused.Fused
        else:
            warnings.warn(f"tunedsl: the C fused launch is off: {_failure}", stacklevel=2)
    return _loaded


def stale_build(extension: Any) -> str | None:
    """Why ``extension`` must not run: it was built from another copy of ``native_fused.c``
    than the one installed beside it. None where it matches, or where no source is installed
    (a wheel ships the built extension alone)."""
    source = Path(__file__).with_name("native_fused.c")
    try:
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
    except OSError:
        return None
    if getattr(extension, "SOURCE_DIGEST", "") == digest:
        return None
    return (
        f"{extension.__file__} was built from another version of {source}; rebuild it "
        "(pip install -e . or python setup.py build_ext --inplace)"
    )


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
