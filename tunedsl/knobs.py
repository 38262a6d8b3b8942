"""Every ``TUNEDSL_*`` environment variable, typed, in one place.

Values are read when asked for, never cached at import, so tests can scope them with
``monkeypatch.setenv``; the hot path never reads them (sites read them when they tune).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

# Values kept until the environment changes (re-exported: knobs is where callers look).
from tunedsl.environ import environ_checks as environ_checks
from tunedsl.environ import environ_snapshot as environ_snapshot
from tunedsl.environ import environ_unchanged as environ_unchanged
from tunedsl.environ import per_environ as per_environ
from tunedsl.errors import UsageError

AutotuneMode = Literal["on", "cached", "off"]
Effort = Literal["quick", "default", "thorough"]
# The effort names (``effort=``, ``TUNEDSL_EFFORT``); engine/effort.py gives each its budgets.
EFFORT_NAMES: tuple[Effort, ...] = ("quick", "default", "thorough")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _flag(name: str, default: bool = False) -> bool:
    """A boolean variable: unset or empty gives ``default``; anything but the accepted
    spellings is an error naming the variable (a typo must not silently mean "off")."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise UsageError(
        f"environment variable {name}={raw!r} is not a boolean; use 1 or 0 (accepted: "
        f"{', '.join(sorted(_TRUE))} / {', '.join(sorted(_FALSE - {''}))})"
    )


def _choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = os.environ.get(name, "").strip().lower() or default
    if raw not in allowed:
        raise UsageError(
            f"environment variable {name}={raw!r}: expected one of {', '.join(allowed)}"
        )
    return raw


def _int(name: str, default: int | None, at_most: int, why: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < 1:
        raise UsageError(f"environment variable {name}={value} must be at least 1")
    if value > at_most:
        raise UsageError(f"environment variable {name}={value} must be at most {at_most} ({why})")
    return value


def finite_number(
    value: object,
    what: str,
    *,
    zero_ok: bool = False,
    unit: str = "",
    fix: str = "",
    text: bool = False,
    at_most: float | None = None,
) -> float:
    """The one parser of every float setting, option and flag: ``value`` (a number, or with
    ``text`` an environment variable's text) as a finite float, > 0 (>= 0 with ``zero_ok``).
    Anything else is a ``UsageError`` saying ``what=value`` and ``fix``. ``nan`` and ``inf``
    are refused by name: ``nan <= 0`` is false, so a plain range check lets them through (a
    budget or timeout of ``nan`` never runs out)."""
    kind = f"a {'non-negative' if zero_ok else 'positive'}, finite number{unit}"
    tail = f"; {fix}" if fix else ""
    if text and isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise UsageError(f"{what}={value!r} is not a number: give {kind}{tail}") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{what}={value!r} is not a number: give {kind}{tail}")
    else:
        number = float(value)
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero_ok):
        raise UsageError(f"{what}={value!r} must be {kind}{tail}")
    if at_most is not None and number > at_most:
        limit = f"{at_most:.0f}" + (f" {unit.removeprefix(' of ')}" if unit else "")
        raise UsageError(f"{what}={value!r} must be at most {limit}{tail}")
    return number


#: The longest wait a setting of seconds may ask for: what a lock, ``select`` or queue wait
#: takes (about 292 years); a longer one raises OverflowError in the middle of a tuning.
MAX_WAIT_S = threading.TIMEOUT_MAX


def _float(name: str, default: float, *, zero_ok: bool = False) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    return finite_number(
        raw,
        f"environment variable {name}",
        zero_ok=zero_ok,
        unit=" of seconds",
        fix=f"unset it for the default ({default:g})",
        text=True,
        at_most=MAX_WAIT_S,
    )


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
    """``TUNEDSL_CACHE_DIR``: where every per-user cache lives (blank: platformdirs')."""
    raw = os.environ.get("TUNEDSL_CACHE_DIR") or None
    return _anchored("TUNEDSL_CACHE_DIR", raw, raw) if raw and raw.strip() else None


_anchors: dict[str, tuple[str, dict[str, str]]] = {}  # variable -> (its value, resolved)


