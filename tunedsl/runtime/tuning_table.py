"""The table ``TUNEDSL_PRINT_AUTOTUNING=1`` prints after a tune (runtime layer)."""

from __future__ import annotations

from typing import TextIO

from tunedsl.model.keys import json_safe
from tunedsl.runtime.result import LaunchResult


def print_table(label: str, result: LaunchResult, out: TextIO) -> None:
    """``TUNEDSL_PRINT_AUTOTUNING=1`` (or ``TRITON_PRINT_AUTOTUNING=1``): the key, the winner
    and every configuration's time; leaders whose time is a re-measurement are marked, so the
    starred winner is never mistaken for a slower row."""
    record = result.record
    lines = [f"tunedsl: tuned {label}", f"  key: {json_safe(result.key)}"]
    if record is not None:
        lines.append(f"  record: {record.id}, tuning took {record.tuning_s:.2f} s")
    lines.append(f"  winner: {result.config}")
    if record is not None:
        lines.append(f"  {'configuration':<48} {'median ms':>10} {'spread':>7} {'reps':>5}")
        remeasured = 0
        for r in sorted(record.results, key=lambda r: (r.status != "ok", r.median_ms or 0.0)):
            mark = "*" if r.config == result.config else " "
            if r.status == "ok":
                # The tuner's note, in memory only: "re-measured" or an interpreter twin.
                remeasured += r.reason == "re-measured"
                note = f"  {r.reason}" if r.reason else ""
                lines.append(
                    f" {mark}{r.config!s:<48} {r.median_ms:>10.4f} {r.spread:>6.1%} "
                    f"{r.reps:>5}{note}"
                )
            else:
                lines.append(f" {mark}{r.config!s:<48} {r.status}: {r.reason}")
        if remeasured:
            lines.append(
                f"  the {remeasured} leading configurations were measured again in interleaved "
                "rounds; * is the lowest re-measured median (other rows: one pass each)"
            )
    print("\n".join(lines), file=out, flush=True)
