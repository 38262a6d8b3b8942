"""What the command line says in small situations, checked in real subprocesses: the "no GPU
driver" notice (after the script is found; silenced by ``TUNEDSL_QUIET``), the precompile
table (rows within 100 columns, keys as ``name=value`` items), and ``--tune`` without a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunedsl.autointerp import gpu_driver_present

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
no_gpu = pytest.mark.skipif(gpu_driver_present(), reason="this machine has a GPU driver")


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    out = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    for name in ("TRITON_INTERPRET", "TUNEDSL_QUIET", "TUNEDSL_NO_AUTO_INTERPRET"):
        out.pop(name, None)
    out.update(extra)
    return out


def tunedsl(tmp_path: Path, *argv: str, cwd: Path | None = None, **extra: str):
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        capture_output=True, text=True, timeout=300, cwd=cwd or tmp_path,
        env=env(tmp_path, **extra),
    )  # fmt: skip


# -- the "no GPU driver" notice -----------------------------------------------------------------
@no_gpu
def test_a_missing_script_gets_its_error_alone(tmp_path: Path) -> None:
    proc = tunedsl(tmp_path, "run", "mistyped.py")
    assert proc.returncode == 2
    assert "cannot open script 'mistyped.py'" in proc.stderr
    assert "no GPU driver" not in proc.stderr, proc.stderr


def test_python_options_before_the_script_say_how_to_run_a_module(tmp_path: Path) -> None:
    # `tunedsl run -m kernels`, as with python: "cannot open script '-m'" alone left the
    # user guessing; the error says run takes a path, and how to run a DSL module.
    (tmp_path / "kernels.py").write_text(  # DSL: plain Python cannot compile it
        "from tunedsl import autotune\n"
        "def f(k):\n"
        "    return autotune(space=dict(t=[1, 2]), blocks=1, k(T=$t))\n"
        "print('ran')\n"
    )
    proc = tunedsl(tmp_path, "run", "-m", "kernels")
    assert proc.returncode == 2
    assert "cannot open script '-m'" in proc.stderr
    assert "no options of its own (`-m` is python's)" in proc.stderr, proc.stderr
    advice = proc.stderr.split("`python -c '")[1].split("'`")[0]
    module = subprocess.run(
        [sys.executable, "-c", advice.replace("NAME", "kernels")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env(tmp_path),
    )  # fmt: skip
    assert module.returncode == 0, module.stderr
    assert module.stdout == "ran\n"


SCRIPT = "import os\nprint('interpreting:', os.environ.get('TRITON_INTERPRET'))\n"


@no_gpu
def test_tunedsl_quiet_silences_the_notice_but_the_interpreter_still_turns_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    loud = tunedsl(tmp_path, "run", "script.py")
    assert loud.returncode == 0 and "no GPU driver found" in loud.stderr
    quiet = tunedsl(tmp_path, "run", "script.py", TUNEDSL_QUIET="1")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "interpreting: 1"
    assert "no GPU driver" not in quiet.stderr, quiet.stderr
    hook = subprocess.run(
        [sys.executable, "-c", "import tunedsl.activate, os; print(os.environ['TRITON_INTERPRET'])"],
        capture_output=True, text=True, timeout=120, env=env(tmp_path, TUNEDSL_QUIET="1"),
    )  # fmt: skip
    assert hook.stdout.strip() == "1" and "no GPU driver" not in hook.stderr, hook.stderr


@no_gpu
@pytest.mark.parametrize("name", ["TUNEDSL_QUIET", "TUNEDSL_NO_AUTO_INTERPRET"])
def test_run_names_a_bad_interpreter_setting_without_a_traceback(tmp_path: Path, name: str) -> None:
    # The setting is read before the script runs: its error is tunedsl run's own, one line
    # naming the variable and the values it takes, not a traceback through tunedsl's frames.
    (tmp_path / "script.py").write_text(SCRIPT)
    proc = tunedsl(tmp_path, "run", "script.py", **{name: "banana"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"tunedsl run: error: environment variable {name}='banana' is "
                                  "not a boolean; use 1 or 0"), proc.stderr  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", ["TUNEDSL_QUIET", "TUNEDSL_NO_AUTO_INTERPRET"])
def test_run_names_a_bad_setting_when_the_interpreter_is_not_its_to_choose(
    tmp_path: Path, name: str
) -> None:
    # TRITON_INTERPRET set by the user (as a GPU driver does on a GPU host, for the same
    # early return): the script ran with the bad value unread, or failed inside its first
    # tuning with a traceback. It is named before the script runs, as without it.
    (tmp_path / "script.py").write_text(SCRIPT)
    proc = tunedsl(tmp_path, "run", "script.py", TRITON_INTERPRET="1", **{name: "banana"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"tunedsl run: error: environment variable {name}='banana' is "
                                  "not a boolean; use 1 or 0"), proc.stderr  # fmt: skip


# -- the precompile table -----------------------------------------------------------------------
@pytest.mark.needs_triton
def test_precompile_table_rows_fit_100_columns_with_name_value_keys(tmp_path: Path) -> None:
    examples = sorted(str(p) for p in EXAMPLES.glob("*.py"))
    proc = tunedsl(tmp_path, "precompile", *examples, cwd=REPO, TRITON_INTERPRET="1")
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("\nnote:")[0].splitlines()
    assert table[0].startswith("what ") and table[0].endswith("interpreted")
    assert all(len(line) <= 100 for line in table), max(table, key=len)
    sites = [line for line in table[3:] if not line.startswith("  {")]
    assert all(s.startswith(("examples/", ".../examples/")) for s in sites), sites
    keys = [line for line in table[2:] if line.startswith("  {")]
    assert len(sites) == len(keys) >= 5, table
    # A key is whole name=value items (arguments by name), never Python's reprs.
    assert any("a_ptr=float32[3079], b_ptr=float32[3079]" in k for k in keys), keys
    assert not any("torch." in k or "Size(" in k for k in keys), keys
    for key in keys:
        items = key.strip()[1:-1].split(", ")
        assert all("=" in item or item.startswith("+") for item in items), key
    assert any(key.endswith(" more}") for key in keys), keys  # the longest keys are counted


PRECOMPILED = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def sq(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


@workload
def warm():
    x = torch.empty(256)
    autotune(space=dict(tile=[32, 64]), blocks=cdiv(256, $tile), sq(x, x, 256, TILE=$tile))
"""


