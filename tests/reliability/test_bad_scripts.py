"""Scripts that are not Python text (a NUL byte, UTF-16, a syntax error) given to `tunedsl
run`, `expand` and `sweep`: one message naming the file (and line) and the likely cause,
never a traceback through importlib. Real subprocesses, the CLI as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env

SCRIPTS = {
    "nul": (b"x = 1\n\x00\n", ":2: SyntaxError: source code string cannot contain null bytes"),
    "dsl_nul": (
        b"from tunedsl import autotune\nx = 1\ny = 2\n\x00\n",
        ":4: SyntaxError: source code string cannot contain null bytes",
    ),
    "utf16": ("from tunedsl import autotune\nx = 1\n".encode("utf-16"), ":1: SyntaxError: "),
}


def _tunedsl(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=child_env(tmp_path / "cache"), capture_output=True, text=True, timeout=120,
        cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize("kind", sorted(SCRIPTS))
@pytest.mark.parametrize("command", ["run", "expand"])
def test_a_script_that_is_not_text_is_named_with_its_line(
    tmp_path: Path, kind: str, command: str
) -> None:
    data, says = SCRIPTS[kind]
    script = tmp_path / f"{kind}.py"
    script.write_bytes(data)
    done = _tunedsl(tmp_path, command, str(script))
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{script}{says}"), lines[0]
    assert "not UTF-16 or a binary file" in lines[0]


@pytest.mark.parametrize("kind", ["nul", "utf16", "syntax"])
def test_sweep_of_a_script_that_does_not_compile_is_one_error(tmp_path: Path, kind: str) -> None:
    """Before: a traceback through importlib's frames (sweep imports the script to list its
    workloads). Now: one error, the file and line, no traceback."""
    data = SCRIPTS[kind][0] if kind in SCRIPTS else b"import tunedsl\n\ndef f(:\n    pass\n"
    script = tmp_path / f"{kind}.py"
    script.write_bytes(data)
    done = _tunedsl(tmp_path, "sweep", script.name, "--no-ray")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"tunedsl: error: {script.name} does not compile:")
    if kind == "syntax":
        assert f'File "{script}", line 3' in done.stderr, done.stderr
    else:
        assert f"{script.name}:{2 if kind == 'nul' else 1}: SyntaxError" in done.stderr


IMPORT_FAILS = {
    "missing_module": (
        "import tunedsl\nimport no_such_module_here\n",
        2,
        "ModuleNotFoundError: No module named 'no_such_module_here'",
    ),
    "raises": ("import tunedsl\n\n\nraise RuntimeError('no config file')\n", 4, "no config"),
    "exits": ("import sys\n\nsys.exit('needs --model')\n", 3, "SystemExit: needs --model"),
}


@pytest.mark.parametrize("kind", sorted(IMPORT_FAILS))
def test_sweep_of_a_script_whose_import_fails_is_one_error_as_precompile_gives(
    tmp_path: Path, kind: str
) -> None:
    """Before: the script's exception reached the user as a traceback through tunedsl's and
    importlib's frames (precompile printed one line). Now: one line naming the file, the
    error, the line that raised and the fix, as precompile's."""
    text, line, says = IMPORT_FAILS[kind]
    script = tmp_path / f"{kind}.py"
    script.write_text(text)
    done = _tunedsl(tmp_path, "sweep", script.name, "--no-ray")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    (error,) = [x for x in done.stderr.splitlines() if x.startswith("tunedsl: error:")]
    assert error.startswith(f"tunedsl: error: {script.name}: import failed: "), error
    assert says in error and f"(at {script}:{line})" in error, error
    assert "must import without error" in error, error


