"""The gallery report: ``report.md`` (a Markdown table) and ``report.json``, written atomically."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunedsl.gallery.kit import format_config, format_ms, format_speedup
from tunedsl.gallery.result import ExampleResult
from tunedsl.gallery.runner import ExampleRun
from tunedsl.store import atomic

REPORT_SCHEMA_VERSION = 1

COLUMNS = (
    "Example",
    "Problem",
    "Key",
    "Chosen configuration",
    "Time",
    "vs first config",
    "vs PyTorch",
    "Correct",
)


# Under the interpreter a ratio of times compares Python overheads, not kernels: no speed-up.
INTERPRETED_CELL = "n/a (interpreter)"


def _cell(text: str) -> str:
    # A Markdown table cell: no pipes or newlines inside.
    return text.replace("|", "\\|").replace("\n", " ").strip() or "-"


def _correct_cell(run: ExampleRun) -> str:
    if run.status == "ok":
        return "yes"
    if run.status == "wrong":
        return "**NO**"
    return f"**{run.status.upper()}**"


def table_row(run: ExampleRun) -> list[str]:
    r = run.result
    if r is None:
        return [run.name, "-", "-", "-", "-", "-", "-", _correct_cell(run)]
    return [
        run.name,
        r.problem,
        r.key if r.key is not None else "-",
        f"`{format_config(r.config)}`",
        format_ms(r.time_ms),
        *(
            (INTERPRETED_CELL, INTERPRETED_CELL)
            if r.interpreted
            else (format_speedup(r.speedup_vs_first), _vs_torch(r))
        ),
        _correct_cell(run),
    ]


def _vs_torch(r: ExampleResult) -> str:
    """``1.05x``, with both throughputs when the example gave its FLOP count."""
    text = format_speedup(r.speedup_vs_torch)
    if r.tflops is not None and r.torch_tflops is not None:
        text += f" ({r.tflops:.0f} vs {r.torch_tflops:.0f} TFLOP/s)"
    return text


def _environment(runs: Sequence[ExampleRun]) -> dict[str, Any]:
    results = [run.result for run in runs if run.result is not None]
    first = results[0] if results else None
    return {
        "device": first.device if first else "unknown",
        "interpreted": bool(first and first.interpreted),
        "timing_method": first.timing_method if first else "unknown",
        "versions": dict(first.versions) if first else {},
    }


def render_markdown(runs: Sequence[ExampleRun], plots: dict[str, str], generated: str) -> str:
    env = _environment(runs)
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env["versions"].items()))
    passed = sum(run.passed for run in runs)
    lines = [
        "# tunedsl gallery",
        "",
        f"Device: **{env['device']}**. {versions}. Generated {generated}.",
        f"Timing: {env['timing_method']}. {passed}/{len(runs)} examples passed.",
        "",
    ]
    if env["interpreted"]:
        lines += [
            "> Run on the CPU through the Triton interpreter at small sizes: this proves the",
            "> examples run and compute the right thing; the times measure Python, not a GPU,",
            "> so no ratio of them is shown as a speed-up.",
            "",
        ]
    lines += [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    for run in runs:
        lines.append("| " + " | ".join(_cell(c) for c in table_row(run)) + " |")
    lines += [
        "",
        "*Time*: the tuned call as a user makes it. *vs first config*: the space's first "
        "configuration's time over the chosen one's (the tuner's own timings). *vs PyTorch*: "
        "the PyTorch reference's time over *Time*, measured the same way.",
        "",
    ]
    problems = [run for run in runs if not run.passed]
    if problems:
        lines += ["## Problems", ""]
        for run in problems:
            lines.append(
                f"- **{run.name}** ({run.status}, {run.seconds:.1f} s): {_cell(run.message)} "
                f"(log: `{run.log_path.name}` in `logs/`)"
            )
        lines.append("")
    if plots:
        lines += ["## Every configuration's time", ""]
        for name, rel in plots.items():
            lines += [f"### {name}", "", f"![{name}: time of every configuration]({rel})", ""]
    return "\n".join(lines)


def report_json(runs: Sequence[ExampleRun], plots: dict[str, str], generated: str) -> dict:
    return {
        "schema": REPORT_SCHEMA_VERSION,
        "generated": generated,
        "environment": _environment(runs),
        "passed": all(run.passed for run in runs),
        "examples": [
            {
                "name": run.name,
                "script": str(run.path),
                "status": run.status,
                "returncode": run.returncode,
                "seconds": round(run.seconds, 3),
                "message": run.message,
                "log": str(run.log_path),
                "plot": plots.get(run.name),
                "result": None if run.result is None else run.result.to_json(),
            }
            for run in runs
        ],
    }


def _write_atomic(path: Path, text: str) -> None:
    atomic.write_text(path, text, durable=False)


def write_report(runs: Sequence[ExampleRun], out_dir: Path, plots: dict[str, str]) -> Path:
    """Write ``report.md`` and ``report.json`` into ``out_dir``; return the Markdown path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = out_dir / "report.md"
    _write_atomic(md, render_markdown(runs, plots, generated))
    data = report_json(runs, plots, generated)
    _write_atomic(out_dir / "report.json", json.dumps(data, indent=2) + "\n")
    return md