@pytest.mark.needs_triton
def test_precompile_progress_line_follows_tunedsl_quiet(tmp_path: Path) -> None:
    # TUNEDSL_QUIET=1 means no progress lines: precompile printed its own all the same.
    (tmp_path / "warm.py").write_text(PRECOMPILED)
    loud = tunedsl(tmp_path, "precompile", "warm.py", TRITON_INTERPRET="1")
    assert loud.returncode == 0, loud.stderr
    assert "precompile: compiled 0  cached 0  failed 0  interpreted 2" in loud.stderr
    quiet = tunedsl(tmp_path, "precompile", "warm.py", TRITON_INTERPRET="1", TUNEDSL_QUIET="1")
    assert quiet.returncode == 0, quiet.stderr
    assert "precompile:" not in quiet.stderr, quiet.stderr
    assert quiet.stdout.startswith("what ")  # the summary table stays
    # A value that is no boolean is named, as for every other command, not ignored.
    bad = tunedsl(tmp_path, "precompile", "warm.py", TRITON_INTERPRET="1", TUNEDSL_QUIET="banana")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "TUNEDSL_QUIET='banana' is not a boolean" in bad.stderr
    assert "Traceback" not in bad.stderr, bad.stderr


PRUNED = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def k(x, out, n, limit, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out + i, tl.load(x + i, mask=i < n) + limit, mask=i < n)


def f(x, limit):
    out = torch.empty_like(x)
    n = x.numel()
    return autotune(space=dict(tile=[16, 32, 64, 128]), blocks=cdiv(n, $tile),
                    prune=lambda cs, args: [c for c in cs if c.tile <= args["limit"]],
                    k(x, out, n, limit, TILE=$tile))


@workload
def warm():
    x = torch.empty(1024)
    f(x, 16)
    f(x, 128)