def test_sweep_shapes_given_as_json_text_says_it_names_a_file(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("x = 1\n")
    done = _tunedsl(tmp_path, "sweep", script.name, "--no-ray", "--shapes", '[{"n": 8}]')
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--shapes names a file" in done.stderr, done.stderr


def _limit_memory() -> None:  # the old code read /dev/zero until memory ran out
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.parametrize("planted", ["fifo", "dev_zero"])
def test_precompile_of_a_directory_skips_a_fifo_or_device_named_py(
    tmp_path: Path, planted: str
) -> None:
    """A FIFO named ``x.py`` under the directory hung `precompile DIR` for ever (the read
    blocks); a ``z.py`` link to /dev/zero was read until memory ran out. Only regular files
    are read, and the real module beside them is still precompiled."""
    import os

    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.py").write_text("from tunedsl import autotune\n\ndef f(n):\n    return n\n")
    if planted == "fifo":
        os.mkfifo(project / "a_fifo.py")
    else:
        (project / "a_zero.py").symlink_to("/dev/zero")
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--json", str(project)],
        env=child_env(tmp_path / "cache"), capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, preexec_fn=_limit_memory,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    import json

    summary = json.loads(done.stdout)
    assert summary["errors"] == [], summary
    assert summary["bytecode"]["compiled"] + summary["bytecode"]["cached"] == 1, summary


def test_precompile_of_a_fifo_named_on_the_command_line_says_what_it_is(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "x.py"
    os.mkfifo(fifo)
    done = _tunedsl(tmp_path, "precompile", str(fifo))
    assert done.returncode == 1, done.stderr
    assert f"tunedsl: error: precompile: {fifo} is not a regular file or a directory" in done.stderr


# -- settings that only a GPU run or a Redis lookup used to read --------------------------


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("TUNEDSL_TUNE_DEVICES", "fast", "expected 'all', a count like 2, or device indices"),
        ("TUNEDSL_TUNE_DEVICES", "0", "the count must be at least 1"),
        ("TUNEDSL_TUNE_DEVICES", "0,x", "expected 'all', a count like 2, or device indices"),
        ("TUNEDSL_REDIS_URL", "http://:pw@cache:6379/0", "is not a Redis URL"),
    ],
)
def test_tunedsl_env_lists_a_malformed_setting_as_invalid(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    """`tunedsl env` (what a user checks their settings with) listed these as in force: a
    typo in TUNEDSL_TUNE_DEVICES surfaced only on a GPU, mid-tuning. The Redis password
    stays out of the message."""
    import json

    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "env", "--json", "--no-device-probe"],
        env=child_env(tmp_path / "cache", **{variable: value}),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["settings"][variable]
    assert ": INVALID: " in shown and says in shown, shown
    assert "pw" not in shown, shown


@pytest.mark.parametrize("value", ["all", "2", "0,1", "3,", " ALL "])
def test_well_formed_tune_devices_are_accepted(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedsl import knobs

    monkeypatch.setenv("TUNEDSL_TUNE_DEVICES", value)
    assert knobs.tune_devices() == value.strip().lower()


TWICE = """import tunedsl


@tunedsl.workload
def warm(n=4):
    print("first ran", n)


@tunedsl.workload
def warm(n=8):
    print("second ran", n)
"""


@pytest.mark.parametrize("command", ["sweep", "precompile"])
def test_two_workloads_of_one_name_in_a_script_warn_naming_both_lines(
    tmp_path: Path, command: str
) -> None:
    """Before: the registry kept the second and the first was never swept nor precompiled,
    in silence. Now: one warning naming the name, both lines and the fix."""
    script = tmp_path / "twice.py"
    script.write_text(TWICE)
    argv = ["--no-ray"] if command == "sweep" else ["--target", "cuda:90"]
    done = _tunedsl(tmp_path, command, script.name, *argv)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "second ran" in done.stdout and "first ran" not in done.stdout
    said = [x for x in done.stderr.splitlines() if "is defined twice" in x]
    assert len(said) == 1, done.stderr
    assert f"@tunedsl.workload warm is defined twice in {script}, at lines 4 and 9" in said[0]
    assert said[0].startswith(f"{script}:9: UserWarning") and "rename one of them" in said[0]


def test_a_script_imported_again_does_not_warn_of_its_workloads(tmp_path: Path) -> None:
    """A sweep imports a script again when the file changed, with its workloads at new
    lines: each import registers them anew, and that is no second definition."""
    import warnings

    from tunedsl.precompile.workload import import_script, registered_workloads

    script = tmp_path / "again_once.py"
    script.write_text(TWICE.split("\n\n\n@tunedsl.workload\ndef warm(n=8)")[0] + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = import_script(script)
        script.write_text("\n\n" + script.read_text())
        second = import_script(script)
    try:
        assert not [w for w in caught if "defined twice" in str(w.message)], caught
        [again] = registered_workloads(second.__name__)
        assert again.line == 6 and second is not first
    finally:
        for name in {first.__name__, second.__name__}:
            sys.modules.pop(name, None)
