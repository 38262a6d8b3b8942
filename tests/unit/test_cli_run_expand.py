"""``tunedsl run`` and ``tunedsl expand``, run as real commands in subprocesses."""

from __future__ import annotations

import importlib.util
import json
import os
import re
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
    for dsl in target.glob("*.dslpy"):  # DSL sources are kept out of linters' sight
        dsl.rename(dsl.with_suffix(".py"))
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
    # The README's command (`.venv/bin/python -m pytest`) does not put .venv/bin on PATH:
    # the console script installed with this interpreter sits beside it.
    beside = Path(sys.executable).parent / "tunedsl"
    exe = str(beside) if beside.exists() else shutil.which("tunedsl")
    assert exe is not None, f"no tunedsl console script beside {sys.executable} or on PATH"
    result = subprocess.run(
        [exe, "run", "probe_main.py", "5"], cwd=workdir, capture_output=True, text=True
    )
    assert result.returncode == 5, result.stderr
    assert probe(result)["path0"] == str(workdir)


def has_runtime() -> bool:
    return importlib.util.find_spec("tunedsl.runtime.dsl") is not None


def assert_rendered_dsl_error(stderr: str, path: Path) -> None:
    # file:line:col, the source line, a caret under `$tyle`, and the hint.
    lines = stderr.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"{path}:6:36: error:"))
    assert "$tyle" in lines[head]
    assert lines[head + 1].strip() == "blocks=cdiv(n, $tyle),"
    assert lines[head + 2].index("^") == lines[head + 1].index("$tyle")
    assert "did you mean `$tile`?" in lines[head + 3]


def test_expand_shows_the_expansion(workdir: Path) -> None:
    result = tunedsl("expand", "dsl_kernels.py", cwd=workdir)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "import tunedsl.runtime.dsl as __tunedsl_rt__" in out
    assert "__tunedsl_site_0__ = __tunedsl_rt__.make_site(" in out
    assert f"filename={str(workdir / 'dsl_kernels.py')!r}" in out
    # The only `$` left are in each site's launch text (a string the record digest covers).
    assert "launch='TILE=$tile; blocks=cdiv(n, $tile)'" in out
    assert "$" not in re.sub(r"launch='[^']*'", "", out)
    compile(out, "expanded", "exec")  # plain Python now


def test_expand_check_renders_dsl_error(workdir: Path) -> None:
    assert tunedsl("expand", "--check", "dsl_kernels.py", cwd=workdir).returncode == 0
    result = tunedsl("expand", "--check", "bad_placeholder.py", cwd=workdir)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert_rendered_dsl_error(result.stderr, workdir / "bad_placeholder.py")
    plain = tunedsl("expand", "bad_placeholder.py", cwd=workdir)
    assert (plain.returncode, plain.stdout) == (1, "")


def test_run_renders_dsl_syntax_error(workdir: Path) -> None:
    result = tunedsl("run", "bad_placeholder.py", cwd=workdir)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert_rendered_dsl_error(result.stderr, workdir / "bad_placeholder.py")


def test_run_dsl_error_in_an_imported_module(workdir: Path) -> None:
    result = tunedsl("run", "imports_bad.py", cwd=workdir)
    assert result.returncode == 1
    assert result.stdout == "before the import\n"
    assert f'File "{workdir / "imports_bad.py"}", line 4, in <module>' in result.stderr
    assert "<frozen" not in result.stderr  # no import-machinery noise
    assert_rendered_dsl_error(result.stderr, workdir / "bad_placeholder.py")


@pytest.mark.skipif(not has_runtime(), reason="tunedsl.runtime.dsl is not built yet")
def test_run_dsl_script_that_imports_dsl_sites(workdir: Path) -> None:
    (workdir / "uses_kernels.py").write_text(
        "from tunedsl import autotune\nimport dsl_kernels\n"
        "print(dsl_kernels.SITES, callable(dsl_kernels.__tunedsl_site_1__))\n"
    )
    first = tunedsl("run", "uses_kernels.py", cwd=workdir)
    assert (first.returncode, first.stdout) == (0, "2 True\n"), first.stderr
    second = tunedsl("run", "uses_kernels.py", cwd=workdir)  # now from the bytecode cache
    assert (second.returncode, second.stdout) == (0, "2 True\n"), second.stderr
