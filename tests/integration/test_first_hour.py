"""A new user's first hour, end to end: real scripts under ``tunedsl run`` in
subprocesses, real Triton kernels under the interpreter, real terminals (a pty), real ruff.

Covered: the interpreter turning itself on without a GPU driver, mistakes shown at the
user's line, progress on a terminal, the printed table, Jupyter, --plot and env, interpreter
twins measured once, CLI polish, lint, IPython importing DSL modules.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from html import escape
from pathlib import Path

import pytest

from tunedsl.autointerp import gpu_driver_present

pytestmark = pytest.mark.needs_triton

KERNEL = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv

{decorator}
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(c + i, tl.load(a + i, mask=m) + tl.load(b + i, mask=m), mask=m)

def add(a, b):
    c = torch.empty_like(a)
    n = a.numel()
    r = autotune(space=dict(tile=[64, 128], num_warps=[2, 4]), blocks={blocks},
                 vadd(a, b, c, n, TILE=$tile))
    return c, r

a, b = torch.randn(1000), torch.randn(1000)
c, r = add(a, b)
assert torch.allclose(c, a + b)
print("OK", r.config)
"""
USER_LINE = 20  # `c, r = add(a, b)`
SITE_LINE = 15  # the autotune(...) line


def script(
    tmp_path: Path, name: str = "user.py", *, progress_at_once: bool = False, **fmt: str
) -> Path:
    values = {"decorator": "@triton.jit", "blocks": "cdiv(n, $tile)", **fmt}
    path = tmp_path / name
    # The progress line at once, not after a second, and redrawn at every step, not at most
    # every _REDRAW_S: no test depends on the machine's speed (a quick tune drew one line).
    at_once = (
        "import tunedsl.progress\n"
        "tunedsl.progress.PROGRESS_AFTER_S = 0\n"
        "tunedsl.progress._REDRAW_S = 0\n"
    )
    path.write_text((at_once if progress_at_once else "") + KERNEL.format(**values))
    return path


def env(tmp_path: Path, *, interpret: bool = True, **extra: str) -> dict[str, str]:
    out = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    out.pop("TRITON_INTERPRET", None)
    out.pop("TUNEDSL_QUIET", None)
    if interpret:
        out["TRITON_INTERPRET"] = "1"
    out.update(extra)
    return out


def tunedsl(tmp_path: Path, *argv: str, **kw) -> subprocess.CompletedProcess[str]:
    kw.setdefault("env", env(tmp_path))
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, **kw,
    )  # fmt: skip


no_gpu = pytest.mark.skipif(gpu_driver_present(), reason="this machine has a GPU driver")


# -- the interpreter without a GPU driver -------------------------------------------------------
@no_gpu
def test_tunedsl_run_turns_the_interpreter_on_without_a_gpu(tmp_path: Path) -> None:
    path = script(tmp_path)
    proc = tunedsl(tmp_path, "run", str(path), env=env(tmp_path, interpret=False))
    assert proc.returncode == 0, proc.stderr
    assert "OK Config(" in proc.stdout
    assert proc.stderr.count("no GPU driver found") == 1
    assert "TRITON_INTERPRET=1" in proc.stderr


@no_gpu
def test_the_import_hook_turns_it_on_too_and_says_what_to_do_when_too_late(
    tmp_path: Path,
) -> None:
    on = subprocess.run(
        [sys.executable, "-c", "import tunedsl.activate, os; print(os.environ['TRITON_INTERPRET'])"],
        capture_output=True, text=True, env=env(tmp_path, interpret=False), timeout=120,
    )  # fmt: skip
    assert on.stdout.strip() == "1" and "no GPU driver found" in on.stderr
    late = subprocess.run(
        [sys.executable, "-c", "import triton, os, tunedsl.activate; "
         "print(os.environ.get('TRITON_INTERPRET'))"],
        capture_output=True, text=True, env=env(tmp_path, interpret=False), timeout=120,
    )  # fmt: skip
    assert late.stdout.strip() == "None"
    assert "Triton is already imported" in late.stderr
    assert "TRITON_INTERPRET=1 python script.py" in late.stderr


