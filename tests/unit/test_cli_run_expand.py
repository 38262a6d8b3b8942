"""``tunedsl run`` and ``tunedsl expand``, run as real commands in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "dsl_fixtures"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    target = tmp_path / "scripts"
    shutil.copytree(FIXTURES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def tunedsl(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def probe(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_run_behaves_like_python_script(workdir: Path, tmp_path: Path) -> None:
    # Run from another directory with a relative path, as users do.
    result = tunedsl("run", "scripts/probe_main.py", "a b", "--flag", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    seen = probe(result)
    assert seen["argv"] == ["scripts/probe_main.py", "a b", "--flag"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(workdir)
    assert seen["file"] == str(workdir / "probe_main.py")
    assert seen["helper"] == "helper+leaf"  # a DSL script importing DSL modules
    assert seen["blocks"] == 4


def test_options_after_script_belong_to_the_script(workdir: Path) -> None:
    result = tunedsl("run", "probe_main.py", "--help", "-h", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert probe(result)["argv"] == ["probe_main.py", "--help", "-h"]


def test_same_result_as_plain_python_for_plain_script(workdir: Path) -> None:
    script = workdir / "plain_script.py"
    script.write_text("import sys\nprint(__name__, sys.argv[1:], sum(range(10)))\n")
    ours = tunedsl("run", "plain_script.py", "x", cwd=workdir)
    theirs = subprocess.run(
        [sys.executable, "plain_script.py", "x"], cwd=workdir, capture_output=True, text=True
    )
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout)


@pytest.mark.parametrize(
    ("how", "status", "stderr_has"),
    [
        ("7", 7, ""),
        ("0", 0, ""),
        ("none", 0, ""),
        ("fall-through", 0, ""),
        ("message", 1, "stopped: bad input"),
        ("interrupt", 130, "KeyboardInterrupt"),
    ],
)
def test_exit_status(workdir: Path, how: str, status: int, stderr_has: str) -> None:
    result = tunedsl("run", "exits.py", how, cwd=workdir)
    assert result.returncode == status, result.stderr
    assert stderr_has in result.stderr


def test_uncaught_exception_shows_the_users_line(workdir: Path) -> None:
    result = tunedsl("run", "raises.py", cwd=workdir)
    assert result.returncode == 1
    err = result.stderr
    assert err.startswith("Traceback (most recent call last):")
    assert f'File "{workdir / "raises.py"}", line 5, in inner' in err
    assert "return n / 0  # the line the traceback must show" in err  # via linecache
    assert f'File "{workdir / "raises.py"}", line 8, in <module>' in err
    assert "ZeroDivisionError: division by zero" in err
    assert "tunedsl" + os.sep + "cli" not in err  # no frames of tunedsl itself


def test_missing_script_is_exit_2(workdir: Path) -> None:
    result = tunedsl("run", "no_such_script.py", "arg", cwd=workdir)
    assert result.returncode == 2
    assert "cannot open script 'no_such_script.py'" in result.stderr
    assert "Traceback" not in result.stderr


def test_directory_is_not_a_script(workdir: Path) -> None:
    result = tunedsl("run", ".", cwd=workdir)
    assert result.returncode == 2
    assert "is a directory" in result.stderr


def test_run_help_and_missing_script(workdir: Path) -> None:
    helped = tunedsl("run", "--help", cwd=workdir)
    assert helped.returncode == 0
    assert "usage: tunedsl run" in helped.stdout
    missing = tunedsl("run", cwd=workdir)
    assert missing.returncode == 2
    assert "missing SCRIPT" in missing.stderr


def test_python_syntax_error_is_rendered_without_traceback(workdir: Path) -> None:
    (workdir / "broken.py").write_text("from tunedsl import autotune\n\ndef f(:\n    pass\n")
    result = tunedsl("run", "broken.py", cwd=workdir)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f'File "{workdir / "broken.py"}", line 3' in result.stderr
    assert "def f(:" in result.stderr


def test_expand_prints_python_that_compiles(workdir: Path) -> None:
    result = tunedsl("expand", "dsl_leaf.py", cwd=workdir)
    assert result.returncode == 0, result.stderr
    compile(result.stdout, "expanded", "exec")  # the output is plain Python
    assert 'NAME = "leaf"' in result.stdout or "NAME = 'leaf'" in result.stdout


def test_expand_reads_stdin(workdir: Path) -> None:
    result = tunedsl("expand", "-", cwd=workdir, stdin="from tunedsl import autotune\nx = 1\n")
    assert result.returncode == 0, result.stderr
    assert "x = 1" in result.stdout


def test_expand_check(workdir: Path) -> None:
    ok = tunedsl("expand", "--check", "dsl_leaf.py", cwd=workdir)
    assert (ok.returncode, ok.stdout) == (0, "")
    (workdir / "broken.py").write_text("from tunedsl import autotune\nx = (\n")
    bad = tunedsl("expand", "--check", "broken.py", cwd=workdir)
    assert bad.returncode == 1
    assert "broken.py" in bad.stderr and "Traceback" not in bad.stderr
    missing = tunedsl("expand", "--check", "nope.py", cwd=workdir)
    assert missing.returncode == 2
    assert "cannot open 'nope.py'" in missing.stderr


def test_console_script_runs_too(workdir: Path) -> None:
    exe = shutil.which("tunedsl")
    if exe is None:
        pytest.skip("the tunedsl console script is not installed")
    result = subprocess.run(
        [exe, "run", "probe_main.py", "5"], cwd=workdir, capture_output=True, text=True
    )
    assert result.returncode == 5, result.stderr
    assert probe(result)["path0"] == str(workdir)
