"""tunedsl: a Julia-inspired macro DSL for autotuning Triton kernels.

The public API is re-exported here lazily (PEP 562), so ``import tunedsl`` never imports
torch or triton: the front end, spaces, keys and records work without either installed.

In a DSL script, ``autotune(...)`` is a macro that the front end expands; called as a
plain function (outside an expanded module) it raises an error explaining how to run the
script. ``autotune_launch`` is the plain-Python entry point to the same runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_EXPORTS: dict[str, str] = {
    # errors
    "TunedslError": "tunedsl.errors",
    "TunedslSyntaxError": "tunedsl.errors",
    "TuningError": "tunedsl.errors",
    "UsageError": "tunedsl.errors",
    "Terminated": "tunedsl.errors",
    "CacheWarning": "tunedsl.errors",
    "UntestedTritonWarning": "tunedsl.errors",
    # front end
    "compile_source": "tunedsl.frontend.compile",
    "expand_source": "tunedsl.frontend.compile",
    # runtime
    "autotune": "tunedsl.runtime.macro",
    "autotune_launch": "tunedsl.runtime.api",
    "LaunchResult": "tunedsl.runtime.result",
    "Space": "tunedsl.model.space",
    "Config": "tunedsl.model.config",
    "cdiv": "tunedsl.runtime.helpers",
    "workload": "tunedsl.precompile.workload",
    # PyTorch integration (imports torch only when used)
    "torch_op": "tunedsl.backends.torch_ops",
}

__all__ = [
    "CacheWarning",
    "Config",
    "LaunchResult",
    "Space",
    "Terminated",
    "TunedslError",
    "TunedslSyntaxError",
    "TuningError",
    "UntestedTritonWarning",
    "UsageError",
    "__version__",
    "autotune",
    "autotune_launch",
    "cdiv",
    "compile_source",
    "expand_source",
    "torch_op",
    "workload",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from tunedsl.backends.torch_ops import torch_op
    from tunedsl.errors import (
        CacheWarning,
        Terminated,
        TunedslError,
        TunedslSyntaxError,
        TuningError,
        UntestedTritonWarning,
        UsageError,
    )
    from tunedsl.frontend.compile import compile_source, expand_source
    from tunedsl.model.config import Config
    from tunedsl.model.space import Space
    from tunedsl.precompile.workload import workload
    from tunedsl.runtime.api import autotune_launch
    from tunedsl.runtime.helpers import cdiv
    from tunedsl.runtime.macro import autotune
    from tunedsl.runtime.result import LaunchResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tunedsl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tunedsl``: let IPython cells use the DSL."""
    from tunedsl.ipython import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from tunedsl.ipython import unload_ipython_extension as unload

    unload(ipython)
