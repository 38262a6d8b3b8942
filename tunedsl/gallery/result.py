"""The result an example hands to the gallery: one JSON file per example, written atomically.

An example writes it when its ``--gallery-result PATH`` argument names a path (the gallery
runner passes one to each subprocess); the runner reads it back with :func:`load_result`, which names the
file and the field when something is missing, so a broken example is reported, not a crash.
Pure Python: no torch, no triton.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tunedsl.store import atomic

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ConfigTiming:
    """One configuration of the space and its measured time (None if it failed or was pruned)."""

    config: dict[str, Any]
    time_ms: float | None
    note: str = ""


@dataclass(frozen=True)
class ExampleResult:
    """What one example run measured and checked."""

    example: str
    device: str
    interpreted: bool
    problem: str
    key: str | None
    config: dict[str, Any]
    config_source: str | None
    time_ms: float | None
    timing_method: str
    torch_time_ms: float | None
    first_config: dict[str, Any] | None
    first_config_time_ms: float | None
    chosen_config_tuned_ms: float | None
    timings: list[ConfigTiming] = field(default_factory=list)
    correct: bool = False
    check_message: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    #: Floating-point operations of one call (``report(flops=...)``), for TFLOP/s.
    flops: float | None = None

    @property
    def tflops(self) -> float | None:
        """The tuned call's TFLOP/s; None without ``flops`` or under the interpreter."""
        return _throughput(self, self.time_ms)

    @property
    def torch_tflops(self) -> float | None:
        """The PyTorch reference's TFLOP/s, measured the same way."""
        return _throughput(self, self.torch_time_ms)

    @property
    def speedup_vs_first(self) -> float | None:
        """First configuration's time over the chosen one's, both from the tuner's timings;
        None under the interpreter (its times measure Python, so a ratio is no speed-up)."""
        if self.interpreted:
            return None
        return _ratio(self.first_config_time_ms, self.chosen_config_tuned_ms)

    @property
    def speedup_vs_torch(self) -> float | None:
        """PyTorch reference time over the chosen configuration's time, both measured alike;
        None under the interpreter."""
        if self.interpreted:
            return None
        return _ratio(self.torch_time_ms, self.time_ms)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA_VERSION
        data["speedup_vs_first"] = self.speedup_vs_first
        data["speedup_vs_torch"] = self.speedup_vs_torch
        data["tflops"] = self.tflops
        data["torch_tflops"] = self.torch_tflops
        return data


def _throughput(result: ExampleResult, time_ms: float | None) -> float | None:
    if result.interpreted or not result.flops or time_ms is None or time_ms <= 0:
        return None
    return result.flops / (time_ms * 1e-3) / 1e12


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def json_safe(value: Any) -> Any:
    """A configuration value as JSON can hold it: numbers, strings, bools, None; else its repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return repr(value)


def write_result(result: ExampleResult, path: str | os.PathLike[str]) -> None:
    """Write ``result`` to ``path`` atomically (temp file in the same directory + os.replace)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # indent=2 and the space's own field order: the file is read by people too
    atomic.write_text(target, json.dumps(result.to_json(), indent=2) + "\n", durable=False)


class ResultError(ValueError):
    """A result file that is missing, not JSON, or not of this schema."""


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "example": str,
    "device": str,
    "interpreted": bool,
    "problem": str,
    "config": dict,
    "timing_method": str,
    "correct": bool,
}
_OPTIONAL_NUMBERS = (
    "time_ms",
    "torch_time_ms",
    "first_config_time_ms",
    "chosen_config_tuned_ms",
    "flops",
)


def load_result(path: str | os.PathLike[str]) -> ExampleResult:
    """Read a result file written by :func:`write_result`; raise ResultError saying what is wrong."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except FileNotFoundError:
        raise ResultError(f"{path}: the example wrote no result file") from None
    except (OSError, json.JSONDecodeError) as err:
        raise ResultError(f"{path}: cannot read the result: {err}") from err
    if not isinstance(data, dict):
        raise ResultError(f"{path}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA_VERSION:
        raise ResultError(
            f"{path}: result schema {data.get('schema')!r}, expected {SCHEMA_VERSION}"
        )
    for name, kind in _REQUIRED.items():
        if not isinstance(data.get(name), kind):
            raise ResultError(f"{path}: field {name!r} is missing or not a {kind}")
    for name in _OPTIONAL_NUMBERS:
        value = data.get(name)
        if value is not None and not isinstance(value, (int, float)):
            raise ResultError(f"{path}: field {name!r} must be a number or null, got {value!r}")
    timings = []
    for i, row in enumerate(data.get("timings") or []):
        if not isinstance(row, dict) or not isinstance(row.get("config"), dict):
            raise ResultError(f"{path}: timings[{i}] must be an object with a 'config' object")
        time_ms = row.get("time_ms")
        if time_ms is not None and not isinstance(time_ms, (int, float)):
            raise ResultError(f"{path}: timings[{i}].time_ms must be a number or null")
        timings.append(ConfigTiming(row["config"], time_ms, str(row.get("note") or "")))
    first = data.get("first_config")
    return ExampleResult(
        example=data["example"],
        device=data["device"],
        interpreted=data["interpreted"],
        problem=data["problem"],
        key=None if data.get("key") is None else str(data["key"]),
        config=data["config"],
        config_source=None if data.get("config_source") is None else str(data["config_source"]),
        time_ms=data.get("time_ms"),
        timing_method=data["timing_method"],
        torch_time_ms=data.get("torch_time_ms"),
        first_config=first if isinstance(first, dict) else None,
        first_config_time_ms=data.get("first_config_time_ms"),
        chosen_config_tuned_ms=data.get("chosen_config_tuned_ms"),
        timings=timings,
        correct=data["correct"],
        check_message=str(data.get("check_message") or ""),
        versions={str(k): str(v) for k, v in (data.get("versions") or {}).items()},
        flops=data.get("flops"),
    )
