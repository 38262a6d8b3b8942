"""A site's settings: its space, static hints and tuning options, validated once.

The literal parts come from ``make_site`` (module load); the non-literal ones from the
site's ``lazy`` thunk, evaluated on the first call and whenever a new key is resolved.
Environment knobs (``TUNEDSL_AUTOTUNE``, ``TUNEDSL_EFFORT``) are read here too, so the
hot path never reads the environment.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedsl import knobs
from tunedsl.errors import UsageError, callable_name
from tunedsl.model.config import Config, as_config
from tunedsl.model.options import (
    HINT_NAMES,
    OPTION_NAMES,
    did_you_mean,
    option_choice_problem,
    triton_counterpart,
)
from tunedsl.model.space import Space, expand_space, search_space

# A space with more points than this (before its constraint) is never listed: the site
# searches it lazily (``LazyCandidates``); the engine samples rather than lists above it too.
LIST_LIMIT = 4096


@dataclass(frozen=True)
class Settings:
    """A site's options, validated, in one frozen object that travels whole: the site,
    the decision, the tuner and the measurers read the same one. A field left out takes
    its default; where an environment variable sets it, that is read when the object is
    built (``Settings()`` is the defaults the environment gives). A new option is a field
    here, its name in ``model/options.py``, and its check in ``resolve``."""

    configs: tuple[Config, ...] = ()  # the whole space, in order (empty when ``large``)
    hints: dict[str, Any] = field(default_factory=dict)  # static launch hints
    restore_value: tuple[str, ...] = ()
    reset_to_zero: tuple[str, ...] = ()
    prune: Callable[..., Any] | None = None
    verify: Any = None  # None/False, True, [names], or callable(inputs) -> {name: expected}
    rtol: float = 1e-3
    atol: float = 1e-3
    # rtol=/atol= given: integer outputs are compared within them too (else exactly)
    tolerance_given: bool = False
    pre_hook: Callable[..., Any] | None = None
    post_hook: Callable[..., Any] | None = None  # post_hook(args, exception=err or None)
    default: Config = field(default_factory=Config)
    mode: str = field(default_factory=knobs.autotune_mode)  # TUNEDSL_AUTOTUNE
    effort: str = field(default_factory=knobs.effort)  # TUNEDSL_EFFORT
    name: str | None = None
    isolate: bool = field(default_factory=knobs.isolate)  # measure in a worker process
    timing: str = field(default_factory=knobs.timing)  # one of TIMING_MODES (TUNEDSL_TIMING)
    capture: str = "raise"  # a miss during CUDA-graph capture: one of CAPTURE_MODES
    search: str = field(default_factory=knobs.search)  # strategy (TUNEDSL_SEARCH)
    seed: int = 0  # the strategy's seed (seed=)
    budget_s: float | None = field(default_factory=knobs.budget_s)  # None: the effort's
    space: Any = None  # the space as a SearchSpace when it is too large to list
    large: bool = False  # more than LIST_LIMIT points: never listed, searched lazily

    def verify_rtol(self, precision: float) -> float:
        """``rtol`` for a ``verify=`` output whose dtype's relative resolution is
        ``precision``: unless ``rtol=``/``atol=`` were given, no finer than one unit of it
        (a bfloat16 or float8 output summed in another order rounds one unit apart)."""
        return self.rtol if self.tolerance_given else max(self.rtol, precision)


# The options whose default the environment gives (the option's name -> the field's): left
# out or None (a choice also when empty), the field keeps its default.
_CHOICES = ("mode", "effort", "timing", "search")
FROM_ENVIRONMENT = {
    "mode": "mode",
    "effort": "effort",
    "isolate": "isolate",
    "timing": "timing",
    "search": "search",
    "budget": "budget_s",
}


def environment() -> tuple[Any, ...]:
    """The values the environment gives the fields of ``FROM_ENVIRONMENT``: settings resolved
    under the same values are the same."""
    return (
        knobs.autotune_mode(),
        knobs.effort(),
        knobs.search(),
        knobs.budget_s(),
        knobs.isolate(),
        knobs.timing(),
    )


def _names(value: Any, option: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise UsageError(
            f"{where}: {option}= must be a list of kernel parameter names (strings), not {value!r}"
        )
    return tuple(value)


# How tunedsl calls each function option: the call's arguments, and what they are.
_CALLED_AS = {
    "prune": (
        "configs, args",
        "the list of configurations and a dict of the call's arguments by parameter name, "
        "e.g. prune=lambda configs, args: configs",
    ),
    "pre_hook": (
        "args",
        "a dict of the kernel's arguments by parameter name (Triton's pre_hook), "
        "e.g. pre_hook=lambda args: args['out'].zero_()",
    ),
    "post_hook": (
        "args, exception=None",
        "a dict of the kernel's arguments by parameter name and exception= (Triton's "
        "post_hook), e.g. post_hook=lambda args, exception=None: None",
    ),
    "verify": (
        "inputs",
        "copies of the kernel's arguments by parameter name, and it returns the expected "
        "outputs by name (a reference, not a comparison), e.g. "
        "verify=lambda inputs: {'out': inputs['x'] + 1}",
    ),
}


def _callable(value: Any, option: str, where: str) -> Any:
    if value is None:
        return None
    if not callable(value):
        raise UsageError(f"{where}: {option}= must be callable, not {value!r}")
    # A function that cannot take the call failed deep in the tuner: say how it is called.
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin or C callable: no signature to check
        return value
    called_as, how = _CALLED_AS[option]
    try:
        signature.bind(
            *(a for a in called_as.split(", ") if "=" not in a),
            **{a.split("=")[0]: None for a in called_as.split(", ") if "=" in a},
        )
    except TypeError:
        name = callable_name(value)
        raise UsageError(
            f"{where}: {option}={name}{signature} cannot be called as {option}({called_as}): "
            f"tunedsl calls it with {how}"
        ) from None
    return value


def _tolerance(value: Any, option: str, default: float) -> float:
    if value is None:
        return default
    return knobs.finite_number(value, option, zero_ok=True)


# autotune_launch's keywords besides the options: a misspelling of one is named with it.
_CALL_KEYWORDS = ("space", "grid", "args", "kwargs", "key")


def resolve(
    space: Any, hints: Mapping[str, Any], options: Mapping[str, Any], where: str
) -> Settings:
    """Validate and combine; ``where`` names the site in error messages."""
    if space is None:
        raise UsageError(f"{where}: space= is required")
    for name in hints:
        if name not in HINT_NAMES:
            instead = triton_counterpart(name)
            meant = did_you_mean(name, (*HINT_NAMES, *OPTION_NAMES, *_CALL_KEYWORDS))
            what = "launch hint" if meant in HINT_NAMES else "keyword"
            raise UsageError(
                f"{where}: {instead}"
                if instead
                else f"{where}: unknown {what} {name!r}; did you mean `{meant}=`?"
                if meant
                else f"{where}: unknown launch hint {name!r}; hints: {', '.join(HINT_NAMES)}"
            )
    for name in options:
        if name not in OPTION_NAMES:
            raise UsageError(
                f"{where}: unknown option {name!r}; options: {', '.join(OPTION_NAMES)}"
            )
    lazy_space = None
    try:
        if isinstance(space, Space | Mapping):
            candidate = search_space(space)
            if candidate.size_hint() > LIST_LIMIT:
                lazy_space = candidate
        configs = expand_space(space) if lazy_space is None else ()
    except UsageError as err:  # the space's own message, at the site's place
        raise UsageError(f"{where}: {err}") from None
    given = {
        name: options[option]
        for option, name in FROM_ENVIRONMENT.items()
        if options.get(option) is not None and (name not in _CHOICES or options[option])
    }
    if "budget_s" in given:  # inf too: a record's budget must be finite (JSON has no Infinity)
        given["budget_s"] = knobs.finite_number(
            given["budget_s"],
            f"{where}: budget",
            unit=" of seconds",
            fix="leave budget= out for the effort's budget",
        )
    default = options.get("default")
    verify = options.get("verify")
    if isinstance(verify, (int, float)) and not isinstance(verify, bool):
        # 1 == True and 0 == False: without this, verify=1 failed deep in the measurer and
        # verify=0 turned verification off without a word.
        raise UsageError(
            f"{where}: verify={verify!r}: give True or False, a list of output parameter "
            "names, or a function of the inputs returning the expected outputs"
        )
    if verify is not None and not isinstance(verify, bool):
        verify = (
            _callable(verify, "verify", where)
            if callable(verify)
            else _names(verify, "verify", where)
        )
    site_name = options.get("name")
    if site_name is not None and (not isinstance(site_name, str) or not site_name):
        raise UsageError(f"{where}: name= must be a non-empty string, not {site_name!r}")
    # A literal space is checked by the expander; a computed one only here (first call).
    fields = (
        {name for cfg in configs for name in cfg}
        if lazy_space is None
        else set(getattr(lazy_space, "dims", ()))
    )
    for name in hints:
        if name in fields and hints[name] is not None:
            raise UsageError(
                f"{where}: `{name}=` is given both as a static hint and as a field of space=; "
                f"remove `{name}=` or the `{name}` field from the space"
            )
    capture = options.get("capture") or "raise"
    seed = options.get("seed", 0)
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"{where}: seed= must be an integer, not {seed!r}")
    out = Settings(
        configs=configs,
        hints={k: v for k, v in hints.items() if v is not None},
        restore_value=_names(options.get("restore_value"), "restore_value", where),
        reset_to_zero=_names(options.get("reset_to_zero"), "reset_to_zero", where),
        prune=_callable(options.get("prune"), "prune", where),
        verify=verify,
        rtol=_tolerance(options.get("rtol"), f"{where}: rtol", 1e-3),
        atol=_tolerance(options.get("atol"), f"{where}: atol", 1e-3),
        tolerance_given=options.get("rtol") is not None or options.get("atol") is not None,
        pre_hook=_callable(options.get("pre_hook"), "pre_hook", where),
        post_hook=_callable(options.get("post_hook"), "post_hook", where),
        default=default_config(configs, lazy_space, default, where),
        name=site_name,
        capture=capture,
        seed=seed,
        space=lazy_space,
        large=lazy_space is not None,
        **given,
    )
    _check_choices(out, where)
    _warn_tuning_against_environment(out, where)
    return out


def _warn_tuning_against_environment(settings: Settings, where: str) -> None:
    """A site's ``mode="on"`` wins over ``TUNEDSL_AUTOTUNE=off|cached``, and its ``budget=``
    over a smaller ``TUNEDSL_BUDGET``, as every option given at a site wins over its
    variable; since those variables are how a run says "do not tune here" or "not this
    long", tuning against them is said once."""
    from tunedsl.warn import warn_once

    raw = os.environ.get("TUNEDSL_AUTOTUNE", "")
    if settings.mode == "on" and raw and knobs.autotune_mode() != "on":
        warn_once(
            f"mode-against-environment:{where}:{raw}",
            f"{where}: mode='on' given here tunes on a miss although TUNEDSL_AUTOTUNE={raw} "
            "is set (a site's mode= wins over the variable); leave mode= out to let "
            "TUNEDSL_AUTOTUNE decide",
            UserWarning,
            stacklevel="user",
        )
    cap = knobs.budget_s()
    if cap is not None and settings.budget_s is not None and settings.budget_s > cap:
        warn_once(
            f"budget-against-environment:{where}:{cap}",
            f"{where}: budget={settings.budget_s:g} given here lets a search take longer than "
            f"TUNEDSL_BUDGET={cap:g} (a site's budget= wins over the variable); leave budget= "
            "out to let TUNEDSL_BUDGET decide",
            UserWarning,
            stacklevel="user",
        )


