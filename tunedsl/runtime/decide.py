"""Deciding a new key's configuration: default, stored record, or tuning (then a record).

Order (``mode`` from ``mode=`` or ``TUNEDSL_AUTOTUNE``):

- ``off``: the site's ``default=`` configuration (else the space's first), always;
- a valid record whose choice is in the current space and which measured every current
  configuration: use it (``source="disk"``);
- ``cached``: no record, so the default;
- ``on``: take the key's cross-process lock, look for a record again (another process may
  just have written it), else tune and write the record (``source="tuned"``). A record
  that chose a configuration no longer in the space, or that lacks configurations added
  since, still provides its timings: only new configurations and the leaders are measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from tunedsl import knobs
from tunedsl.runtime.api import LaunchResult
from tunedsl.runtime.config import Config
from tunedsl.runtime.identity import location, migrate
from tunedsl.runtime.keys import json_safe
from tunedsl.runtime.settings import Settings
from tunedsl.runtime.variant import Variant
from tunedsl.store import records as store

VariantsFor = Callable[[Sequence[Config] | None], tuple[list[Variant], dict[Config, str]]]


@dataclass(frozen=True)
class Decision:
    config: Config
    options: dict[str, Any]
    source: str  # "tuned", "disk" or "default"
    record: store.Record | None


def context(info: Any, settings: Settings) -> dict[str, Any]:
    """Process constants that belong in the digest (never in the per-call key)."""
    from tunedsl.backends import triton as bt

    device = bt.device_facts()
    return {
        "kernel": {
            "qualname": info.qualname,
            "module": info.module,
            "source_hash": info.source_hash,
        },
        "hints": json_safe(settings.hints),
        "device": {k: device.get(k) for k in ("type", "name", "capability", "arch")},
        "toolchain": store.keyed_toolchain(bt.toolchain()),  # not torch's, not tunedsl's
        "env": bt.triton_env(),
    }


def _options(config: Config, settings: Settings) -> dict[str, Any]:
    from tunedsl.backends.triton import target_facts
    from tunedsl.runtime.hints import launch_options

    return launch_options(config, settings.hints, target_facts())


def _usable(
    record: store.Record | None, settings: Settings
) -> tuple[bool, dict[Config, store.ConfigResult]]:
    """Whether ``record`` decides this key as is, and the timings it can contribute."""
    if record is None:
        return False, {}
    space = set(settings.configs)
    previous = {r.config: r for r in record.results if r.config in space}
    if record.chosen not in space:
        store.warn_once(
            f"space:{record.digest}",
            f"tuning record {record.id} chose {record.chosen}, which is not in the current "
            "space of this site; tuning again (its other timings are reused)",
        )
        return False, previous
    missing = space - set(previous)
    return not missing, previous


def decide(
    site_id: str,
    kernel: Any,
    info: Any,
    settings: Settings,
    readable: dict[str, Any],
    ctx: dict[str, Any],
    digest: str,
    variants_for: VariantsFor,
) -> Decision:
    if settings.mode == "off":
        return Decision(settings.default, _options(settings.default, settings), "default", None)
    force = knobs.force_retune()
    record = None if force else store.load_record(digest) or migrate(site_id, digest, readable, ctx)
    usable, previous = _usable(record, settings)
    if usable and record is not None:
        return Decision(record.chosen, _options(record.chosen, settings), "disk", record)
    if settings.mode == "cached":
        return Decision(settings.default, _options(settings.default, settings), "default", None)
    with store.record_lock(digest):
        if not force:
            record = store.load_record(digest)
            usable, previous = _usable(record, settings)
            if usable and record is not None:
                return Decision(record.chosen, _options(record.chosen, settings), "disk", record)
        else:
            previous = {}
        record = tune_and_record(
            site_id, kernel, info, settings, readable, ctx, digest, variants_for, previous
        )
    return Decision(record.chosen, _options(record.chosen, settings), "tuned", record)


def tune_and_record(
    site_id: str,
    kernel: Any,
    info: Any,
    settings: Settings,
    readable: dict[str, Any],
    ctx: dict[str, Any],
    digest: str,
    variants_for: VariantsFor,
    previous: Mapping[Config, store.ConfigResult],
) -> store.Record:
    """Tune this key (reusing ``previous`` timings) and persist the record."""
    from tunedsl.backends import triton as bt
    from tunedsl.tuning.tuner import TuneRequest, tune

    variants, infeasible = variants_for(None)
    outcome = tune(
        TuneRequest(
            kernel=kernel,
            variants=variants,
            infeasible=infeasible,
            previous=dict(previous),
            restore_value=settings.restore_value,
            reset_to_zero=settings.reset_to_zero,
            verify=settings.verify,
            rtol=settings.rtol,
            atol=settings.atol,
            pre_hook=settings.pre_hook,
            post_hook=settings.post_hook,
            effort=settings.effort,
        )
    )
    first = variants[0] if variants else None
    signature = replay_signature(kernel, info, first) if first else {}
    record = store.Record(
        site=site_id,
        digest=digest,
        key=readable,
        chosen=outcome.chosen,
        results=tuple(outcome.results),
        kernel=info.describe(),
        signature=signature,
        device=bt.device_facts(),
        versions=bt.toolchain(),
        context={"hints": ctx["hints"], "env": ctx["env"], "timer": outcome.timer},
        tuning_s=outcome.tuning_s,
        timestamp=store.now(),
        effort=settings.effort,
        location=location(site_id),
    )
    store.save_record(record)
    return record


def replay_signature(kernel: Any, info: Any, variant: Variant) -> dict[str, Any]:
    """Each argument's Triton type with Triton's own specialization (``"*fp16:D"``,
    ``{"constexpr": 1}``), so ``precompile --replay`` rebuilds exactly a launch's binary.
    Under the interpreter (no Triton binder for a target) the plain types."""
    from tunedsl.backends import triton as bt

    if not bt.interpreting() and info.jit:
        try:
            from tunedsl.backends.triton_compile import triton_specialization

            return triton_specialization(kernel, variant.args, variant.kwargs)
        except Exception:  # an unexpected argument kind: the plain types still replay
            pass
    return bt.triton_signature(info, bt.bind_arguments(info, variant.args, variant.kwargs))


def print_table(label: str, result: LaunchResult, out: TextIO) -> None:
    """``TUNEDSL_PRINT_AUTOTUNING=1``: the key, the winner and every configuration's time."""
    record = result.record
    lines = [f"tunedsl: tuned {label}", f"  key: {json_safe(result.key)}"]
    if record is not None:
        lines.append(f"  record: {record.id}, tuning took {record.tuning_s:.2f} s")
    lines.append(f"  winner: {result.config}")
    if record is not None:
        lines.append(f"  {'configuration':<48} {'median ms':>10} {'spread':>7} {'reps':>5}")
        for r in sorted(record.results, key=lambda r: (r.status != "ok", r.median_ms or 0.0)):
            mark = "*" if r.config == result.config else " "
            if r.status == "ok":
                lines.append(
                    f" {mark}{r.config!s:<48} {r.median_ms:>10.4f} {r.spread:>6.1%} {r.reps:>5}"
                )
            else:
                lines.append(f" {mark}{r.config!s:<48} {r.status}: {r.reason}")
    print("\n".join(lines), file=out, flush=True)