def _anchored(variable: str, raw: str, path: str) -> str:
    """``path`` of ``variable`` (set to ``raw``) made absolute against the working directory
    of its first use since the variable took that value: a chdir moves no cache."""
    expanded = os.path.expanduser(path)
    if os.path.isabs(expanded):
        return expanded
    seen = _anchors.get(variable)
    if seen is None or seen[0] != raw:
        seen = _anchors[variable] = (raw, {})
    return seen[1].setdefault(path, os.path.abspath(expanded))


def autotune_mode() -> AutotuneMode:
    """``TUNEDSL_AUTOTUNE=on|cached|off``: tune on a miss, use records only, or never tune."""
    return _choice("TUNEDSL_AUTOTUNE", "on", ("on", "cached", "off"))  # type: ignore[return-value]


def effort() -> Effort:
    """``TUNEDSL_EFFORT=quick|default|thorough``: timing budget and leaders re-measured."""
    return _choice("TUNEDSL_EFFORT", "default", EFFORT_NAMES)  # type: ignore[return-value]


SEARCH_STRATEGIES = ("auto", "exhaustive", "random", "pattern", "model")


def search() -> str:
    """``TUNEDSL_SEARCH=auto|exhaustive|random|pattern|model``: how a site's space is searched
    (default ``auto``: exhaustive on small spaces, model-guided on large ones)."""
    return _choice("TUNEDSL_SEARCH", "auto", SEARCH_STRATEGIES)


def budget_s() -> float | None:
    """``TUNEDSL_BUDGET=seconds``: time budget of one search (default: the effort's)."""
    raw = os.environ.get("TUNEDSL_BUDGET", "").strip()
    if not raw:
        return None
    return finite_number(
        raw,
        "environment variable TUNEDSL_BUDGET",
        unit=" of seconds",
        fix="unset it for the effort's budget",
        text=True,
        at_most=MAX_WAIT_S,
    )


@per_environ  # asked on every miss (reading an unset variable raises and catches a KeyError)
def force_retune() -> bool:
    """``TUNEDSL_FORCE_RETUNE=1``: ignore stored records and tune again."""
    return _flag("TUNEDSL_FORCE_RETUNE")


def print_autotuning() -> bool:
    """``TUNEDSL_PRINT_AUTOTUNING=1``: print the key, the winner and every configuration's
    time. tunedsl's own setting, when given (not empty), decides, ``0`` included; only
    without it is Triton's ``TRITON_PRINT_AUTOTUNING`` asked."""
    if os.environ.get("TUNEDSL_PRINT_AUTOTUNING", "").strip():
        return _flag("TUNEDSL_PRINT_AUTOTUNING")
    return _flag("TRITON_PRINT_AUTOTUNING")


MAX_COMPILE_WORKERS = 1024  # a worker is a thread and a forked process, one per variant


def compile_workers() -> int | None:
    """``TUNEDSL_COMPILE_WORKERS=N``: size of the compile pool (default: from the CPU count)."""
    why = "a forked process each, and more than the CPUs compile no faster; unset it for one a CPU"
    return _int("TUNEDSL_COMPILE_WORKERS", None, MAX_COMPILE_WORKERS, why)


#: ``TUNEDSL_COMPILE_PROCESSES=auto`` uses forked compile processes from this many workers on.
COMPILE_PROCESSES_FROM = 4


def compile_processes() -> str:
    """``TUNEDSL_COMPILE_PROCESSES=auto|on|off``: compile in forked worker processes, each with
    its own GIL, instead of threads alone (``backends/compile_processes.py``; default ``auto``:
    on with at least ``COMPILE_PROCESSES_FROM`` compile workers, where threads contend for the
    GIL)."""
    value = _choice("TUNEDSL_COMPILE_PROCESSES", "auto", ("auto", "on", "off", "1", "0"))
    return {"1": "on", "0": "off"}.get(value, value)


#: Default of ``TUNEDSL_LOCK_TIMEOUT``: a key's tuning rarely takes minutes, and a stopped
#: or hung tuner must not block every other process for long.
LOCK_TIMEOUT_S = 600.0