def _check_choices(settings: Settings, where: str) -> None:
    """The options that name one of a few choices, given or from the environment."""
    for option in ("mode", "effort", "timing", "capture", "search"):
        problem = option_choice_problem(option, getattr(settings, option))
        if problem is not None:
            raise UsageError(f"{where}: {problem}")
    if not isinstance(settings.isolate, bool):
        raise UsageError(f"{where}: isolate= must be True or False, not {settings.isolate!r}")


def default_config(
    configs: tuple[Config, ...], lazy_space: Any, default: Any, where: str
) -> Config:
    """The configuration a site falls back to: ``default=``, which must be one of the space's
    (``configs``, or ``lazy_space`` when the space is too large to list), else the first."""
    if default is not None:
        cfg = as_config(default, f"{where}: default=")
        if cfg in (configs if lazy_space is None else lazy_space):
            return cfg
        # Outside the space it would never launch: say so rather than run another one.
        fields = sorted(lazy_space.dims if lazy_space is not None else configs[0])
        if sorted(cfg) != fields:
            why = f"its fields are {', '.join(sorted(cfg))}; the space's, {', '.join(fields)}"
        else:
            example = configs[0] if lazy_space is None else lazy_space.first_valid()
            why = f"e.g. {example} is"
        raise UsageError(
            f"{where}: default={cfg} is not a configuration of space= ({why}); give one of "
            "the space's configurations, or leave default= out for the space's first"
        )
    if lazy_space is None:
        return configs[0]
    try:
        return lazy_space.first_valid()  # bounded: never scans the whole space
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None


