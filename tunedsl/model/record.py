"""A tuning record, as data: one decision per (site, key), with every configuration's result.

The schema and its strict validation (``Record.from_json`` raises ``InvalidRecord`` naming the
first bad field); storing, trusting and locking records is ``store/records.py``'s. Pure: the
engine and the tuner use these types without the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from tunedsl.model.config import Config

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "rejected")

#: The tool versions that can change the best choice, and so key a record (the compiler
#: and its backend: ptxas, target). torch's and tunedsl's versions are recorded in
#: ``Record.versions`` but an upgrade of either keeps the records.
KEYED_TOOLS = ("triton", "triton_backend")


def keyed_toolchain(versions: dict[str, Any]) -> dict[str, Any]:
    """The part of ``backends.triton.toolchain()`` that goes into a record's digest, with
    the record schema (a new schema may store different facts about the same choice)."""
    return {**{k: versions.get(k) for k in KEYED_TOOLS}, "record_schema": SCHEMA_VERSION}


class InvalidRecord(ValueError):
    """A record file that does not match the schema; the message says which field."""


@dataclass(frozen=True)
class ConfigResult:
    """What tuning learned about one configuration."""

    config: Config
    status: str  # "ok", "failed" (compile or run error) or "rejected" (verify mismatch)
    median_ms: float | None = None
    spread: float | None = None  # relative inter-quartile range of the repetitions
    reps: int | None = None
    min_ms: float | None = None
    reason: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # Triton launch options
    constexprs: dict[str, Any] = field(default_factory=dict)  # config-dependent constexprs
    round: int | None = None  # results with the same round were measured side by side

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"config": self.config.to_json(), "status": self.status}
        if self.status == "ok":
            out.update(median_ms=self.median_ms, spread=self.spread, reps=self.reps)
            out["min_ms"] = self.min_ms
        else:
            out["reason"] = self.reason
        out["options"] = self.options
        out["constexprs"] = self.constexprs
        if self.round is not None:
            out["round"] = self.round
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> ConfigResult:
        _expect(data, dict, where)
        status = data.get("status")
        if status not in STATUSES:
            raise InvalidRecord(f"{where}.status is {status!r}; expected one of {STATUSES}")
        config = _config(data.get("config"), f"{where}.config")
        options = _expect(data.get("options", {}), dict, f"{where}.options")
        constexprs = _expect(data.get("constexprs", {}), dict, f"{where}.constexprs")
        for name, value in constexprs.items():
            _constexpr(value, f"{where}.constexprs[{name!r}]")
        round_ = data.get("round")  # absent in records written before rounds existed
        if round_ is not None:
            _expect(round_, int, f"{where}.round")
        if status == "ok":
            return cls(
                config,
                status,
                median_ms=_not_negative(data.get("median_ms"), f"{where}.median_ms"),
                spread=_not_negative(data.get("spread"), f"{where}.spread"),
                reps=_reps(data.get("reps"), f"{where}.reps"),
                min_ms=_not_negative(data.get("min_ms"), f"{where}.min_ms"),
                options=options,
                constexprs=constexprs,
                round=round_,
            )
        reason = _expect(data.get("reason"), str, f"{where}.reason")
        return cls(
            config, status, reason=reason, options=options, constexprs=constexprs, round=round_
        )


@dataclass(frozen=True)
class Record:
    """One tuning decision, as stored on disk."""

    site: str
    digest: str
    key: dict[str, Any]
    chosen: Config
    results: tuple[ConfigResult, ...]
    kernel: dict[str, Any]  # module, qualname, file, source_hash
    signature: dict[str, Any]  # parameter -> Triton type ("*fp16", "i32", {"constexpr": v})
    device: dict[str, Any]
    versions: dict[str, Any]
    context: dict[str, Any]  # everything else in the digest: env, static hints
    tuning_s: float
    timestamp: float
    effort: str = "default"
    schema: int = SCHEMA_VERSION
    # Where the site is, for people and `cache gc`: "/abs/file.py:line:col" (1-based col);
    # never part of the digest (a site keeps its records when the file around it changes).
    location: str = ""
    # How the choice was searched (absent in older records): strategy as resolved
    # ("auto:exhaustive"), its seed, and the budget in seconds (None: no budget).
    strategy: str | None = None
    seed: int | None = None
    budget_s: float | None = None
    # Who measured it: a digest of the user and host (``store.records.this_user``). Only a
    # record this user measured makes its failures verdicts; any other's are hints.
    measured_by: str | None = None

    @property
    def id(self) -> str:
        """Short id for the CLI: the digest's first 12 hex digits."""
        return self.digest[:12]

    def result_for(self, config: Config) -> ConfigResult | None:
        for result in self.results:
            if result.config == config:
                return result
        return None

    def from_elsewhere(self) -> Record:
        """This record as one that entered from elsewhere (Redis, a shipped directory, a
        bundle): whoever it says measured it, its failures are hints here."""
        return self if self.measured_by is None else replace(self, measured_by=None)

    def timings(self) -> dict[Config, ConfigResult]:
        return {r.config: r for r in self.results}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "site": self.site,
            "digest": self.digest,
            "key": self.key,
            "chosen": self.chosen.to_json(),
            "results": [r.to_json() for r in self.results],
            "kernel": self.kernel,
            "signature": self.signature,
            "device": self.device,
            "versions": self.versions,
            "context": self.context,
            "tuning_s": self.tuning_s,
            "timestamp": self.timestamp,
            "effort": self.effort,
            "location": self.location,
            "strategy": self.strategy,
            "seed": self.seed,
            "budget_s": self.budget_s,
            "measured_by": self.measured_by,
        }

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """Validate and rebuild; raise InvalidRecord naming the first bad field."""
        _expect(data, dict, "record")
        schema = data.get("schema")
        if not isinstance(schema, int) or isinstance(schema, bool):
            raise InvalidRecord(f"record.schema is {schema!r}; expected an integer")
        if schema != SCHEMA_VERSION:
            raise InvalidRecord(
                f"record schema {schema} is not this tunedsl's schema {SCHEMA_VERSION}"
            )
        digest = _expect(data.get("digest"), str, "record.digest")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise InvalidRecord("record.digest is not a sha256 hex digest")
        results_raw = _expect(data.get("results"), list, "record.results")
        results = tuple(
            ConfigResult.from_json(item, f"record.results[{i}]")
            for i, item in enumerate(results_raw)
        )
        chosen = _config(data.get("chosen"), "record.chosen")
        if not any(r.config == chosen and r.status == "ok" for r in results):
            raise InvalidRecord("record.chosen is not among the record's successful results")
        return cls(
            site=_expect(data.get("site"), str, "record.site"),
            digest=digest,
            key=_expect(data.get("key"), dict, "record.key"),
            chosen=chosen,
            results=results,
            kernel=_expect(data.get("kernel"), dict, "record.kernel"),
            signature=_expect(data.get("signature"), dict, "record.signature"),
            device=_expect(data.get("device"), dict, "record.device"),
            versions=_expect(data.get("versions"), dict, "record.versions"),
            context=_expect(data.get("context"), dict, "record.context"),
            tuning_s=_not_negative(data.get("tuning_s"), "record.tuning_s"),
            timestamp=_timestamp(data.get("timestamp")),
            effort=_expect(data.get("effort", "default"), str, "record.effort"),
            schema=schema,
            location=_expect(data.get("location", ""), str, "record.location"),
            strategy=_optional(data.get("strategy"), str, "record.strategy"),
            seed=_optional(data.get("seed"), int, "record.seed"),
            budget_s=(
                None
                if data.get("budget_s") is None
                else _number(data["budget_s"], "record.budget_s")
            ),
            measured_by=_optional(data.get("measured_by"), str, "record.measured_by"),
        )