"""


@pytest.mark.needs_triton
def test_precompile_rows_of_one_signature_show_what_prune_reads(tmp_path: Path) -> None:
    # Two calls alike but for the value prune reads are two rows: each showed the same key,
    # with no `prune:limit=...`, though the docs promise it and --json carried none either.
    (tmp_path / "pruned.py").write_text(PRUNED)
    proc = tunedsl(tmp_path, "precompile", "pruned.py", TRITON_INTERPRET="1")
    assert proc.returncode == 0, proc.stderr
    keys = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  {")]
    assert keys == [
        "{prune:limit=16, x=float32[1024], out=float32[1024], n=i16, limit=i16}",
        "{prune:limit=128, x=float32[1024], out=float32[1024], n=i16, limit=i16}",
    ], proc.stdout
    data = tunedsl(tmp_path, "precompile", "--json", "pruned.py", TRITON_INTERPRET="1")
    import json

    prunes = [site["key"].get("prune") for site in json.loads(data.stdout)["sites"]]
    assert prunes == [{"limit": {"type": "int", "value": 16}},
                      {"limit": {"type": "int", "value": 128}}], data.stdout  # fmt: skip


def test_render_table_shortens_a_long_site_and_counts_what_does_not_fit() -> None:
    from tunedsl.cli.precompile import render_table
    from tunedsl.precompile.run import Summary
    from tunedsl.precompile.workload import SiteReport

    key = {"args": {f"arg{i}": {"dtype": "float16", "shape": [64, 64], "stride": "s1"}
                    for i in range(12)}, "user_key": [4096, 4096]}  # fmt: skip
    long_site = "/".join(["deeply"] * 20) + "/kernels.py:41:12 (matmul_kernel)"
    summary = Summary(reports=[SiteReport(long_site, key, compiled=4)])
    lines = render_table(summary).splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    site = lines[3]
    assert site.startswith(".../deeply/") and "/kernels.py:41:12 (matmul_kernel)" in site
    assert site.split()[-4:] == ["4", "0", "0", "0"]
    shown = lines[4].strip()
    assert shown.startswith("{key=(4096,4096), arg0=float16[64x64], arg1=float16[64x64], ")
    count = int(shown.rsplit("+", 1)[1].split()[0])
    assert len(shown[1:-1].split(", ")) - 1 + count == 13  # 12 arguments and the user key


# -- --tune without a GPU -----------------------------------------------------------------------
@pytest.mark.needs_triton
@pytest.mark.skipif(gpu_driver_present(), reason="this machine has a GPU driver")
def test_precompile_tune_without_a_gpu_says_it_needs_one(tmp_path: Path) -> None:
    example = str(EXAMPLES / "vector_add.py")
    plain = tunedsl(tmp_path, "precompile", "--tune", example)
    assert plain.returncode == 1
    assert "--tune measures kernels on a GPU, and this machine has none" in plain.stderr
    assert "leave --tune out" in plain.stderr and "--target cuda:90" in plain.stderr
    assert "cannot be combined with --target" not in plain.stderr
    interp = tunedsl(tmp_path, "precompile", "--tune", example, TRITON_INTERPRET="1")
    assert interp.returncode == 1
    assert "TRITON_INTERPRET=1 runs kernels in Triton's CPU interpreter" in interp.stderr
    for done in (plain, interp):  # the way to try the workflow on this machine
        assert "`tunedsl sweep --no-ray FILE` runs the workloads" in done.stderr
    both = tunedsl(tmp_path, "precompile", "--tune", "--target", "cuda:90", example)
    assert both.returncode == 1
    assert "cannot be combined with --target cuda:90" in both.stderr


BAD_WORKLOAD = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv, workload


@triton.jit
def k(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)


def copy(x):
    y = torch.empty_like(x)
    return autotune(space=dict(block=[32, 64]), blocks=cdiv(x.numel(), $block),
                    k(x, y, BLOCK=$block))


@workload
def w():
    copy(torch.randn(100))
"""


def test_a_failed_workload_is_placed_at_the_users_line(tmp_path: Path) -> None:
    # The mistake in the launch was placed at tunedsl's own file and line (mistakes.py).
    path = tmp_path / "badwl.py"
    path.write_text(BAD_WORKLOAD)
    done = tunedsl(tmp_path, "precompile", str(path), TRITON_INTERPRET="1")
    assert done.returncode == 1
    line = next(x for x in (done.stdout + done.stderr).splitlines() if "workload w failed" in x)
    assert "the launch passes nothing for `n`" in line
    assert line.endswith(f"(at {path}:15)"), line  # the autotune(...) line
    assert "tunedsl/" not in line.split("(at ")[-1]