def key_config(space: Any, default: Any, where: str) -> Config:
    """The configuration whose arguments key a plain-API call with ``args=fn``: ``default=``
    (checked as the site's settings check it), else the space's first valid point."""
    try:  # an empty axis or list, a constraint removing everything: named at the site
        if default is None and isinstance(space, Space | Mapping):
            return search_space(space).first_valid()  # never lists the space
        spec = search_space(space) if isinstance(space, Space | Mapping) else None
        large = spec if spec is not None and spec.size_hint() > LIST_LIMIT else None
        configs = expand_space(space) if large is None else ()
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None
    return default_config(configs, large, default, where)


class LazyCandidates:
    """The candidates of a space too large to list, for one call: membership is tested per
    point (the space's constraint, then ``prune=``); never iterated. ``[0]`` is the site's
    default (or the space's first valid point)."""

    def __init__(self, settings: Settings, bound: Mapping[str, Any]) -> None:
        self.settings = settings
        self.bound = dict(bound)

    def keep(self, batch: Sequence[Config]) -> list[Config]:
        """The configurations of ``batch`` in the space that prune= keeps."""
        inside = [c for c in batch if c in self.settings.space]
        if self.settings.prune is None or not inside:
            return inside
        returned = self.settings.prune(inside, self.bound)
        kept = set(as_config(c, "prune= result") for c in _kept(self.settings.prune, returned))
        return [c for c in inside if c in kept]

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Config) and bool(self.keep([config]))

    def __len__(self) -> int:
        # An upper bound (more than one); len() takes no more than sys.maxsize.
        return min(int(self.settings.space.size_hint()), sys.maxsize)

    def __getitem__(self, index: int) -> Config:
        if index != 0:
            raise IndexError("a lazy space is never listed")
        return self.settings.default

    def __iter__(self) -> Any:
        raise UsageError(
            f"this site's space has {int(self.settings.space.size_hint()):,} points, more than {LIST_LIMIT} (too many to "
            "list): TUNEDSL_DISTRIBUTED agreement and tunedsl precompile need a listed space; "
            "narrow the space (axes or a list of configurations) or tune it without them"
        )


