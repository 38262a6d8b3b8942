"""A new user's first hour, the pure parts: boolean knobs, TRITON_PRINT_AUTOTUNING, the progress line and
its log events, precompile's key column, the interpreter's gallery report, packaging data.

No torch or triton here (this file also runs on the other Pythons of CI)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from tunedsl import knobs
from tunedsl.errors import UsageError


# -- boolean knobs are validated like the others ----------------------------------------
@pytest.mark.parametrize(
    "name, reader",
    [
        ("TUNEDSL_QUIET", knobs.quiet),
        ("TUNEDSL_FORCE_RETUNE", knobs.force_retune),
    ],
)
def test_a_boolean_knob_rejects_banana(monkeypatch, name, reader) -> None:
    monkeypatch.setenv(name, "banana")
    with pytest.raises(UsageError) as err:
        reader()
    message = str(err.value)
    assert name in message and "'banana'" in message
    assert "use 1 or 0" in message and "accepted: 1, on, true, yes / 0, false, no, off" in message


def test_safe_mode_turns_off_every_fast_path_or_the_named_ones(monkeypatch) -> None:
    readers = {
        "direct": knobs.direct_launch,
        "repeat": knobs.repeat_check,
        "fused": knobs.fused_launch,
        "binaries": knobs.stored_binaries,
        "bytecode": lambda: not knobs.no_bytecode_cache(),
    }
    assert set(readers) == set(knobs.FAST_PATHS)
    for unset in ("", "0", "off"):
        monkeypatch.setenv("TUNEDSL_SAFE", unset)
        assert all(on() for on in readers.values())
    for every in ("1", "all", "yes"):
        monkeypatch.setenv("TUNEDSL_SAFE", every)
        assert not any(on() for on in readers.values())
    monkeypatch.setenv("TUNEDSL_SAFE", " Direct, binaries ")
    assert {name for name, on in readers.items() if not on()} == {"direct", "binaries"}
    monkeypatch.setenv("TUNEDSL_SAFE", "direct,warp")
    with pytest.raises(UsageError, match=r"TUNEDSL_SAFE names 'warp'.*direct, repeat, fused"):
        knobs.direct_launch()
    # The C fused launch is one fast path, ``fused``: an old setup's ``native`` is named,
    # with the valid names.
    monkeypatch.setenv("TUNEDSL_SAFE", "native")
    with pytest.raises(UsageError, match=r"names 'native'.*direct, repeat, fused, binaries"):
        knobs.fused_launch()


# -- Triton's own spelling --------------------------------------------------------------
def test_triton_print_autotuning_turns_the_table_on(monkeypatch) -> None:
    monkeypatch.delenv("TUNEDSL_PRINT_AUTOTUNING", raising=False)
    monkeypatch.delenv("TRITON_PRINT_AUTOTUNING", raising=False)
    assert knobs.print_autotuning() is False
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    assert knobs.print_autotuning() is True


def test_every_setting_is_listed_for_tunedsl_env() -> None:
    source = Path(knobs.__file__).read_text()
    import re

    read = set(re.findall(r'"(TUNEDSL_[A-Z_]+)"', source))
    assert read <= set(knobs.SETTINGS), read - set(knobs.SETTINGS)


# -- the progress line and the log events ----------------------------------------------
class Terminal(io.StringIO):
    """A text stream that says it is a terminal (what a pty gives the real process)."""

    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(progress, clock: Clock) -> None:
    for i, ms in enumerate([3.0, 1.5, 2.0]):
        clock.now += 0.6
        progress.compiled(f"cfg{i}")
        clock.now += 0.2
        progress.measured(f"cfg{i}", ms)
    progress.failed("cfg3", "compile: boom")
    progress.finish("cfg1", 1.4)


def test_progress_line_on_a_terminal_after_the_delay(monkeypatch) -> None:
    from tunedsl.progress import Progress

    monkeypatch.delenv("TUNEDSL_QUIET", raising=False)
    out, clock = Terminal(), Clock()
    p = Progress("vadd", 4, stream=out, clock=clock, delay_s=1.0)
    clock.now += 0.5
    p.compiled("cfg0")
    assert out.getvalue() == ""  # under a second: nothing drawn
    _run(p, clock)
    text = out.getvalue()
    assert "\r\x1b[Ktunedsl: tuning vadd  compiled 2/4  measured 1/4  best 3.0000 ms (cfg0)" in text
    assert "measured 3/4" in text and "best 1.5000 ms (cfg1)" in text
    # The live line ends as a one-line summary.
    assert text.endswith("\r\x1b[Ktunedsl: tuned vadd in 2.9 s: cfg1 1.4000 ms\n")


@pytest.mark.parametrize("quiet, stream", [("1", Terminal()), ("", io.StringIO())])
def test_no_progress_line_when_quiet_or_not_a_terminal(monkeypatch, quiet, stream) -> None:
    from tunedsl.progress import Progress

    monkeypatch.setenv("TUNEDSL_QUIET", quiet)
    clock = Clock()
    _run(Progress("vadd", 4, stream=stream, clock=clock, delay_s=0.0), clock)
    assert stream.getvalue() == ""


def test_the_log_carries_the_same_events(monkeypatch, caplog) -> None:
    from tunedsl.progress import Progress

    monkeypatch.setenv("TUNEDSL_QUIET", "1")  # the log does not depend on the terminal
    clock = Clock()
    with caplog.at_level(logging.DEBUG, logger="tunedsl"):
        _run(Progress("vadd", 4, stream=io.StringIO(), clock=clock), clock)
    events = [r.tunedsl_event for r in caplog.records if r.name == "tunedsl"]
    assert [e["event"] for e in events] == [
        "start", "compiled", "measured", "compiled", "measured", "compiled", "measured",
        "failed", "done",
    ]  # fmt: skip
    assert events[0]["total"] == 4 and events[2]["median_ms"] == 3.0
    assert events[-1]["config"] == "cfg1" and events[-1]["measured"] == 3
    assert events[-2]["why"] == "compile: boom"
    levels = {r.levelno for r in caplog.records if r.tunedsl_event["event"] in ("start", "done")}
    assert levels == {logging.INFO}


# -- summary rows are not cut in the middle of a key ------------------------------------
def test_precompile_key_column_keeps_whole_items() -> None:
    from tunedsl.cli.precompile import _key_text

    key = {f"arg{i}": f"float32[{i}x{i}]" for i in range(10)}
    text = _key_text(key)
    assert text.startswith("{arg0=float32[0x0], ") and text.endswith(" more}")
    shown = text[1:-1].split(", ")[:-1]
    assert all(item in {f"{k}={v}" for k, v in key.items()} for item in shown)
    assert _key_text({"n": 4}) == "{n=4}"


def test_precompile_key_column_shows_the_key_values_that_tell_rows_apart() -> None:
    # A site with `key=` and many arguments: every row shared the arguments shown and only
    # the `key=` value (or what `prune=` reads) differed, and that came last, counted in
    # "+N more", so the rows of the sweep's sizes read alike.
    from tunedsl.cli.precompile import _key_text

    args = {f"arg{i}": {"dtype": "float32", "stride": "s1"} for i in range(12)}
    rows = [
        _key_text({"args": args, "user_key": [m, 32, 32], "prune": {"M": {"value": m * 16}}})
        for m in (1, 2)
    ]
    assert rows[0] != rows[1], rows
    assert rows[0].startswith("{key=(1,32,32), prune:M=16, arg0=float32, "), rows[0]
    assert rows[0].endswith(" more}")


# -- no speed-ups under the interpreter -------------------------------------------------
def test_interpreted_results_show_no_speedups(tmp_path) -> None:
    from tunedsl.gallery.report import INTERPRETED_CELL, render_markdown, report_json
    from tunedsl.gallery.result import ExampleResult
    from tunedsl.gallery.runner import ExampleRun

    def result(interpreted: bool) -> ExampleResult:
        return ExampleResult(
            example="vector_add", device="cpu", interpreted=interpreted, problem="n=1000",
            key=None, config={"tile": 128}, config_source="tuned", time_ms=1.0,
            timing_method="wall", torch_time_ms=0.5, first_config={"tile": 64},
            first_config_time_ms=2.0, chosen_config_tuned_ms=1.0, correct=True,
        )  # fmt: skip

    run = ExampleRun("vector_add", tmp_path / "v.py", "ok", 0, 1.0, result(True), "", tmp_path)
    markdown = render_markdown([run], {}, "now")
    row = next(line for line in markdown.splitlines() if line.startswith("| vector_add"))
    assert row.count(INTERPRETED_CELL) == 2 and "2.00x" not in row
    data = report_json([run], {}, "now")["examples"][0]["result"]
    assert data["speedup_vs_first"] is None and data["speedup_vs_torch"] is None
    assert result(False).speedup_vs_first == pytest.approx(2.0)


# -- the examples: top-level examples/ in a checkout, tunedsl/examples in a wheel ---------------
def test_the_examples_are_found_beside_the_package_in_a_checkout() -> None:
    import tunedsl
    from tunedsl.gallery.runner import default_examples_dir

    found = default_examples_dir()
    assert found == Path(tunedsl.__file__).resolve().parent.parent / "examples"
    assert (found / "vector_add.py").is_file()


def test_progress_line_of_a_budgeted_search_shows_the_time_left(monkeypatch) -> None:
    from tunedsl.progress import Progress

    monkeypatch.delenv("TUNEDSL_QUIET", raising=False)
    out, clock = Terminal(), Clock()
    p = Progress("vadd", 0, stream=out, clock=clock, delay_s=0.0)  # 0: length unknown
    p.compiled("cfg0")
    clock.now += 0.5
    p.measured("cfg0", 2.0)
    clock.now += 1.0  # the line is redrawn at most a few times a second
    p.searching("auto:model", 7.6)
    assert out.getvalue().endswith(
        "\r\x1b[Ktunedsl: tuning vadd  compiled 1  measured 1  best 2.0000 ms (cfg0)  1.5 s"
        "  8 s left (auto:model)"
    )