def lock_timeout_s() -> float:
    """``TUNEDSL_LOCK_TIMEOUT``: seconds to wait for another process, or the other ranks of a
    ``torch.distributed`` job, deciding the same key, before going on without them (default
    600)."""
    return _float("TUNEDSL_LOCK_TIMEOUT", LOCK_TIMEOUT_S)


#: Defaults of ``TUNEDSL_CONFIG_TIMEOUT``: a compile past the first is dropped; an isolated
#: worker silent past the second is taken for hung (a hang is told from a long run sooner).
COMPILE_TIMEOUT_S = 300.0
MEASURE_TIMEOUT_S = 60.0


def config_timeout_s() -> float | None:
    """``TUNEDSL_CONFIG_TIMEOUT``: seconds one configuration may take to compile, or an
    isolated worker to answer one measurement, before that configuration fails (default:
    300 s to compile, 60 s to answer)."""
    raw = os.environ.get("TUNEDSL_CONFIG_TIMEOUT", "").strip()
    if not raw:
        return None
    return finite_number(
        raw,
        "environment variable TUNEDSL_CONFIG_TIMEOUT",
        unit=" of seconds",
        fix="unset it for the defaults (300 s to compile, 60 s to answer)",
        text=True,
        at_most=MAX_WAIT_S,
    )


def compile_timeout_s() -> float:
    """Seconds one configuration may compile (``TUNEDSL_CONFIG_TIMEOUT``, default 300)."""
    return config_timeout_s() or COMPILE_TIMEOUT_S


def isolate_timeout_s() -> float:
    """Seconds an isolated worker may take to answer one measurement before the
    configuration is recorded as hung (``TUNEDSL_CONFIG_TIMEOUT``, default 60)."""
    return config_timeout_s() or MEASURE_TIMEOUT_S


def records_path() -> list[str]:
    """``TUNEDSL_RECORDS_PATH=dir1:dir2``: extra read-only directories of tuning records
    (records shipped with an application), searched after the cache."""
    raw = os.environ.get("TUNEDSL_RECORDS_PATH", "")
    return [_anchored("TUNEDSL_RECORDS_PATH", raw, p) for p in raw.split(os.pathsep) if p.strip()]


# Triton's truthy values for a boolean environment variable (``getenv_bool`` in libtriton,
# 3.6.0 through 3.9.0): compared after lower-casing, nothing stripped; any other set value
# is false, an unset variable is the default.
_TRITON_TRUE = {"1", "y", "yes", "on", "true"}


def triton_interpret_env() -> bool:
    """``TRITON_INTERPRET`` read with Triton's own rule (``1``, ``y``, ``yes``, ``on``,
    ``true``, any case; ``" 1"`` is false), for modules that must not import triton. Where
    triton is loaded, ``tunedsl.backends.compat.interpreting()`` reads Triton's knob."""
    raw = os.environ.get("TRITON_INTERPRET")
    return raw is not None and raw.lower() in _TRITON_TRUE


#: The fast paths ``TUNEDSL_SAFE`` can turn off, each safe to lose (same results, slower).
FAST_PATHS = {
    "direct": "launch the cached CompiledKernel directly, below Triton's dispatcher",
    "repeat": "skip the call key when a call repeats the last call's argument layout",
    "fused": "launch a repeated layout in one C call (the extension built at install)",
    "binaries": "keep and load the chosen variants' binaries (a warm start without compiling)",
    "bytecode": "write the expanded DSL modules' bytecode to the cache",
}


def safe_mode() -> frozenset[str]:
    """``TUNEDSL_SAFE``: fast paths turned off, for a bug report or a measurement: ``1`` (or
    ``all``) turns every one off, a comma-separated list of names (``direct``, ``repeat``,
    ``fused``, ``binaries``, ``bytecode``) just those. Unset: all on."""
    raw = os.environ.get("TUNEDSL_SAFE", "").strip().lower()
    if raw in _FALSE:
        return frozenset()
    if raw in _TRUE or raw == "all":
        return frozenset(FAST_PATHS)
    names = frozenset(n.strip() for n in raw.split(",") if n.strip())
    unknown = sorted(names - set(FAST_PATHS))
    if unknown:
        raise UsageError(
            f"environment variable TUNEDSL_SAFE names {', '.join(map(repr, unknown))}: give 1 "
            f"(every fast path off) or a comma-separated list of {', '.join(FAST_PATHS)}"
        )
    return names