@no_gpu
def test_without_the_interpreter_the_error_says_what_to_do(tmp_path: Path) -> None:
    path = script(tmp_path)
    proc = tunedsl(
        tmp_path, "run", str(path),
        env=env(tmp_path, interpret=False, TUNEDSL_NO_AUTO_INTERPRET="1"),
    )  # fmt: skip
    assert proc.returncode == 1
    assert "0 active drivers" in proc.stderr
    # It is tunedsl run already: the error names what kept the interpreter off.
    assert "TUNEDSL_NO_AUTO_INTERPRET is set" in proc.stderr, proc.stderr
    assert "unset it, or set TRITON_INTERPRET=1" in proc.stderr
    assert "`tunedsl run script.py`" not in proc.stderr


@no_gpu
def test_an_interpreter_turned_off_by_hand_is_named_in_the_error(tmp_path: Path) -> None:
    path = script(tmp_path)
    proc = tunedsl(
        tmp_path, "run", str(path), env=env(tmp_path, interpret=False, TRITON_INTERPRET="0")
    )
    assert proc.returncode == 1
    assert "TRITON_INTERPRET='0' is set and is not on" in proc.stderr, proc.stderr
    assert "set TRITON_INTERPRET=1 to run on the CPU" in proc.stderr


def test_a_dsl_error_in_a_module_the_hook_imports_shows_no_front_end_frames(
    tmp_path: Path,
) -> None:
    # Plain Python importing a DSL module through the hook: six frames of tunedsl's front
    # end and bytecode cache stood between the user's import and the rendered error.
    script(tmp_path, "kern.py", blocks="cdiv(n, $tiel)")
    main = tmp_path / "main.py"
    main.write_text("import tunedsl.activate\nimport kern\n")
    proc = subprocess.run(
        [sys.executable, str(main)],
        capture_output=True, text=True, env=env(tmp_path), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert 'main.py", line 2, in <module>' in proc.stderr
    assert "`$tiel` is not a field of `space=`" in proc.stderr
    assert "did you mean `$tile`?" in proc.stderr
    for internal in ("frontend", "bytecode.py", "checks.py", "expand.py"):
        assert internal not in proc.stderr, proc.stderr


@pytest.mark.parametrize("how", ["hook", "run"])
def test_an_unknown_field_of_a_computed_space_says_what_compile_time_says(
    tmp_path: Path, how: str
) -> None:
    # The first call checks a computed space's fields: it said "is not a field of the space"
    # with no "did you mean", and through the import hook six of tunedsl's frames (site,
    # rule_plans, miss, site_settings, space) stood above the user's line.
    path = script(tmp_path, "kern.py")
    text = path.read_text().replace("TILE=$tile)", "TILE=$Tile)")
    text = text.replace("space=dict(tile=[64, 128], num_warps=[2, 4])", "space=SPACE")
    path.write_text(text.replace("def add(", "SPACE = dict(tile=[64, 128])\n\ndef add(", 1))
    if how == "hook":
        (tmp_path / "main.py").write_text("import tunedsl.activate\nimport kern\n")
        proc = subprocess.run(
            [sys.executable, "main.py"],
            capture_output=True, text=True, env=env(tmp_path), cwd=tmp_path, timeout=300,
        )  # fmt: skip
    else:
        proc = tunedsl(tmp_path, "run", "kern.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "`$Tile` is not a field of `space=`" in proc.stderr, proc.stderr
    assert "did you mean `$tile`?" in proc.stderr, proc.stderr
    assert "TILE=$Tile" in proc.stderr, proc.stderr
    own = [line for line in proc.stderr.splitlines() if "tunedsl/" in line]
    assert len(own) <= (1 if how == "hook" else 0), proc.stderr  # as for a UsageError
    for internal in ("rule_plans.py", "miss.py", "site_settings.py", "space.py"):
        assert internal not in proc.stderr, proc.stderr


# -- mistakes at the user's line ----------------------------------------------------------------
def test_a_kernel_without_jit_is_reported_at_the_users_line_only(tmp_path: Path) -> None:
    path = script(tmp_path, decorator="")
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 1
    assert "not a Triton kernel; decorate it with @triton.jit" in proc.stderr, proc.stderr
    assert proc.stderr.count("tunedsl.errors.UsageError") == 1  # once, not per configuration
    frames = [line for line in proc.stderr.splitlines() if line.strip().startswith('File "')]
    assert [f"line {USER_LINE}, in <module>", f"line {SITE_LINE}, in add"] == [
        line.split(", ", 1)[1] for line in frames
    ], proc.stderr
    assert all(str(path) in line for line in frames), proc.stderr


@pytest.mark.parametrize(
    "grid, message",
    [
        ("tensor", "blocks= is a tensor"),
        ("nested", "blocks= is a nested tuple"),
        ("function", "blocks= is a function"),
    ],
)
def test_bad_blocks_values_are_one_error_raised_from_the_call(grid: str, message: str) -> None:
    import traceback

    import torch
    from runtime_helpers import site
    from runtime_kernels import vadd

    from tunedsl.errors import UsageError

    n = 100
    a, b = torch.randn(n), torch.randn(n)
    value = {"tensor": torch.tensor([4]), "nested": ((4, 1), 2), "function": lambda meta: (4,)}
    bad = value[grid]
    s = site(f"bad-{grid}", space={"tile": [64, 128]})
    with pytest.raises(UsageError, match=message) as err:
        s(
            vadd,
            (a, b, torch.empty(n), n),
            {},
            lambda cfg: ((), {"TILE": cfg.tile}, bad),
            None,
            None,
        )
    frames = traceback.extract_tb(err.value.__traceback__)
    # This test's frame, then the site's call (which tunedsl run and IPython hide): no deeper.
    assert [f.name for f in frames] == [
        "test_bad_blocks_values_are_one_error_raised_from_the_call", "__call__",
    ]  # fmt: skip


def test_blocks_given_a_tuple_variable_says_how_to_write_the_grid(tmp_path: Path) -> None:
    # `blocks=grid` with `grid = (x, y)` is one dimension holding a tuple; the error called
    # it a nested tuple, which the user never wrote.
    path = script(tmp_path, blocks="grid")
    text = path.read_text().replace(
        "    n = a.numel()\n", "    n = a.numel()\n    grid = (16, 1)\n"
    )
    path.write_text(text)
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 1
    assert "blocks=grid is one value, the tuple (16, 1)" in proc.stderr, proc.stderr
    assert "write its dimensions in blocks=: blocks=(grid[0], grid[1])" in proc.stderr


@pytest.mark.parametrize(
    "blocks, fix",
    [
        # A variable of another name: the fix uses the user's name.
        ("g", "blocks=(g[0], g[1])"),
        # An expression: no variable holds the tuple; the fix names one first.
        (
            "(16, 1, 1)[:2] if n else (1, 16)",
            "compute it first (`grid = (16, 1, 1)[:2] if n else (1, 16)`) and write "
            "blocks=(grid[0], grid[1])",
        ),
        # An expression of `$` fields cannot be computed before the call: indexed in place.
        ("(cdiv(n, $tile), 1)[:2]", "blocks=((cdiv(n, $tile), 1)[:2][0], (cdiv(n, $tile), 1)"),
        ("g if $tile else g", "blocks=((g if $tile else g)[0], (g if $tile else g)[1])"),
        # A generator over a literal tuple: unrolled, not run twice in doubled parentheses
        # (`tuple((cdiv(d, $tile) for d in (n, 16)))[0], tuple((...))[1]`).
        ("tuple(cdiv(d, $tile) for d in (n, 16))", "blocks=(cdiv(n, $tile), cdiv(16, $tile))"),
        ("tuple([cdiv(d, $tile) for d in [n, 16]])", "blocks=(cdiv(n, $tile), cdiv(16, $tile))"),
        # Over a value: said in a sentence, the generator's parts quoted.
        (
            "tuple(d * $tile // $tile for d in g)",
            "write its dimensions in blocks=: blocks=(d0, d1), where each is "
            "`d * $tile // $tile` for one `d` of `g`",
        ),
    ],
)
def test_blocks_given_a_tuple_says_how_to_write_it_in_the_users_words(
    tmp_path: Path, blocks: str, fix: str
) -> None:
    # The error said `blocks=(grid[0], ...)` "for `grid = (2, 8, 1)`" whatever the user wrote,
    # naming a variable the code does not have.
    path = script(tmp_path, blocks=blocks)
    text = path.read_text().replace("    n = a.numel()\n", "    n = a.numel()\n    g = (16, 1)\n")
    path.write_text(text)
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 1
    assert f"blocks={blocks} is one value, the tuple (16, 1)" in proc.stderr, proc.stderr
    assert fix in proc.stderr, proc.stderr
    assert "for `grid =" not in proc.stderr, proc.stderr
    assert "((" not in proc.stderr.replace(f"({blocks}", ""), proc.stderr  # no doubled text


@pytest.mark.parametrize(
    "fmt, message",
    [
        ({"blocks": "lambda meta: (4,)"}, "not a function of the launch's meta-parameters"),
        ({"blocks": "((4, 1),)"}, "this tuple nests another tuple"),
    ],
)
def test_expand_check_rejects_grid_functions_and_nested_tuples(tmp_path, fmt, message) -> None:
    proc = tunedsl(tmp_path, "expand", "--check", str(script(tmp_path, **fmt)))
    assert proc.returncode == 1 and message in proc.stderr and "hint:" in proc.stderr
    assert "$" in proc.stderr.split("hint:")[1]  # the hint writes the grid with `$name`


def test_expand_check_finds_an_empty_axis(tmp_path: Path) -> None:
    path = script(tmp_path)
    path.write_text(path.read_text().replace("tile=[64, 128]", "tile=[]"))
    proc = tunedsl(tmp_path, "expand", "--check", str(path))
    assert proc.returncode == 1
    assert f"{path}:{SITE_LINE}:" in proc.stderr
    assert "space= field `tile` has no values" in proc.stderr


# -- progress, the printed table, interpreter twins ---------------------------------------------
def test_progress_line_on_a_real_terminal(tmp_path: Path) -> None:
    path = script(tmp_path, progress_at_once=True)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunedsl", "run", str(path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
        env=env(tmp_path),
    )  # fmt: skip
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    proc.communicate(timeout=300)
    assert proc.returncode == 0, seen
    text = seen.decode()
    assert "\x1b[Ktunedsl: tuning vadd  compiled" in text
    assert "measured 2/2" in text or "measured 1/2" in text
    assert "tunedsl: tuned vadd in" in text


def test_no_progress_line_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    proc = tunedsl(tmp_path, "run", str(script(tmp_path, progress_at_once=True)), env=env(tmp_path))
    assert proc.returncode == 0 and "tuning vadd" not in proc.stderr


def test_triton_print_autotuning_table_marks_remeasured_leaders_and_twins(tmp_path) -> None:
    proc = tunedsl(
        tmp_path, "run", str(script(tmp_path)), env=env(tmp_path, TRITON_PRINT_AUTOTUNING="1")
    )
    assert proc.returncode == 0, proc.stderr
    rows = [
        line for line in proc.stdout.splitlines() if "Config(tile=" in line and "ms" not in line
    ]
    remeasured = [r for r in rows if r.endswith("re-measured")]
    twins = [r for r in rows if "interpreter: timed as Config(tile=" in r]
    assert len(remeasured) == 2 and len(twins) == 2, proc.stdout
    starred = next(r for r in rows if r.startswith(" *"))
    assert starred.endswith("re-measured")
    assert "leading configurations were measured again" in proc.stdout


def test_interpreter_twins_are_measured_once(tmp_path: Path) -> None:
    import torch
    from runtime_helpers import call, site
    from runtime_kernels import vadd

    n = 1000
    a, b = torch.randn(n), torch.randn(n)
    result = call(
        site("twins", space={"tile": [64, 128], "num_warps": [2, 4, 8]}),
        vadd, (a, b, torch.empty(n), n), n,
    )  # fmt: skip
    times: dict[int, set[float]] = {}
    for cfg, r in result.timings.items():
        times.setdefault(cfg["tile"], set()).add(r.median_ms)
    # One measurement per tile: the num_warps variants share it (the interpreter ignores it).
    assert {tile: len(ms) for tile, ms in times.items()} == {64: 1, 128: 1}
    assert len(result.timings) == 6


# -- Jupyter, --plot, env -----------------------------------------------------------------------
def test_launch_result_renders_as_a_table_in_jupyter(tmp_path: Path) -> None:
    import torch
    from runtime_helpers import call, site
    from runtime_kernels import vadd

    n = 500
    a, b = torch.randn(n), torch.randn(n)
    result = call(site("jupyter", space={"tile": [64, 128]}), vadd, (a, b, torch.empty(n), n), n)
    html = result._repr_html_()
    assert html.count("<tr>") == 3  # header + two configurations
    assert "Config(tile=64)" in html and "Config(tile=128)" in html and " ms</td>" in html
    markdown = result._repr_markdown_()
    assert f"| * | `{result.config}` |" in markdown


HOSTILE_REASON = (
    "OutOfResources | injected cell | <img src=x onerror=alert(1)> "
    "[click](javascript:alert(1)) ![i](https://evil.example/i.png) www.evil.example\n\n# heading"
)


def test_a_records_text_in_jupyter_is_shown_as_text_never_as_markdown(tmp_path: Path) -> None:
    # A record from a bundle or another Redis client carries its own failure reasons and
    # configurations: Jupyter's Markdown must show them, never run their links, images,
    # tags or table cells.
    markdown_it = pytest.importorskip("markdown_it")
    import torch
    from runtime_helpers import call, load_json, new_process, record_files, site
    from runtime_kernels import vadd

    n = 500
    a, b = torch.randn(n), torch.randn(n)
    s = site("hostile-md", space={"tile": [64, 128]})
    call(s, vadd, (a, b, torch.empty(n), n), n)
    path = record_files()[0]
    record = load_json(path)
    for result in record["results"]:
        if result["config"] != record["chosen"]:  # the other one failed, with a crafted reason
            for field in ("median_ms", "spread", "reps", "min_ms"):
                result.pop(field, None)
            result.update(status="failed", reason=HOSTILE_REASON)
    path.write_text(json.dumps(record))
    new_process(s)
    result = call(s, vadd, (a, b, torch.empty(n), n), n)
    assert result.source == "disk"
    markdown = result._repr_markdown_()
    html = markdown_it.MarkdownIt("commonmark").enable("table").enable("linkify").render(markdown)
    assert "<img" not in html and "<a " not in html and "<h1" not in html, html
    assert html.count("<tr>") == 3, html  # the header and the two configurations
    assert html.count("<td>") == 6, html  # three cells each: the pipes split none
    shown = " ".join(HOSTILE_REASON.split())
    assert escape(shown, quote=False) in " ".join(html.split()), html
    assert f"<code>{result.config}</code>" in html, html


def test_cache_show_plot_import_from_stdin_and_env(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    proc = tunedsl(tmp_path, "run", str(script(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(tunedsl(tmp_path, "cache", "ls", "--json").stdout)
    ident = listed[0]["digest"][:12]
    png = tmp_path / "plot.png"
    shown = tunedsl(tmp_path, "cache", "show", ident, "--plot", str(png))
    assert shown.returncode == 0, shown.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    bundle = tunedsl(tmp_path, "cache", "export", "-").stdout
    assert tunedsl(tmp_path, "cache", "clear", "--all").returncode == 0
    imported = tunedsl(tmp_path, "cache", "import", "-", input=bundle)
    assert imported.returncode == 0 and "imported 1 record" in imported.stdout, imported.stderr
    assert len(json.loads(tunedsl(tmp_path, "cache", "ls", "--json").stdout)) == 1

    info = tunedsl(tmp_path, "env", "--json", "--no-device-probe",
                   env=env(tmp_path, TUNEDSL_SAFE="banana"))  # fmt: skip
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["versions"]["triton"] != "not installed"
    assert data["cache"]["records"].startswith(str(tmp_path / "cache"))
    assert "INVALID" in data["settings"]["TUNEDSL_SAFE"]
    assert data["settings"]["TRITON_INTERPRET"] == "'1'"


# -- CLI polish ---------------------------------------------------------------------------------
def test_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    body = "".join(f"x{i} = {i}\n" for i in range(20000))
    big.write_text(KERNEL.format(decorator="@triton.jit", blocks="cdiv(n, $tile)") + body)
    proc = subprocess.run(
        f"{sys.executable} -m tunedsl expand {big} | head -n 1",
        shell=True, capture_output=True, text=True, env=env(tmp_path), timeout=120,
    )  # fmt: skip
    assert proc.stdout.startswith("import ")  # the first line of the expansion
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_precompile_json_and_target_without_workload(tmp_path: Path) -> None:
    path = script(tmp_path)
    proc = tunedsl(tmp_path, "precompile", "--json", "--target", "cuda:90", str(path),
                   env=env(tmp_path, interpret=False))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is True and data["bytecode"]["compiled"] == 1
    assert data["workload_files"] == 0 and data["sites"] == []
    assert any(
        "no file under the given paths declares a @tunedsl.workload" in n for n in data["notes"]
    )


# -- lint ---------------------------------------------------------------------------------------
def test_lint_reports_ruff_findings_at_the_original_positions(tmp_path: Path) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists() and shutil.which("ruff") is None:
        pytest.skip("ruff is not installed")
    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["F"]\n')
    path = script(tmp_path)
    text = path.read_text().replace("    n = a.numel()\n", "    n = a.numel()\n    unused = n\n")
    path.write_text("import os\n" + text)
    proc = tunedsl(tmp_path, "lint", path.name)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"{path.name}:1:8: F401 `os` imported but unused" in lines
    assert any(line.startswith(f"{path.name}:16:5: F841") for line in lines), lines
    assert not any("F821" in line or "_tile" in line for line in lines), lines  # `$tile`
    clean = tunedsl(tmp_path, "lint", str(script(tmp_path, "clean.py")))
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout + clean.stderr


def test_lint_without_ruff_says_how_to_get_it(tmp_path: Path) -> None:
    path = script(tmp_path)
    bare = env(tmp_path, PATH="/nonexistent")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; sys.executable = '/nonexistent/python'; "
         "from tunedsl.cli import main; sys.exit(main(['lint', sys.argv[1]]))", str(path)],
        capture_output=True, text=True, env=bare, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "ruff is not installed" in proc.stderr and "pip install ruff" in proc.stderr


# -- key buckets --------------------------------------------------------------------------------
def test_key_buckets_keep_tritons_specialization(tmp_path: Path) -> None:
    """docs/runtime.md's example: key=n // 1024 merges sizes only within one Triton kernel."""
    import torch
    from runtime_helpers import call, site
    from runtime_kernels import vadd

    s = site("buckets", space={"tile": [64, 128]}, has_key=True)
    sources = []
    for n in (2048, 3072, 2050, 2064):
        a, b = torch.randn(n), torch.randn(n)
        sources.append(call(s, vadd, (a, b, torch.empty(n), n), n, key=n // 1024).source)
    assert sources == ["tuned", "tuned", "tuned", "memory"]
