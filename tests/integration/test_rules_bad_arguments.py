"""Bad arguments of `tunedsl rules`: each a clear error naming the argument, before any
work, never passed over in silence (the real command in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rule_helpers import rules_cli

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]

SCRIPT = Path(__file__).parent / "sweep_fixtures" / "rule_vadd.py"


@pytest.mark.parametrize("shapes", ["missing", "not a list", "a directory"])
@pytest.mark.parametrize("action", ["build", "check"])
def test_a_shapes_file_that_cannot_be_read_is_an_error_even_when_nothing_is_measured(
    built_rules: Path, tmp_path: Path, shapes: str, action: str
) -> None:
    # The built rule's records timed every configuration: a build measures nothing, and read
    # --shapes only to measure, so a missing file was passed over and the build said 0.
    path = tmp_path / "shapes.json"
    if shapes == "not a list":
        path.write_text('{"n": 64}')
    elif shapes == "a directory":
        path.mkdir()
    where = ["--out", str(tmp_path / "again")] if action == "build" else [str(built_rules)]
    done = rules_cli(action, *where, "--script", str(SCRIPT), "--shapes", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"shapes file {path}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["build", "--out", ""], "--out is empty"),
        (["build", "--out", "rules", "--records", ""], "--records is empty"),
        (["show", ""], "an empty path"),
    ],
)
def test_an_empty_path_is_an_error_not_the_working_directory(
    built_rules: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list, says: str
) -> None:
    # `--out "$RULES"` with the variable unset: Path("") is the working directory.
    work = tmp_path / "work"
    work.mkdir()
    for path in built_rules.iterdir():  # (for `show ""`: rules the cwd would have shown)
        (work / path.name).write_bytes(path.read_bytes())
    before = sorted(p.name for p in work.iterdir())
    monkeypatch.chdir(work)
    done = rules_cli(*argv)
    assert done.returncode == 1 and says in done.stderr, done.stdout + done.stderr
    assert "rule for" not in done.stdout and sorted(p.name for p in work.iterdir()) == before


@pytest.mark.parametrize("action", ["show", "check"])
def test_a_named_file_that_is_no_rule_file_is_an_error_naming_it(
    built_rules: Path, tmp_path: Path, action: str
) -> None:
    # A rule file saved without its suffix (or a record named by mistake) was passed over in
    # silence beside a rule file, and alone read "no rule files (*.rule.json) in FILE".
    (rule,) = built_rules.glob("*.rule.json")
    other = tmp_path / "saved.json"
    other.write_bytes(rule.read_bytes())
    for argv in ([str(other)], [str(rule), str(other)]):
        done = rules_cli(action, *argv)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"{other} is not a rule file" in done.stderr and ".rule.json" in done.stderr
        assert "rule for" not in done.stdout and "Traceback" not in done.stderr


def test_rules_check_names_a_bad_shapes_entry_by_its_line_in_the_file(
    built_rules: Path, tmp_path: Path
) -> None:
    # `rules check --sample` measures every other entry here: the fifth entry is the third
    # of the sample, and it was named "shape 3" (its place in the sample), a line the file
    # does not have there, where `sweep` and `precompile` name the file and its line.
    path = tmp_path / "shapes.json"
    entries = ['{"n": 64}'] * 4 + ['{"n": 64, "m": 3}', '{"n": 64}']
    path.write_text("[\n  " + ",\n  ".join(entries) + "\n]\n")
    done = rules_cli(
        "check", str(built_rules), "--script", str(SCRIPT), "--shapes", str(path), "--sample", "3"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"shapes file {path}, line 6: entry 5 passes m=" in done.stderr, done.stderr
    assert "which workload add does not take" in done.stderr and "Traceback" not in done.stderr
