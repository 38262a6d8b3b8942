"""One PNG per example: every configuration's time as a bar, the chosen one highlighted.

matplotlib (Agg backend, no display) is optional: without it the gallery warns once and
writes no plots.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunedsl.gallery.kit import format_config, format_ms
from tunedsl.gallery.result import ConfigTiming, ExampleResult
from tunedsl.gallery.runner import ExampleRun
from tunedsl.store import atomic

PLOTS_SUBDIR = "plots"


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def varying_fields(configs: Sequence[dict[str, object]]) -> list[str]:
    """The fields whose value differs between configurations (the rest say nothing)."""
    names = list(dict.fromkeys(name for cfg in configs for name in cfg))
    varying = [n for n in names if len({repr(cfg.get(n)) for cfg in configs}) > 1]
    return varying or names


def plot_example(result: ExampleResult, path: Path) -> bool:
    """Draw ``result``'s configuration times into ``path``; False if there is nothing to draw."""
    if not result.timings:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    configs = [t.config for t in result.timings]
    shown = varying_fields(configs)
    fixed = {k: v for k, v in configs[0].items() if k not in shown}
    labels = [" ".join(f"{n}={cfg.get(n)}" for n in shown) for cfg in configs]
    times = [t.time_ms if t.time_ms is not None else 0.0 for t in result.timings]
    chosen = [t.config == result.config for t in result.timings]
    colors = [
        "tab:orange" if is_chosen else ("lightgray" if t.time_ms is None else "tab:blue")
        for t, is_chosen in zip(result.timings, chosen, strict=True)
    ]
    height = max(3.0, 0.28 * len(labels) + 1.8)
    fig, ax = plt.subplots(figsize=(10, height))
    try:
        y = list(range(len(labels)))
        ax.barh(y, times, color=colors)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()  # the space's first configuration on top
        for i, t in enumerate(result.timings):
            if t.time_ms is None:
                ax.text(0, i, f" failed or pruned {t.note}"[:80], va="center", fontsize=7)
        handles: list[Any] = [
            Patch(color="tab:orange", label="chosen"),
            Patch(color="tab:blue", label="tried"),
        ]
        if result.torch_time_ms is not None and not result.interpreted:
            handles.append(ax.axvline(result.torch_time_ms, color="tab:red", linestyle="--"))
            handles[-1].set_label(f"PyTorch ({format_ms(result.torch_time_ms)})")
        ax.legend(handles=handles, loc="lower right", fontsize=8)
        ax.set_xlabel("ms per call (the tuner's timing)")
        where = "Triton interpreter" if result.interpreted else result.device
        title = f"{result.example}: {result.problem} ({where})"
        if fixed:
            title += "\n" + format_config(fixed)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        # A new file under a random name beside it, renamed over it: never a name known
        # ahead, which another user who can write there could have made a link first.
        with atomic.replacing(path, suffix=".tmp.png", durable=False) as fh:
            fig.savefig(fh, dpi=100, format="png")
    finally:
        plt.close(fig)
    return True


def plot_record(record: Any, path: Path) -> bool:
    """``tunedsl cache show ID --plot FILE``: the gallery's plot of one stored record."""
    from tunedsl.gallery.kit import config_as_dict

    timings = []
    for r in record.results:
        if r.status == "ok" and r.median_ms is not None:
            timings.append(ConfigTiming(config_as_dict(r.config), float(r.median_ms)))
        else:
            timings.append(ConfigTiming(config_as_dict(r.config), None, f"{r.status}: {r.reason}"))
    device = record.device
    interpreted = str(device.get("type", "")) in ("interpreter", "cpu") or bool(
        record.context.get("env", {}).get("TRITON_INTERPRET")
    )
    chosen = config_as_dict(record.chosen)
    result = ExampleResult(
        example=str(record.kernel.get("qualname") or record.site),
        device=str(device.get("name") or device.get("type") or "unknown device"),
        interpreted=interpreted,
        problem=f"record {record.id}",
        key=None,
        config=chosen,
        config_source="disk",
        time_ms=None,
        timing_method=str(record.context.get("timer", "")),
        torch_time_ms=None,
        first_config=timings[0].config if timings else None,
        first_config_time_ms=timings[0].time_ms if timings else None,
        chosen_config_tuned_ms=None,
        timings=timings,
    )
    return plot_example(result, path)


def write_plots(runs: Sequence[ExampleRun], out_dir: Path) -> dict[str, str]:
    """Plot every run that has timings; return example name -> PNG path relative to out_dir."""
    if not matplotlib_available():
        warnings.warn(
            "matplotlib is not installed, so the gallery writes no plots; install it with "
            "`pip install 'tunedsl[gallery]'`",
            stacklevel=2,
        )
        return {}
    plots = {}
    for run in runs:
        rel = f"{PLOTS_SUBDIR}/{run.name}.png"
        (out_dir / rel).unlink(missing_ok=True)  # an earlier run's plot must not stay
        if run.result is not None and plot_example(run.result, out_dir / rel):
            plots[run.name] = rel
    return plots
