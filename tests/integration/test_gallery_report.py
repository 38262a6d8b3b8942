"""The gallery's pure parts: result files, example discovery, the Markdown/JSON report.

No torch or triton needed; the end-to-end runs are in test_gallery.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tunedsl.errors import UsageError
from tunedsl.gallery.plots import varying_fields
from tunedsl.gallery.report import render_markdown, table_row, write_report
from tunedsl.gallery.result import (
    ConfigTiming,
    ExampleResult,
    ResultError,
    load_result,
    write_result,
)
from tunedsl.gallery.runner import ExampleRun, default_examples_dir, discover


def a_result(name: str = "vector_add", correct: bool = True) -> ExampleResult:
    first = {"tile": 512, "num_warps": 4}
    chosen = {"tile": 2048, "num_warps": 4}
    return ExampleResult(
        example=name,
        device="NVIDIA H100 80GB HBM3",
        interpreted=False,
        problem="n=67108864 float32",
        key="float32[67108864]",
        config=chosen,
        config_source="tuned",
        time_ms=0.25,
        timing_method="triton.testing.do_bench median",
        torch_time_ms=0.30,
        first_config=first,
        first_config_time_ms=0.40,
        chosen_config_tuned_ms=0.20,
        timings=[ConfigTiming(first, 0.40), ConfigTiming(chosen, 0.20)],
        correct=correct,
        check_message="c: ok" if correct else "c: MISMATCH",
        versions={"triton": "3.6.0", "torch": "2.11.0"},
    )


def test_result_round_trips_and_keeps_field_order(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_result(a_result(), path)
    back = load_result(path)
    assert back == a_result()
    assert list(back.config) == ["tile", "num_warps"]  # the space's order, not sorted
    assert back.speedup_vs_first == pytest.approx(2.0)
    assert back.speedup_vs_torch == pytest.approx(1.2)
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temp file left


def test_a_flop_count_gives_both_throughputs(tmp_path: Path) -> None:
    """``report(flops=...)``: TFLOP/s of the tuned call and of PyTorch, in the result, its
    JSON and the table's vs-PyTorch cell; none under the interpreter."""
    flops = 2.0 * 4096**3  # 0.25 ms -> 549.8 TFLOP/s, 0.30 ms -> 458.1
    result = dataclasses.replace(a_result(), flops=flops)
    assert result.tflops == pytest.approx(549.76, rel=1e-3)
    assert result.torch_tflops == pytest.approx(458.13, rel=1e-3)
    path = tmp_path / "r.json"
    write_result(result, path)
    data = json.loads(path.read_text())
    assert data["flops"] == flops and data["tflops"] == pytest.approx(549.76, rel=1e-3)
    assert load_result(path) == result
    run = ExampleRun("mm", tmp_path / "mm.py", "ok", 0, 3.0, result, "", tmp_path / "mm.log")
    assert table_row(run)[6] == "1.20x (550 vs 458 TFLOP/s)"

    interpreted = dataclasses.replace(result, interpreted=True)
    assert interpreted.tflops is None and interpreted.torch_tflops is None
    # A result written before flops existed still loads, without throughput.
    del data["flops"], data["tflops"], data["torch_tflops"]
    path.write_text(json.dumps(data))
    old = load_result(path)
    assert old.flops is None and old.tflops is None
    assert table_row(dataclasses.replace(run, result=old))[6] == "1.20x"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "wrote no result file"),
        ("{not json", "cannot read the result"),
        ("[1, 2]", "expected a JSON object"),
        ('{"schema": 99}', "result schema 99"),
    ],
)
def test_bad_result_files_are_named_errors(tmp_path: Path, content, message) -> None:
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ResultError, match=message):
        load_result(path)


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    data = a_result().to_json()
    del data["correct"]
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match="'correct'"):
        load_result(path)


def test_discover_skips_helpers_and_checks_only(tmp_path: Path) -> None:
    for name in ("b.py", "a.py", "_helper.py", "notes.txt"):
        (tmp_path / name).write_text("")
    assert [p.name for p in discover(tmp_path)] == ["a.py", "b.py"]
    assert [p.name for p in discover(tmp_path, ["b.py", "a"])] == ["b.py", "a.py"]
    with pytest.raises(UsageError, match=r"--only c: no such example.*available: a, b"):
        discover(tmp_path, ["c"])
    with pytest.raises(UsageError, match="no example scripts"):
        discover(_empty(tmp_path))


def _empty(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_the_repository_examples_are_found() -> None:
    names = [p.stem for p in discover(default_examples_dir())]
    for expected in ("vector_add", "softmax", "fused_add_rmsnorm", "matmul", "histogram",
                     "persistent_matmul", "fused_attention"):  # fmt: skip
        assert expected in names


def runs(tmp_path: Path) -> list[ExampleRun]:
    log = tmp_path / "x.log"
    return [
        ExampleRun("vector_add", tmp_path / "vector_add.py", "ok", 0, 3.0, a_result(), "", log),
        ExampleRun(
            "wrong", tmp_path / "wrong.py", "wrong", 1, 2.0, a_result("wrong", False),
            "c: MISMATCH", log,
        ),
        ExampleRun("crash", tmp_path / "crash.py", "failed", 1, 0.5, None, "boom | bang", log),
        ExampleRun("hang", tmp_path / "hang.py", "timeout", None, 20.0, None, "killed", log),
    ]  # fmt: skip


def test_table_rows_say_what_happened(tmp_path: Path) -> None:
    rows = {run.name: table_row(run) for run in runs(tmp_path)}
    assert rows["vector_add"] == [
        "vector_add",
        "n=67108864 float32",
        "float32[67108864]",
        "`tile=2048, num_warps=4`",
        "250.0 µs",
        "2.00x",
        "1.20x",
        "yes",
    ]
    assert rows["wrong"][-1] == "**NO**"
    assert rows["crash"][-1] == "**FAILED**"
    assert rows["hang"][-1] == "**TIMEOUT**"


def test_markdown_and_json_report(tmp_path: Path) -> None:
    all_runs = runs(tmp_path)
    markdown = render_markdown(all_runs, {"vector_add": "plots/vector_add.png"}, "now")
    assert "Device: **NVIDIA H100 80GB HBM3**" in markdown
    assert "1/4 examples passed" in markdown
    assert "boom \\| bang" in markdown  # a pipe in a message does not break the table
    assert "![vector_add: time of every configuration](plots/vector_add.png)" in markdown
    assert "Triton interpreter" not in markdown

    write_report(all_runs, tmp_path / "out", {})
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["passed"] is False
    assert [e["status"] for e in data["examples"]] == ["ok", "wrong", "failed", "timeout"]
    assert data["examples"][0]["result"]["speedup_vs_first"] == pytest.approx(2.0)
    assert (tmp_path / "out" / "report.md").read_text().startswith("# tunedsl gallery")


def test_plots_label_only_the_fields_that_vary() -> None:
    configs = [
        {"block_m": 64, "block_k": 64, "num_warps": 4},
        {"block_m": 128, "block_k": 64, "num_warps": 4},
    ]
    assert varying_fields(configs) == ["block_m"]
    assert varying_fields(configs[:1]) == ["block_m", "block_k", "num_warps"]