def _optional(value: Any, kind: type, where: str) -> Any:
    return None if value is None else _expect(value, kind, where)


def _expect(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidRecord(f"{where} is {value!r}; expected {kind.__name__}")
    return value


def _number(value: Any, where: str) -> float:
    try:  # float(): an int past any float raises OverflowError
        number = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise InvalidRecord(f"{where} is {_short(value)}; expected a finite number")
    return number


def _not_negative(value: Any, where: str) -> float:
    """A time or a spread: a finite number, never below zero (no timing is)."""
    number = _number(value, where)
    if number < 0:
        raise InvalidRecord(f"{where} is {_short(value)}; expected a number of at least 0")
    return number


def _reps(value: Any, where: str) -> int:
    """How many repetitions a successful result was timed over: at least one."""
    reps = _expect(value, int, where)
    if reps < 1:
        raise InvalidRecord(f"{where} is {_short(value)}; expected at least 1 repetition")
    return int(reps)


def _constexpr(value: Any, where: str) -> None:
    """A constexpr as a record holds it (``keys.readable_constexpr``): a JSON scalar, a list
    of them (a tuple), or a set's ``{"set": [...]}``; never another object."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            _constexpr(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        if list(value) != ["set"] or not isinstance(value["set"], list):
            raise InvalidRecord(
                f"{where} is {_short(value)}; expected a constexpr's value (a number, a "
                "string, a bool, null or a list of them)"
            )
        _constexpr(value["set"], where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidRecord(f"{where} is {_short(value)}; expected a finite number")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


#: The last second of the year 9999: a later (or negative) time is no clock's, and printing
#: its date (``cache ls``) raises OverflowError.
MAX_TIMESTAMP = 253402300799.0


def _timestamp(value: Any) -> float:
    when = _number(value, "record.timestamp")
    if not 0 <= when <= MAX_TIMESTAMP:
        raise InvalidRecord(f"record.timestamp is {value!r}; expected seconds from 1970 to 9999")
    return when


def _config(value: Any, where: str) -> Config:
    _expect(value, dict, where)
    try:
        return Config(value)
    except ValueError as err:
        raise InvalidRecord(f"{where}: {err}") from None


# -- files -----------------------------------------------------------------------------------