def direct_launch() -> bool:
    """The direct launch (``TUNEDSL_SAFE=direct`` turns it off)."""
    return "direct" not in safe_mode()


def repeat_check() -> bool:
    """The repeat check (``TUNEDSL_SAFE=repeat`` turns it off)."""
    return "repeat" not in safe_mode()


def fused_launch() -> bool:
    """The C fused launch of a repeated layout (``TUNEDSL_SAFE=fused`` turns it off: such
    calls take the generic path)."""
    return "fused" not in safe_mode()


def stored_binaries() -> bool:
    """Stored binaries of decisions (``TUNEDSL_SAFE=binaries`` turns them off)."""
    return "binaries" not in safe_mode()


def no_bytecode_cache() -> bool:
    """``TUNEDSL_SAFE=bytecode``: never write expanded bytecode."""
    return "bytecode" in safe_mode()


def isolate() -> bool:
    """``TUNEDSL_ISOLATE=1``: measure configurations in a worker process, so one that
    crashes or hangs kills the worker, not this process (the site option ``isolate=``
    overrides it; ``tunedsl precompile --tune`` isolates by default)."""
    return _flag("TUNEDSL_ISOLATE")


TimingMode = Literal["auto", "graph", "events"]


def timing() -> TimingMode:
    """``TUNEDSL_TIMING=auto|graph|events``: how a GPU times configurations: CUDA events per
    launch, a replayed CUDA graph of many launches, or events with the leaders of a short
    kernel re-timed with graphs (``auto``, the default; see docs/runtime.md)."""
    return _choice("TUNEDSL_TIMING", "auto", ("auto", "graph", "events"))  # type: ignore[return-value]


def quiet() -> bool:
    """``TUNEDSL_QUIET=1``: no progress output while tuning, and no notices (such as "no GPU
    driver found: ... runs kernels through Triton's interpreter"); warnings still show."""
    return _flag("TUNEDSL_QUIET")


def redis_url() -> str | None:
    """``TUNEDSL_REDIS_URL=redis://[:PASSWORD@]HOST:PORT/DB``: a Redis server shared by a
    fleet for tuning records, looked up after the record files (needs ``tunedsl[redis]``;
    ``?socket_timeout=S`` sets the wait for each reply, default 0.5 s; docs/scale-out.md)."""
    url = os.environ.get("TUNEDSL_REDIS_URL", "").strip() or None
    if url is not None and not url.startswith(REDIS_SCHEMES):
        raise UsageError(
            f"TUNEDSL_REDIS_URL={redact_url(url)!r} is not a Redis URL; expected "
            "redis://[:PASSWORD@]HOST:PORT/DB (or rediss://, unix://)"
        )
    return url


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def distributed_mode() -> str:
    """``TUNEDSL_DISTRIBUTED=broadcast|allreduce|off``: how the ranks of an initialised
    ``torch.distributed`` process group agree on tuning decisions (default broadcast)."""
    return _choice("TUNEDSL_DISTRIBUTED", "broadcast", ("broadcast", "allreduce", "off"))


