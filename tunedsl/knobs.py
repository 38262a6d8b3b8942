"""Every ``TUNEDSL_*`` environment variable, typed, in one place.

Values are read when asked for, never cached at import, so tests can scope them with
``monkeypatch.setenv``; the hot path never reads them (sites read them when they tune).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from tunedsl.errors import UsageError

AutotuneMode = Literal["on", "cached", "off"]
Effort = Literal["quick", "default", "thorough"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _flag(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise UsageError(f"environment variable {name}={raw!r} is not a boolean; use 1 or 0")


def _choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = os.environ.get(name, "").strip().lower() or default
    if raw not in allowed:
        raise UsageError(
            f"environment variable {name}={raw!r}: expected one of {', '.join(allowed)}"
        )
    return raw


def _int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < 1:
        raise UsageError(f"environment variable {name}={value} must be at least 1")
    return value


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"environment variable {name}={raw!r} is not a number") from None
    if value <= 0:
        raise UsageError(f"environment variable {name}={value} must be positive")
    return value


@dataclass(frozen=True)
class Knobs:
    """A snapshot of the environment's settings."""

    cache_dir: str | None
    no_bytecode_cache: bool
    autotune: AutotuneMode
    effort: Effort
    force_retune: bool
    print_autotuning: bool
    compile_workers: int | None
    compile_timeout_s: float
    quiet: bool


def cache_dir_override() -> str | None:
    """``TUNEDSL_CACHE_DIR``: where every per-user cache lives (default: platformdirs)."""
    return os.environ.get("TUNEDSL_CACHE_DIR") or None


def no_bytecode_cache() -> bool:
    """``TUNEDSL_NO_BYTECODE_CACHE=1``: never write expanded bytecode."""
    return _flag("TUNEDSL_NO_BYTECODE_CACHE")


def autotune_mode() -> AutotuneMode:
    """``TUNEDSL_AUTOTUNE=on|cached|off``: tune on a miss, use records only, or never tune."""
    return _choice("TUNEDSL_AUTOTUNE", "on", ("on", "cached", "off"))  # type: ignore[return-value]


def effort() -> Effort:
    """``TUNEDSL_EFFORT=quick|default|thorough``: timing budget and leaders re-measured."""
    return _choice("TUNEDSL_EFFORT", "default", ("quick", "default", "thorough"))  # type: ignore[return-value]


def force_retune() -> bool:
    """``TUNEDSL_FORCE_RETUNE=1``: ignore stored records and tune again."""
    return _flag("TUNEDSL_FORCE_RETUNE")


def print_autotuning() -> bool:
    """``TUNEDSL_PRINT_AUTOTUNING=1``: print the key, the winner and every configuration's time."""
    return _flag("TUNEDSL_PRINT_AUTOTUNING")


def compile_workers() -> int | None:
    """``TUNEDSL_COMPILE_WORKERS=N``: size of the compile pool (default: from the CPU count)."""
    return _int("TUNEDSL_COMPILE_WORKERS", None)


def compile_timeout_s() -> float:
    """``TUNEDSL_COMPILE_TIMEOUT``: seconds one configuration may compile before it is dropped."""
    return _float("TUNEDSL_COMPILE_TIMEOUT", 300.0)


#: Default of ``TUNEDSL_LOCK_TIMEOUT``: a key's tuning rarely takes minutes, and a stopped
#: or hung tuner must not block every other process for long.
LOCK_TIMEOUT_S = 600.0


def lock_timeout_s() -> float:
    """``TUNEDSL_LOCK_TIMEOUT``: seconds to wait for another process tuning the same key
    before tuning without its lock (default 600)."""
    return _float("TUNEDSL_LOCK_TIMEOUT", LOCK_TIMEOUT_S)


def records_path() -> list[str]:
    """``TUNEDSL_RECORDS_PATH=dir1:dir2``: extra read-only directories of tuning records
    (records shipped with an application), searched after the cache."""
    raw = os.environ.get("TUNEDSL_RECORDS_PATH", "")
    return [p for p in raw.split(os.pathsep) if p.strip()]


def direct_launch() -> bool:
    """``TUNEDSL_DIRECT_LAUNCH=0``: always launch through Triton's JIT dispatcher instead of
    the cached ``CompiledKernel`` (default on)."""
    raw = os.environ.get("TUNEDSL_DIRECT_LAUNCH", "").strip().lower()
    return raw not in _FALSE or raw == ""


def stored_binaries() -> bool:
    """``TUNEDSL_STORED_BINARIES=0``: never load or store kernel binaries of tuning decisions
    (a warm process then compiles the chosen variant through Triton; default on)."""
    raw = os.environ.get("TUNEDSL_STORED_BINARIES", "").strip().lower()
    return raw not in _FALSE or raw == ""


def quiet() -> bool:
    """``TUNEDSL_QUIET=1``: no progress output while tuning."""
    return _flag("TUNEDSL_QUIET")


GALLERY_RESULT_ENV = "TUNEDSL_GALLERY_RESULT"


def gallery_result_path() -> str | None:
    """``TUNEDSL_GALLERY_RESULT=PATH``: a gallery example writes its result JSON there
    (``tunedsl gallery`` sets it for each example it runs)."""
    return os.environ.get(GALLERY_RESULT_ENV) or None


def snapshot() -> Knobs:
    return Knobs(
        cache_dir=cache_dir_override(),
        no_bytecode_cache=no_bytecode_cache(),
        autotune=autotune_mode(),
        effort=effort(),
        force_retune=force_retune(),
        print_autotuning=print_autotuning(),
        compile_workers=compile_workers(),
        compile_timeout_s=compile_timeout_s(),
        quiet=quiet(),
    )
