"""``tunedsl lint`` and ``tunedsl expand``: the `//` grid warning, and files that are no
files (a FIFO, a device), for them and for ``tunedsl run``. Real subprocesses, real files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """\
from tunedsl import autotune, cdiv


def floor(a, n):
    return autotune(space={"tile": [32, 64]}, blocks=n // $tile, k(a, n, TILE=$tile))


def meant(a, n):
    return autotune(space={"tile": [32, 64]}, blocks=n // $tile, k(a, n, T=$tile))  # noqa: TDS001


def rounded(a, n):
    return autotune(space={"tile": [32, 64]}, blocks=(cdiv(n, $tile), n // 2), k(a, n, T=$tile))


def nested(a, m):
    return autotune(space={"tile": [32, 64]}, blocks=(1, (m + 1) // ($tile * 2)), k(a, m, T=$tile))
"""


def tunedsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "tunedsl", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:  # killed by subprocess.run
        pytest.fail(f"tunedsl {' '.join(args)} did not return: it blocked reading its input")


def _ruff_or_skip(tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "ruff").exists() and shutil.which("ruff") is None:
        pytest.skip("ruff is not installed")
    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["F"]\nignore = ["F821"]\n')


def test_lint_warns_of_a_floor_divided_grid_and_says_use_cdiv(tmp_path: Path) -> None:
    _ruff_or_skip(tmp_path)
    (tmp_path / "grid.py").write_text(SCRIPT)
    proc = tunedsl("lint", "grid.py", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert lines == [
        "grid.py:5:54: TDS001 warning: blocks= uses `//` on the configuration field $tile: "
        "`n // $tile` rounds down, so when n is not a multiple of $tile the last, partial "
        "block is never launched; use cdiv(n, $tile) (or add `# noqa: TDS001` where the "
        "floor is meant)",
        "grid.py:17:58: TDS001 warning: blocks= uses `//` on the configuration field $tile: "
        "`(m + 1) // ($tile * 2)` rounds down, so when m + 1 is not a multiple of $tile * 2 "
        "the last, partial block is never launched; use cdiv(m + 1, $tile * 2) (or add "
        "`# noqa: TDS001` where the floor is meant)",
    ], proc.stdout + proc.stderr
    # A warning, not an error: the exit status is ruff's (clean here), and the module still
    # expands (a user may mean the floor).
    assert proc.returncode == 0, proc.stderr
    assert tunedsl("expand", "--check", "grid.py", cwd=tmp_path).returncode == 0


ROUNDED_UP = """\
from tunedsl import autotune


def a(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n + $tile - 1) // $tile, k(x, n, T=$tile))


def b(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n + ($tile - 1)) // $tile, k(x, n, T=$tile))


def c(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=-(-n // $tile), k(x, n, T=$tile))


def d(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(1, (n - 1) // $tile + 1), k(x, n, T=$tile))


def e(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n - 1 + $tile) // $tile, k(x, n, T=$tile))


def floor(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n + $tile - 2) // $tile, k(x, n, T=$tile))


def over(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n + $tile) // $tile, k(x, n, T=$tile))


def short(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n - 1) // $tile, k(x, n, T=$tile))


def span(x, lo, hi):
    return autotune(space={"tile": [32, 64]}, blocks=(hi - lo + $tile - 1) // $tile, k(x, hi, T=$tile))


def interior(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(n - 2) // $tile, k(x, n, T=$tile))
"""


def test_lint_takes_the_round_up_idioms_for_what_they_are(tmp_path: Path) -> None:
    # `(n + $tile - 1) // $tile` (Triton's own cdiv), `-(-n // $tile)` and
    # `(n - 1) // $tile + 1` round up: each was warned of, with a "fix" that was wrong
    # (`cdiv(n + $tile - 1, $tile)` launches a block too many; `cdiv(-n, $tile)` a
    # negative grid). A numerator one short of rounding up is still named.
    _ruff_or_skip(tmp_path)
    (tmp_path / "up.py").write_text(ROUNDED_UP)
    proc = tunedsl("lint", "up.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # `(n + $tile) // $tile` launches a block too many where $tile divides n, never too few;
    # `(n - 1) // $tile` is short, and its fix covers n (`cdiv(n - 1, $tile)` was offered,
    # itself a block short where $tile divides n)
    # `(hi - lo + $tile - 1) // $tile` rounds up a span; `(n - 2) // $tile` keeps its count
    assert [line.split(": TDS001")[0] for line in lines] == [
        "up.py:25:54",
        "up.py:33:54",
        "up.py:41:54",
    ], proc.stdout
    assert "use cdiv(n, $tile)" in lines[1] and "cdiv(n - 1" not in lines[1], proc.stdout
    assert "use cdiv(n - 2, $tile)" in lines[2], proc.stdout


def test_lint_status_still_counts_ruffs_findings_beside_the_warning(tmp_path: Path) -> None:
    _ruff_or_skip(tmp_path)
    (tmp_path / "grid.py").write_text("import os\n" + SCRIPT)
    proc = tunedsl("lint", "grid.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "grid.py:1:8: F401" in proc.stdout and "grid.py:6:54: TDS001" in proc.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("command", [["expand"], ["expand", "--check"], ["lint"]])
def test_expand_and_lint_refuse_a_fifo_naming_it(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "script.py"
    os.mkfifo(fifo)
    proc = tunedsl(*command, "script.py", cwd=tmp_path)  # no writer: reading would wait forever
    assert proc.returncode == 2
    assert f"tunedsl {command[0]}: error: cannot open 'script.py': is a FIFO, not a regular file" in proc.stderr  # fmt: skip
    assert "give a source file" in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("command", ["expand", "lint"])
def test_expand_and_lint_refuse_a_device(tmp_path: Path, command: str) -> None:
    proc = tunedsl(command, "/dev/zero", cwd=tmp_path)  # would be read until memory ran out
    assert proc.returncode == 2
    assert "cannot open '/dev/zero': is a character device, not a regular file" in proc.stderr


def _run_limited(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tunedsl run`` in a process of at most 2 GiB of address space, so that a run that
    reads a device until memory runs out fails there instead of taking the machine's."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    try:
        return subprocess.run(
            [sys.executable, "-m", "tunedsl", "run", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=limit,
        )
    except subprocess.TimeoutExpired:  # killed by subprocess.run
        pytest.fail(f"tunedsl run {' '.join(args)} did not return: it blocked reading its script")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_run_refuses_a_fifo_naming_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "script.py")
    proc = _run_limited("script.py", cwd=tmp_path)  # no writer: reading would wait forever
    assert proc.returncode == 2, proc.stderr
    assert "tunedsl run: error: cannot open script 'script.py': is a FIFO, not a regular file" in proc.stderr  # fmt: skip
    assert "give a source file" in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_run_refuses_a_device(tmp_path: Path) -> None:
    proc = _run_limited("/dev/zero", cwd=tmp_path)  # would be read until memory ran out
    assert proc.returncode == 2, proc.stderr
    assert "cannot open script '/dev/zero': is a character device, not a regular file" in proc.stderr  # fmt: skip
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("macro", "error"),
    [
        (
            'autotune(space={"tile": [32, 64]}, blocks=cdiv(n, $tiel), k(a, n, T=$tile))',
            "grid.py:5:62: error: `$tiel` is not a field of `space=`",
        ),
        (
            'autotune(space={"tile": [32, 64]}, blocks=cdiv(n, $tile))',
            "grid.py:5:12: error: autotune(...) needs the kernel launch as its positional argument",
        ),
        (
            'autotune(space={"tile": [32, 64]}, blocks=(1, 2, 3, $tile), k(a, n, T=$tile))',
            "grid.py:5:54: error: blocks= must be an int or a tuple of one to three ints",
        ),
    ],
)
def test_lint_reports_a_dsl_error_that_expand_rejects(
    tmp_path: Path, macro: str, error: str
) -> None:
    # ruff is clean on the rewrite, but the module does not expand: lint must not say clean
    # about a file that `tunedsl run` and `tunedsl expand --check` refuse.
    _ruff_or_skip(tmp_path)
    (tmp_path / "grid.py").write_text(
        f"from tunedsl import autotune, cdiv\n\n\ndef f(a, n):\n    return {macro}\n"
    )
    assert tunedsl("expand", "--check", "grid.py", cwd=tmp_path).returncode == 1
    proc = tunedsl("lint", "grid.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert error in proc.stdout, proc.stdout + proc.stderr
    assert "hint:" in proc.stdout


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (  # one `(` left open in blocks=: the scan loses track of the brackets
            'autotune(space={"tile": [32, 64]},\n'
            "                    blocks=(cdiv(n, $tile), 1,\n"
            "                    k(a, n, T=$tile))\n",
            "'(' was never closed",
        ),
        (  # a comma missing between two keywords: the scan goes through
            'autotune(space={"tile": [32, 64]}\n'
            "                    blocks=cdiv(n, $tile),\n"
            "                    k(a, n, T=$tile))\n",
            "Perhaps you forgot a comma?",
        ),
    ],
    ids=["unclosed-paren", "missing-comma"],
)
def test_lint_of_a_dsl_file_that_does_not_parse_reports_the_parse_error_alone(
    tmp_path: Path, call: str, error: str
) -> None:
    # ruff was run on the raw DSL text beside the real error, and reported a `$` or "positional
    # argument after keyword arguments" that are no mistakes of the user's.
    _ruff_or_skip(tmp_path)
    (tmp_path / "grid.py").write_text(
        f"from tunedsl import autotune, cdiv\n\n\ndef f(a, n):\n    return {call}"
    )
    expanded = tunedsl("expand", "--check", "grid.py", cwd=tmp_path)
    assert expanded.returncode == 1 and error in expanded.stderr, expanded.stderr
    proc = tunedsl("lint", "grid.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert error in proc.stdout and "line 5" in proc.stdout, proc.stdout
    assert "invalid-syntax" not in proc.stdout and "unexpected token" not in proc.stdout
    assert "Positional argument" not in proc.stdout, proc.stdout


def test_lint_of_a_dsl_file_that_is_not_utf8_names_the_encoding_error(tmp_path: Path) -> None:
    # The module cannot be imported or expanded (its bytes do not decode): lint must say so,
    # as `expand --check` does, not hand ruff a `$tile` it reports as Python's syntax error.
    _ruff_or_skip(tmp_path)
    (tmp_path / "grid.py").write_bytes(
        b"from tunedsl import autotune, cdiv\n\n# caf\xe9\n\ndef f(a, n):\n"
        b'    return autotune(space={"tile": [32, 64]}, blocks=cdiv(n, $tile), k(a, T=$tile))\n'
    )
    assert tunedsl("expand", "--check", "grid.py", cwd=tmp_path).returncode == 1
    proc = tunedsl("lint", "grid.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "line 3" in proc.stdout and "utf-8" in proc.stdout.lower(), proc.stdout
    assert "$" not in proc.stdout and "invalid-syntax" not in proc.stdout, proc.stdout


def test_lint_of_a_plain_module_with_a_latin1_comment_lints_it(tmp_path: Path) -> None:
    # A module that names tunedsl without binding the macro: compile() accepts the byte in
    # its comment (import runs it), and lint checks it as before.
    _ruff_or_skip(tmp_path)
    (tmp_path / "plain.py").write_bytes(
        b"import os\nimport json  # tunedsl caf\xe9\n\nx = os.sep\n"
    )
    proc = tunedsl("lint", "plain.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["plain.py:2:8: F401 `json` imported but unused"]


TRUNCATED = """\
import math

from tunedsl import autotune


def a(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=int(n / $tile), k(x, n, T=$tile))


def b(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(2, math.floor(n / $tile)), k(x, n, T=$tile))


def c(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=math.ceil(n / $tile), k(x, n, T=$tile))


def d(x, n):
    return autotune(space={"tile": [32, 64]}, blocks=(int(n / 2), $tile), k(x, n, T=$tile))
"""


def test_lint_warns_of_a_grid_truncating_a_true_division(tmp_path: Path) -> None:
    # `int(n / $tile)` and `math.floor(n / $tile)` round down as `n // $tile` does: the last,
    # partial block is never launched, and the configuration that skips the most work is
    # timed fastest and chosen. Only `//` was named. `math.ceil` rounds up, and a division
    # without a field is no grid of the configuration.
    _ruff_or_skip(tmp_path)
    (tmp_path / "trunc.py").write_text(TRUNCATED)
    proc = tunedsl("lint", "trunc.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "trunc.py:7:54: TDS001 warning: blocks= truncates a division with the configuration "
        "field $tile: `int(n / $tile)` rounds down as n // $tile does, so when n is not a "
        "multiple of $tile the last, partial block is never launched; use cdiv(n, $tile) (or "
        "add `# noqa: TDS001` where the floor is meant)",
        "trunc.py:11:58: TDS001 warning: blocks= truncates a division with the configuration "
        "field $tile: `math.floor(n / $tile)` rounds down as n // $tile does, so when n is "
        "not a multiple of $tile the last, partial block is never launched; use cdiv(n, "
        "$tile) (or add `# noqa: TDS001` where the floor is meant)",
    ], proc.stdout


def test_expand_check_takes_several_files_as_a_pre_commit_hook_passes_them(
    tmp_path: Path,
) -> None:
    # pre-commit (and `git diff --name-only | xargs`) passes every staged file at once; the
    # docs offer `expand --check` for such hooks, but it took one file and refused the rest
    # ("unrecognized arguments").
    good = 'from tunedsl import autotune\ndef f(k, n):\n    return autotune(space={"t": [1, 2]}, blocks=n, k(n, T=$t))\n'
    (tmp_path / "good.py").write_text(good)
    (tmp_path / "bad.py").write_text(good.replace("T=$t", "T=$tt"))
    (tmp_path / "also.py").write_text(good)
    proc = tunedsl("expand", "--check", "good.py", "bad.py", "also.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "good.py: ok" in proc.stderr and "also.py: ok" in proc.stderr, proc.stderr
    assert "bad.py:3:" in proc.stderr and "`$tt` is not a field of `space=`" in proc.stderr
    assert tunedsl("expand", "--check", "good.py", "also.py", cwd=tmp_path).returncode == 0
    missing = tunedsl("expand", "--check", "good.py", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2 and "cannot open 'nope.py'" in missing.stderr
    printed = tunedsl("expand", "good.py", "also.py", cwd=tmp_path)  # prints one module
    assert printed.returncode == 2
    assert "give one SCRIPT, or --check to validate several" in printed.stderr, printed.stderr


@pytest.mark.parametrize("command", [("lint",), ("expand", "--check")])
def test_a_directory_given_to_lint_or_expand_names_the_files_to_give(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # `tunedsl lint mypkg/` (as ruff takes it) said only "cannot open 'mypkg/': is a
    # directory", not what to give instead.
    (tmp_path / "mypkg").mkdir()
    proc = tunedsl(*command, "mypkg/", cwd=tmp_path)
    assert proc.returncode == 2
    fix = f"tunedsl {' '.join(command)} mypkg/*.py"
    assert f"cannot open 'mypkg/': is a directory; name its files: {fix}" in proc.stderr


def test_lint_from_a_subfolder_applies_the_projects_ruff_config(tmp_path: Path) -> None:
    # `tunedsl lint k.py` from sub/ gave ruff `--stdin-filename k.py`, relative, and ruff fell
    # back to its default settings: the project's select= (E702 here) was never applied.
    _ruff_or_skip(tmp_path)
    (tmp_path / "ruff.toml").unlink()
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["E7"]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.py").write_text(
        "from tunedsl import autotune, cdiv\n\n\ndef add(a, b, c, n):\n    x = 1; y = 2\n"
        "    return autotune(space=dict(tile=[256, 512]), blocks=cdiv(n, $tile),\n"
        "                    vadd(a, b, c, n, TILE=$tile)), x, y\n"
    )
    expected = ": E702 Multiple statements on one line (semicolon)"
    for cwd, typed in ((tmp_path, "sub/k.py"), (tmp_path / "sub", "k.py")):
        proc = tunedsl("lint", typed, cwd=cwd)
        # The path is shown as typed; the findings are the project's configuration's.
        assert proc.stdout.splitlines() == [f"{typed}:5:10{expected}"], (cwd, proc.stdout)
        assert proc.returncode == 1