def tune_devices() -> str:
    """``TUNEDSL_TUNE_DEVICES=all|N|i,j,...``: the GPUs a tuning measures on in parallel:
    ``all`` (the default) every visible GPU of the caller's model, ``N`` the caller's and
    the next N-1 of its model (``1``: the caller's only), ``0,2`` those devices (``3,``: just
    device 3); the leaders are always re-measured on the caller's GPU (docs/scale-out.md)."""
    raw = os.environ.get("TUNEDSL_TUNE_DEVICES", "")
    text = raw.strip().lower() or "all"
    # Only the form here: which devices exist is known where a tuning starts.
    parts = [p.strip() for p in text.split(",") if p.strip()] if "," in text else [text]
    if text != "all" and not (parts and all(p.isdigit() and p.isascii() for p in parts)):
        raise UsageError(
            f"environment variable TUNEDSL_TUNE_DEVICES={raw!r}: expected 'all', a count "
            "like 2, or device indices like 0,1"
        )
    if "," not in text and text != "all" and int(text) < 1:
        raise UsageError(
            f"environment variable TUNEDSL_TUNE_DEVICES={raw!r}: the count must be at least 1"
        )
    return text


def no_auto_interpret() -> bool:
    """``TUNEDSL_NO_AUTO_INTERPRET=1``: never turn Triton's interpreter on by itself when no GPU
    driver is found (``tunedsl run``, the import hook and ``%load_ext tunedsl`` do by default)."""
    return _flag("TUNEDSL_NO_AUTO_INTERPRET")


# Query parameters that carry a credential (redis-py reads ``password`` from the query).
_SECRET_QUERY_KEYS = ("password", "passwd", "pass", "pwd", "auth", "token", "secret")


def redact_url(url: str) -> str:
    """``url`` without its credentials, for messages and `tunedsl env` (bug reports): the
    password of ``scheme://user:PASSWORD@`` (a lone ``scheme://SECRET@`` too) and the value
    of a ``?password=`` (or similar) query parameter, for every scheme (``redis://``,
    ``rediss://``, ``unix://``). Plain string work, so a malformed URL is redacted too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    head, qmark, query = rest.partition("?")
    query, hash_, fragment = query.partition("#")
    if not qmark:
        head, hash_, fragment = head.partition("#")
    if "@" in head:
        userinfo, _, tail = head.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        head = (f"{user}:***" if colon and user else ":***" if colon else "***") + "@" + tail
    if qmark:
        parts = []
        for item in query.split("&"):
            name, eq, _ = item.partition("=")
            secret = any(k in name.lower() for k in _SECRET_QUERY_KEYS)
            parts.append(f"{name}=***" if eq and secret else item)
        query = "&".join(parts)
    return f"{scheme}{sep}{head}{qmark}{query}{hash_}{fragment}"


def _redacted_redis_url() -> str | None:
    url = redis_url()
    return None if url is None else redact_url(url)


# Every variable tunedsl reads (``tunedsl env`` lists them with the value in force), with the
# function that validates it; Triton's variables that tunedsl honours follow.
SETTINGS: dict[str, Callable[[], object]] = {
    "TUNEDSL_CACHE_DIR": cache_dir_override,
    "TUNEDSL_AUTOTUNE": autotune_mode,
    "TUNEDSL_EFFORT": effort,
    "TUNEDSL_FORCE_RETUNE": force_retune,
    "TUNEDSL_PRINT_AUTOTUNING": print_autotuning,
    "TUNEDSL_COMPILE_WORKERS": compile_workers,
    "TUNEDSL_CONFIG_TIMEOUT": config_timeout_s,
    "TUNEDSL_COMPILE_PROCESSES": compile_processes,
    "TUNEDSL_RECORDS_PATH": records_path,
    "TUNEDSL_QUIET": quiet,
    "TUNEDSL_SAFE": lambda: ",".join(sorted(safe_mode())) or None,
    "TUNEDSL_NO_AUTO_INTERPRET": no_auto_interpret,
    "TUNEDSL_REDIS_URL": _redacted_redis_url,
    "TUNEDSL_DISTRIBUTED": distributed_mode,
    "TUNEDSL_TUNE_DEVICES": tune_devices,
    "TUNEDSL_SEARCH": search,
    "TUNEDSL_BUDGET": budget_s,
    "TUNEDSL_ISOLATE": isolate,
    "TUNEDSL_TIMING": timing,
    "TUNEDSL_LOCK_TIMEOUT": lock_timeout_s,
}
TRITON_SETTINGS = ("TRITON_INTERPRET", "TRITON_PRINT_AUTOTUNING", "TRITON_CACHE_DIR")


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