IDLE = PRUNED.replace(
    "@workload\ndef warm():",
    "@workload\ndef sized(n=None):  # sizes from `tunedsl sweep --shapes`: none here\n"
    "    if n is not None:\n"
    "        f(torch.empty(n), 16)\n\n\n"
    "@workload\ndef warm():",
)


@pytest.mark.needs_triton
def test_precompile_names_a_workload_that_reached_no_site(tmp_path: Path) -> None:
    # A workload whose sizes come from `--shapes` calls no site when precompile calls it
    # without arguments: nothing of it was compiled, and the table said nothing (exit 0),
    # as if its kernels were warm.
    (tmp_path / "idle.py").write_text(IDLE)
    proc = tunedsl(tmp_path, "precompile", "idle.py", TRITON_INTERPRET="1")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if "reached no" in line]
    assert len(notes) == 1 and notes[0].startswith("note: "), proc.stdout
    assert notes[0].endswith(
        "idle.py:22: workload sized reached no autotune(...) or autotune_launch site, "
        "so nothing of it was compiled (precompile calls a workload without arguments: "
        "give its parameters defaults that call the sites)"
    ), notes  # `warm`, which calls its site, is not named


SIZED = PRUNED.replace(
    "@workload\ndef warm():",
    "@workload\ndef sized(n):  # sizes from `tunedsl sweep --shapes` only\n"
    "    f(torch.empty(n), 16)\n\n\n"
    "@workload\ndef warm():",
)


@pytest.mark.needs_triton
def test_precompile_skips_a_workload_whose_parameters_have_no_defaults_with_a_note(
    tmp_path: Path,
) -> None:
    # Called without arguments it raised a raw `TypeError: sized() missing 1 required
    # positional argument`, and precompile failed (exit 1) with every other workload warm.
    (tmp_path / "sized.py").write_text(SIZED)
    proc = tunedsl(tmp_path, "precompile", "sized.py", TRITON_INTERPRET="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TypeError" not in proc.stdout + proc.stderr
    notes = [line for line in proc.stdout.splitlines() if "workload sized" in line]
    assert len(notes) == 1 and notes[0].startswith("note: "), proc.stdout
    assert notes[0].endswith(
        "sized.py:22: workload sized takes n= without defaults, so precompile (which calls a "
        "workload without arguments) skipped it: give them defaults, or sweep it with "
        "`tunedsl sweep --shapes FILE`"
    ), notes


@no_gpu
@pytest.mark.needs_triton
def test_sweep_without_a_gpu_names_itself_in_the_interpreter_notice(tmp_path: Path) -> None:
    # `tunedsl sweep --no-ray` on a machine without a GPU said "the import hook runs kernels
    # through Triton's interpreter": a command the user never ran.
    (tmp_path / "wl.py").write_text(PRUNED)
    proc = tunedsl(tmp_path, "sweep", "--no-ray", "wl.py")
    assert proc.returncode == 0, proc.stderr
    assert "no GPU driver found: tunedsl sweep runs kernels through" in proc.stderr, proc.stderr
    assert "the import hook" not in proc.stderr


# -- a command's own warnings ----------------------------------------------------------------------
def test_a_warning_the_command_raises_itself_shows_no_launcher_line(tmp_path: Path) -> None:
    """An untrusted directory on TUNEDSL_RECORDS_PATH, named by `cache ls`: the warning was
    placed at the launcher's line (`.../bin/tunedsl:6: CacheWarning: ...` and
    `sys.exit(entry())`, or runpy's under `python -m tunedsl`), which told the user nothing."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    done = tunedsl(tmp_path, "cache", "ls", TUNEDSL_RECORDS_PATH=str(shared))
    assert done.returncode == 0, done.stderr
    assert f"tunedsl: CacheWarning: tuning records directory {shared}" in done.stderr
    assert "runpy" not in done.stderr and "sys.exit" not in done.stderr
    launcher = Path(sys.executable).parent / "tunedsl"
    if launcher.exists():  # the console script, as installed
        done = subprocess.run(
            [str(launcher), "cache", "ls"], capture_output=True, text=True, timeout=300,
            cwd=tmp_path, env=env(tmp_path, TUNEDSL_RECORDS_PATH=str(shared)),
        )  # fmt: skip
        assert "tunedsl: CacheWarning:" in done.stderr and str(launcher) not in done.stderr