class MissingArgument(KeyError):
    """A name ``prune=`` read that the call does not pass: a ``KeyError``, as a dict's, whose
    message names the names it holds."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ReadRecorder(dict):  # type: ignore[type-arg]
    """The argument mapping ``prune`` receives: it notes which names prune reads, so the
    site can key its decisions on those arguments' values (see docs/runtime.md)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()

    def __getitem__(self, name: Any) -> Any:
        self.read.add(name)
        return super().__getitem__(name)

    def __missing__(self, name: Any) -> Any:
        import difflib

        held = [str(k) for k in dict.keys(self)]
        same = [k for k in held if k.casefold() == str(name).casefold()]
        close = same or difflib.get_close_matches(str(name), held, n=1)
        raise MissingArgument(
            f"{name!r}: prune= read args[{name!r}], which this call does not pass"
            + (f"; did you mean {close[0]!r}?" if close else "")
            + f" (args holds {', '.join(held)})"
        )

    def get(self, name: Any, default: Any = None) -> Any:
        self.read.add(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self.read.add(name)  # type: ignore[arg-type]
        return super().__contains__(name)

    def _all(self) -> None:
        self.read.update(super().keys())

    def __iter__(self) -> Any:
        self._all()
        return super().__iter__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def values(self) -> Any:
        self._all()
        return super().values()

    def items(self) -> Any:
        self._all()
        return super().items()

    def copy(self) -> dict[str, Any]:
        self._all()
        return dict(super().items())


def apply_prune(settings: Settings, bound: Mapping[str, Any]) -> tuple[Config, ...]:
    """``prune(configs, args)`` narrows the space before benchmarking (Triton's early prune).
    Pass a ``ReadRecorder`` as ``bound`` to learn which arguments prune read."""
    if settings.prune is None:
        return settings.configs
    kept = settings.prune(
        list(settings.configs), bound if isinstance(bound, ReadRecorder) else dict(bound)
    )
    out = tuple(dict.fromkeys(as_config(c, "prune= result") for c in _kept(settings.prune, kept)))
    if not out:
        raise UsageError(
            f"prune={callable_name(settings.prune)} returned "
            + ("None (a missing `return`?)" if kept is None else "no configuration")
            + "; it must return the configurations it keeps, at least one"
        )
    return out


def _kept(prune: Any, kept: Any) -> Iterable[Any]:
    """What ``prune`` returned, checked to be a list of configurations (None: nothing)."""
    name = callable_name(prune)
    if isinstance(kept, (Config, Mapping)):
        # A configuration iterates as its field names: name it as the one it is.
        raise UsageError(
            f"prune={name} returned one configuration ({kept!r:.200}), not a list of them: "
            f"return the list of those it keeps, e.g. [{kept!r:.200}]"
        )
    if isinstance(kept, (set, frozenset)):
        raise UsageError(
            f"prune={name} returned a set, whose order changes from run to run (and with it "
            "the configuration launched first when tuning is off): return a list, e.g. "
            "[c for c in configs if ...]"
        )
    if kept is not None and not isinstance(kept, Iterable):
        raise UsageError(
            f"prune={name} returned {kept!r}; it must return a list of configurations "
            "(those it keeps)"
        )
    return kept or ()
