"""Triton's driver, started only once Triton's cache directory is checked (see
``compat/__init__.py``).

Starting Triton's driver builds its C utilities (``cuda_utils``) into Triton's cache
directory and loads them from there (``DriverConfig.active``, ``CudaUtils``; 3.6.0, 3.9.0),
and on 3.6 a kernel's first load builds its launcher there too: in a directory another user
can write, their library would run as this user. Every use of the driver in tunedsl goes
through :func:`active_driver`, and every JIT call or load of a compiled kernel, which may
start it, through :func:`check_before_driver` until it has started.
"""

from __future__ import annotations

from typing import Any

from tunedsl.backends.compat.cache import check_triton_cache
from tunedsl.backends.compat.gate import interpreting, is_interpreted_function

#: Whether Triton's driver was seen started (by ``active_driver``, or before a JIT call or a
#: load): from then on those need no check (one global read on their path).
started = False


def check_before_driver(kernel: Any) -> None:
    """``check_triton_cache`` where a JIT call of ``kernel`` (or loading a compiled one)
    would start Triton's driver: it has not started, and Triton's interpreter is off (it
    never starts it)."""
    global started
    from triton.runtime import driver

    if getattr(driver, "_active", None) is not None or getattr(driver, "_default", None):
        started = True
    elif not interpreting() and not is_interpreted_function(kernel):
        check_triton_cache()


def active_driver() -> Any:
    """``triton.runtime.driver.active``, Triton's cache directory checked first where the
    driver has not started (``check_triton_cache``'s ``UsageError``)."""
    global started
    from triton.runtime import driver

    if getattr(driver, "_active", None) is None and getattr(driver, "_default", None) is None:
        check_triton_cache()
    active = driver.active
    started = True
    return active
